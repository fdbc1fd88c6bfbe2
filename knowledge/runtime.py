"""The composition root: one ``Quire`` per process and data directory.

It opens the database (migrating it), builds the huey transport on the same file, the job registry
(filled by :mod:`knowledge.compose`), the job queue and — on demand — a worker and the encoders. The CLI and
the GUI both start here, so both call the very same operations.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, select

from jobs.doorbell import Doorbell
from jobs.queue import JobQueue
from jobs.recovery import RecoveryReport, recover
from jobs.registry import Registry
from jobs.runtime import DEFAULT_REPAIR_INTERVAL, Worker
from jobs.sessions import Session
from jobs.transport import Transport, WakeTransport
from knowledge import preferences
from knowledge.ingest import encode_watch
from knowledge.ingest.parse_worker import ParseWorkers
from knowledge.library.keyword_file import KeywordFiles
from knowledge.library.vector_file import VectorFiles
from knowledge.library.vector_indexes import VectorIndexBuilds
from knowledge.search.keyword_index import KeywordIndex
from knowledge.search.term_stats import TermStats
from knowledge.search.vector_index import VectorIndex, VectorSearch
from knowledge.search.vector_server import ServerVectors
from knowledge.store import apsw_dbapi, settings
from knowledge.store.database import Database, after_commit, open_raw_connection
from knowledge.store.migrations import migrate
from knowledge.store.schema import ACTIVE_STATUSES, items

if TYPE_CHECKING:
    from knowledge.ingest.embedding import Encoder
    from knowledge.ingest.models import EncoderChoice
    from knowledge.library.bases import Base

log = logging.getLogger(__name__)

REPAIR_INTERVAL_SETTING = "repair.interval_seconds"
WARM_UP_JOIN_SECONDS = 120.0  # a first OpenVINO conversion takes seconds; a stuck load must not hold exit


@dataclass
class Quire:
    data_dir: Path
    db: Database
    transport: WakeTransport
    registry: Registry
    queue: JobQueue
    _encoders: dict[str, Encoder] = field(default_factory=dict)
    # How search finds a base's nearest vectors: mapped from the base's file (a local store, filled on a base's
    # first vector search), or asked of the server (a team store: pgvector).
    vectors: VectorSearch = field(default_factory=VectorIndex)
    # What keyword search ranks with: each base's tantivy index in the data directory (a local store), or
    # nothing (a team store ranks in SQL); opened on a base's first keyword search.
    keywords: KeywordIndex = field(default_factory=KeywordIndex)
    # Keyword search's term counts per base (used when FTS5 ranks a large base).
    terms: TermStats = field(default_factory=TermStats)
    _encoders_lock: threading.Lock = field(default_factory=threading.Lock)
    # Tests and benchmarks may wrap encoders (e.g. to count calls); None means the real one.
    encoder_factory: Callable[[EncoderChoice, bool], Encoder] | None = None
    # Parsing runs in a child process per executor thread (knowledge.ingest.parse_worker), started on
    # first use: a hang or a crash in a parser costs one item, never this process.
    parsers: ParseWorkers = field(default_factory=ParseWorkers)
    # Rung once per committed transaction that made a job runnable; the worker holding it wakes at once.
    doorbell: Doorbell = field(default_factory=lambda: Doorbell(None))
    # The background warm-up (make_worker(warm=True)); close() waits for it: a process that exits while a
    # daemon thread is still inside a native model load aborts at interpreter shutdown.
    _warm_up: threading.Thread | None = None
    # A team store's HNSW builds in this process (a worker's; None elsewhere): close() stops one under way.
    vector_builds: VectorIndexBuilds | None = None
    # Set first by close(): work still running in the background (a keyword index build) stops.
    _closing: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def open(cls, data_dir: Path, *, hosts_worker: bool = False) -> Quire:
        """Open (and migrate) the data directory; job types are added by ``knowledge.compose``."""
        db = Database.in_dir(data_dir)  # creates the directory owner-only
        migrate(db)
        transport = Transport(lambda: apsw_dbapi.Connection(open_raw_connection(db.path)))
        registry = Registry()
        session = Session.for_this_process(hosts_worker=hosts_worker)
        queue = JobQueue(db, transport, registry, session)
        vectors = VectorIndex(VectorFiles(db, data_dir))  # mapped from each base's file in the data directory
        keywords = KeywordIndex(KeywordFiles(db, data_dir))
        doorbell = Doorbell.for_directory(data_dir)
        quire = cls(data_dir, db, transport, registry, queue, vectors=vectors, keywords=keywords, doorbell=doorbell)
        queue.on_enqueue = quire._ring_after_commit
        from knowledge.library.bases import verify_base_indexes

        verify_base_indexes(db)
        return quire

    @classmethod
    def open_team_store(
        cls,
        url: str,
        *,
        data_dir: Path,
        queue_url: str | None = None,
        hosts_worker: bool = False,
        create: bool = True,
    ) -> Quire:
        """Open (and migrate) a team store (a PostgreSQL URL). ``data_dir`` is this machine's own directory
        for owned copies and caches; ``queue_url`` (Redis) carries wake-ups — without it workers poll.
        ``create=False`` (every command but ``quire store init``): a database without Quire's schema is
        refused as not found instead of being given one."""
        from jobs.redis_transport import PollingTransport, RedisTransport
        from knowledge.errors import NotFound, SchemaMismatch
        from knowledge.store.migrations import MIGRATIONS
        from knowledge.store.permissions import make_private_dir
        from knowledge.store.postgres import PostgresDatabase, redacted
        from knowledge.store.schema_version import refuse_older

        make_private_dir(data_dir)
        db = PostgresDatabase(url)
        db.connect_check()
        if not create and not db.has_schema():
            db.dispose()
            raise NotFound(f"{redacted(url)} is not a Quire team store yet; create it with `quire store init URL`")
        try:
            refuse_older(db, [m.name for m in MIGRATIONS])  # `quire store upgrade` migrates a store in use
        except SchemaMismatch:
            db.dispose()
            raise
        migrate(db)
        transport: WakeTransport = PollingTransport()
        if queue_url is not None:
            transport = RedisTransport(queue_url, after_commit)
            _check_queue(transport, queue_url)
        registry = Registry()
        queue = JobQueue(db, transport, registry, Session.for_this_process(hosts_worker=hosts_worker))
        builds = VectorIndexBuilds(db) if hosts_worker else None
        if builds is not None:  # a process that runs jobs builds the HNSW indexes bases grew into
            registry.add_repair_scan(builds.repair_scan)
        quire = cls(data_dir, db, transport, registry, queue, vectors=ServerVectors(), vector_builds=builds)
        from knowledge.library.bases import verify_base_indexes

        verify_base_indexes(db)
        return quire

    @property
    def blobs_dir(self) -> Path:
        return self.data_dir / "blobs"

    def recover(self) -> RecoveryReport:
        """Startup recovery (every app or worker start, before taking jobs)."""
        return recover(self.queue)

    def make_worker(
        self, *, threads: int = 1, lease_seconds: float = 30.0, poll_interval: float = 0.5, warm: bool = False
    ) -> Worker:
        """A worker on this data directory; ``warm``: each executor starts its parse process at once and the
        encoders load in the background (:meth:`warm_up`), for a worker that waits for interactive work."""
        if warm and self._warm_up is None:
            self._warm_up = threading.Thread(target=self.warm_up, name="quire-warm-up", daemon=True)
            self._warm_up.start()
        return Worker(
            self.queue,
            threads=threads,
            lease_seconds=lease_seconds,
            poll_interval=poll_interval,
            paused=lambda: preferences.is_paused(self.db),
            repair_interval=self.repair_interval(),
            doorbell=self.doorbell,
            on_thread_start=(lambda: self.parsers.for_this_thread().warm()) if warm else None,
        )

    def person_name(self) -> str:
        """Who the person at this process is, as the store knows them: on a team store their database role
        (each person connects as their own), else this machine's user name."""
        if self.is_team_store:
            with self.db.read() as conn:
                return str(conn.exec_driver_sql("SELECT session_user").scalar())
        import getpass

        try:
            return getpass.getuser()
        except Exception:  # no user name in this environment (a container without a passwd entry)
            return "unknown"

    @property
    def is_team_store(self) -> bool:
        """Whether the store is shared by machines (PostgreSQL): workers may run anywhere."""
        return self.db.shared_by_machines

    def run_pinned_here(self, *, timeout: float | None = None) -> int:
        """On a team store, run the jobs pinned to this machine until none is left — the walks of its folders,
        which upload their files for workers elsewhere (``quire add`` and ``reindex`` wait for them, so the
        person's machine need not run a worker). Nothing on a data directory; returns the jobs run."""
        if not self.is_team_store:
            return 0
        worker = Worker(
            self.queue,
            pinned_only=True,
            paused=lambda: preferences.is_paused(self.db),
            repair_interval=None,
            doorbell=None,
        )
        return worker.run(until_idle=True, timeout=timeout)

    def _ring_after_commit(self, conn: Connection) -> None:
        after_commit(conn, self._ring)  # the same bound method: registered once per transaction

    def _ring(self, _db: Database) -> None:
        self.doorbell.ring()

    def repair_interval(self) -> float:
        """Seconds between a running worker's repair passes (setting ``repair.interval_seconds``)."""
        with self.db.read() as conn:
            raw = settings.get(conn, REPAIR_INTERVAL_SETTING)
        try:
            seconds = float(raw) if raw is not None else DEFAULT_REPAIR_INTERVAL
        except ValueError:
            seconds = -1.0
        if not seconds > 0:  # a stored value that is not a positive number never stops a worker starting
            log.warning(
                "%s is not a positive number of seconds; using %g", REPAIR_INTERVAL_SETTING, DEFAULT_REPAIR_INTERVAL
            )
            return DEFAULT_REPAIR_INTERVAL
        return seconds

    def document_encoder(self, base: Base) -> Encoder:
        """The ingest encoder for a base's model, precision and backend (loaded lazily, shared per process); a
        base with a remote ``embedder`` gets the bounded HTTP client (``knowledge.ingest.remote``) instead."""
        return self._encoder(base, query=False)

    def query_encoder(self, base: Base) -> Encoder:
        """The search encoder: one intra-op thread, so a query never fights an ingest for cores."""
        return self._encoder(base, query=True)

    def _encoder(self, base: Base, *, query: bool) -> Encoder:
        if base.embedder is not None:
            from knowledge.library.bases import assert_endpoint_confirmed

            assert_endpoint_confirmed(base)  # an imported endpoint is called only after a person confirmed it
            self._assert_endpoint_confirmed_here(base)
            return self._remote_encoder(base.embedder)
        from knowledge.ingest.models import EncoderChoice

        choice = EncoderChoice(base.model_id, base.precision, base.backend)
        with self._encoders_lock:  # two first searches on two threads must not build two encoders
            return self._encoder_locked(choice, query=query)

    def _assert_endpoint_confirmed_here(self, base: Base) -> None:
        """On a team store the endpoint and key variable are any writer's word: this machine sends texts (and
        the key it holds under that name) only where a person here confirmed."""
        from knowledge.library.bases import EndpointUnconfirmed
        from knowledge.store import machine_folders

        assert base.embedder is not None
        if not machine_folders.endpoint_confirmed(self.db, self.data_dir, base.embedder):
            raise EndpointUnconfirmed(
                f"knowledge base {base.name!r} embeds through {base.embedder.get('endpoint')!r} with the key "
                f"variable {base.embedder.get('api_key_env') or '(none)'}, which no one on this machine confirmed; "
                f"nothing is sent to it from here until you run `quire base confirm-endpoint {base.name}` here"
            )

    def _remote_encoder(self, embedder: dict[str, Any]) -> Encoder:
        from knowledge.ingest.remote import RemoteConfig, RemoteEncoder
        from knowledge.ingest.remote_turns import shared_turns

        config = RemoteConfig.from_json(embedder)
        key = "remote:" + json.dumps(embedder, sort_keys=True)
        with self._encoders_lock:
            if key not in self._encoders:
                # no remote call while this thread holds a write transaction: a slow endpoint would hold the lock;
                # the endpoint's rate and cap are counted in the store, across every process that opens it
                remote = RemoteEncoder(
                    config, in_transaction=lambda: self.db.current_write() is not None, turn=shared_turns(self.db)
                )
                self._encoders[key] = cast("Encoder", remote)
            return self._encoders[key]

    def _encoder_locked(self, choice: EncoderChoice, *, query: bool) -> Encoder:
        key = f"{':'.join(choice)}:{'q' if query else 'd'}"
        if key not in self._encoders:
            if self.encoder_factory is not None:
                self._encoders[key] = self.encoder_factory(choice, query)
            else:
                from knowledge.ingest.models import make_encoder

                self._encoders[key] = make_encoder(choice, query=query)
        return self._encoders[key]

    def has_indexing_work(self) -> bool:
        """Whether any item waits to be read or embedded (a worker started now will need the model)."""
        with self.db.read() as conn:
            row = conn.execute(select(items.c.id).where(items.c.status.in_(ACTIVE_STATUSES)).limit(1)).first()
        return row is not None

    def warm_up(self) -> None:
        """Load the encoder of every local base here and run one tiny batch through it, so the first job
        (a dropped note) pays no import, model load or first-call kernel set-up; then bring every base's
        keyword index up to its rows, so a base indexed before it had one (too large for a search to build
        it on the spot) gets it now. The window's worker calls this in a background thread at start; it
        holds the model lock only while it loads."""
        from knowledge.library.bases import list_bases

        listed = list_bases(self.db)
        wanted = {b.model_fingerprint: b for b in listed if b.embedder is None and b.status == "ok"}
        for stamp, base in sorted(wanted.items()):
            try:
                with encode_watch.bounded(1):  # a load that hangs ends this process, as a hung encode does
                    self.document_encoder(base).encode_documents(["warm up"])
            except Exception:  # a model that cannot load fails its jobs with the reason; nothing to add here
                log.warning("could not warm up the encoder %s", stamp, exc_info=True)
        files = self.keywords.files
        if files is None:
            return
        for base in listed:
            try:
                # a no-op when current; a first build takes minutes on a million chunks: close() stops it
                files.sync(base.id, stop=self._closing.is_set)
            except Exception:  # derived: search ranks with FTS5 until a later sync succeeds
                log.warning("could not bring the keyword index of base %s up to date", base.id, exc_info=True)

    def close(self) -> None:
        self._closing.set()
        if self.vector_builds is not None:
            self.vector_builds.close()
        if self._warm_up is not None:
            self._warm_up.join(timeout=WARM_UP_JOIN_SECONDS)
        for encoder in list(self._encoders.values()):
            closing = getattr(encoder, "close", None)  # an encoder with a process of its own
            if callable(closing):
                closing()
        self.parsers.close()
        self.transport.close()
        self.db.dispose()


def _check_queue(transport: Any, queue_url: str) -> None:
    """Reach the Redis server now: a wrong password found at the first push would surface only after a commit,
    with the job already stored and its wake-up lost. A server that does not answer is an outage, not a
    refusal: the command goes on (jobs are stored, workers poll the store), with a warning."""
    from redis.exceptions import AuthenticationError, ConnectionError, RedisError, TimeoutError

    from knowledge.errors import Forbidden, StoreError
    from knowledge.store.postgres import redacted, scrubbed

    try:
        transport.huey.storage.conn.ping()
    except AuthenticationError as exc:
        transport.close()
        said = scrubbed(str(exc), queue_url)
        raise Forbidden(f"the queue {redacted(queue_url)} refused the connection: {said}") from None
    except (ConnectionError, TimeoutError) as exc:
        where, said = redacted(queue_url), scrubbed(str(exc), queue_url)
        log.warning("cannot reach the queue %s (%s); jobs wait in the store for workers that poll it", where, said)
    except RedisError as exc:
        transport.close()
        raise StoreError(f"cannot reach the queue {redacted(queue_url)}: {scrubbed(str(exc), queue_url)}") from None
