"""Execution of a ``knowledge.folder-run`` job: enter, settle each source in turn, then the terminal transition.

Sources are prepared a group at a time (:mod:`knowledge.folder_runs.group`: one coverage read, one parse
request and one encoder call for the group) and settled one per transaction, in manifest order, with the
cancellation check before each. Groups are pipelined as an index job's batches are: while group k is
embedded on the encoder's thread (:mod:`knowledge.ingest.pipeline`), the job's thread settles group k-1 and
prepares group k+1. The sources being worked on are marked in flight as they are (a group from its chunking
to the end of its encode, the one settled, a slow parse); a source in flight across two worker deaths
settles ``quarantined`` when the next attempt enters, and the run goes on (:mod:`knowledge.folder_runs.deaths`).

A person's cancel request (:mod:`knowledge.folder_runs.cancel`: the job's ``cancel_requested``, read in every
source's transaction, before every group and while a group's vectors are awaited) stops the attempt there: its
in-flight marks are cleared and the run ends ``cancelled`` at once (fenced, one terminal entry); a queued encode
never starts and the running one is waited for after that, so the job ends ``cancelled`` once it is done.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import func

from jobs.errors import Cancelled, ControlFlow, Superseded
from jobs.runtime import JobContext, sanitize_error
from knowledge.errors import KnowledgeError, SecondLiveItem
from knowledge.folder_runs.commit import RunTally, Settling, record_outcome, settle_source_in_tx
from knowledge.folder_runs.deaths import (
    DEATHS_BEFORE_QUARANTINE,
    QUARANTINED,
    Flight,
    clear_in_flight,
    count_deaths,
    settle_quarantined,
)
from knowledge.folder_runs.group import next_window, prepare_group
from knowledge.folder_runs.ledger import (
    EarlierCommit,
    ManifestSource,
    RunRecord,
    fence_run,
    lineage_commits,
    load_manifest,
    load_run,
    run_counts,
    settle_cancelled,
    settle_failed,
    settle_terminal,
    settled_sources,
    size_and_counts,
    transition,
)
from knowledge.folder_runs.principal import ingest_agent
from knowledge.folder_runs.rules import ALREADY_COMMITTED, COMMITTED, MAX_ROUNDS, RunFault, SourceChanged
from knowledge.folder_runs.source import SourceTools, embed_works, prepare_source, write_owned_copies
from knowledge.ingest.pipeline import ENCODE_STAGE
from knowledge.ingest.walk import VISIBLE, judge_path
from knowledge.library import audit
from knowledge.library.bases import load_base
from knowledge.library.index_syncs import gathered
from knowledge.store import machine_folders
from knowledge.store.schema_runs import (
    TERMINAL_RUN_STATUSES,
    folder_runs,
)

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)

CANCEL_POLL_SECONDS = 0.5  # how often a wait for a group's vectors looks for a cancel request


# -- execution ---------------------------------------------------------------------------------


def execute_run(quire: Quire, ctx: JobContext) -> dict[str, Any]:
    """The ``knowledge.folder-run`` handler (see the module docstring for the contract)."""
    run_id = ctx.payload.get("run_id")
    if type(run_id) is not int:
        log.warning("folder-run job %s has no run id in its payload; refused", ctx.job_id)
        return {"refused": "malformed job payload"}
    with quire.db.read() as conn:
        run = load_run(conn, run_id)
    if run is None:
        return {"run_id": run_id, "skipped": "the run no longer exists"}
    if run.job_id != ctx.job_id:
        log.warning("job %s is not the job bound to folder run %s; refused", ctx.job_id, run_id)
        return {"run_id": run_id, "refused": "this job is not bound to the run"}
    if run.status in TERMINAL_RUN_STATUSES:
        return {"run_id": run_id, "status": run.status}  # a replay of a terminal run writes nothing
    agent = ingest_agent(quire, run.base_id)
    entered = _enter(quire, ctx, run)
    if entered is None:
        return {"run_id": run_id, "status": "terminal"}
    encodes: list[Future[Any]] = []  # this attempt's group encodes
    try:
        fault = _payload_fault(ctx.payload, entered) or _folder_fault(quire, entered)
        if fault is not None:
            raise RunFault(fault)
        with gathered(quire.db):  # one source per transaction: the derived files catch up every few seconds
            tally = _process(quire, ctx, entered, agent, encodes)
        counts = _complete(ctx, entered)
    except Cancelled:  # a person's request (cancel.py): the run ends cancelled now, the job once its encode ends
        _cancel(ctx, entered)
        raise
    except ControlFlow:
        raise
    except Exception as exc:
        log.warning("folder run %s attempt %s failed: %s", run_id, ctx.attempt, _fault_reason(exc))
        counts = _fail(ctx, entered, exc)
        return {"run_id": run_id, "status": "failed", "counts": counts}
    finally:
        _stop_encodes(encodes)
    return {"run_id": run_id, "status": "completed", "counts": counts, "this_attempt": dict(tally)}


def _payload_fault(payload: dict[str, Any], run: RunRecord) -> str | None:
    if payload.get("base_id") != run.base_id:
        return "malformed job payload: it names another knowledge base"
    if payload.get("approved_by") != run.approved_by:
        return "authorization failure: the job does not carry the run's approval"
    return None


def _folder_fault(quire: Quire, run: RunRecord) -> str | None:
    """A run walks and reads a folder of this machine: only one a person here started it for (a job row naming
    this machine is any team member's word)."""
    if machine_folders.may_read(quire.db, quire.data_dir, run.folder):
        return None
    return f"authorization failure: the run's folder was {machine_folders.NOT_ADDED_HERE}"


def _enter(quire: Quire, ctx: JobContext, run: RunRecord) -> RunRecord | None:
    """Stamp this attempt as the run's owner (pending → running, or take over); None if it is terminal."""
    with ctx.write() as conn:
        current = load_run(conn, run.id)
        if current is None or current.status in TERMINAL_RUN_STATUSES:
            return None
        if current.status == "running" and current.owner_attempt is not None:
            if current.owner_attempt > ctx.attempt:
                raise Superseded(f"folder run {run.id} is owned by a newer attempt; attempt {ctx.attempt} stands down")
            if current.owner_attempt == ctx.attempt:
                return current  # this attempt was handed back earlier and resumes (not a new entry)
        transition(
            conn,
            run.id,
            current.base_id,
            audit.RUN_STARTED,
            audit.SYSTEM_ACTOR,
            {**size_and_counts(conn, run.id, current.declared_size), "resumed": current.status == "running"},
            attempt=ctx.attempt,
            values={
                "status": "running",
                "owner_attempt": ctx.attempt,
                "started_at": func.coalesce(folder_runs.c.started_at, time.time()),
            },
        )
        return load_run(conn, run.id)


def _process(quire: Quire, ctx: JobContext, run: RunRecord, agent: str, encodes: list[Future[Any]]) -> Counter[str]:
    """Walk the manifest from the start; settle every source that is not settled yet, one per transaction."""
    tally: Counter[str] = Counter()
    # what an earlier attempt left in flight died with it (deaths.py); a run cancelled meanwhile stops here
    with ctx.write(unless_cancelled=True) as conn:
        deaths = count_deaths(conn, run.id, ctx.attempt)
        for source_id, died in deaths.items():
            if died >= DEATHS_BEFORE_QUARANTINE:
                settle_quarantined(conn, run.id, source_id, ctx.attempt)
                tally[QUARANTINED] += 1
        fence_run(conn, run.id, ctx.attempt)
    with quire.db.read() as conn:
        base = load_base(conn, run.base_id)
        sources = load_manifest(conn, run.id)
        settled = settled_sources(conn, run.id)
        earlier = lineage_commits(conn, run.retry_of)
    if len(sources) != run.declared_size:
        raise RunFault("invariant violation: the manifest does not have the run's declared size")
    tools = SourceTools(quire, base, flight=Flight(ctx, run.id))
    done = len(settled)
    ctx.progress(done, run.declared_size, "ingesting")
    for source in sources:
        if source.id in settled:
            tally[ALREADY_COMMITTED if settled[source.id] == COMMITTED else "settled_before"] += 1
    todo = deque(s for s in sources if s.id not in settled)
    for source in [s for s in todo if _committed_earlier(earlier, s) is not None]:
        ctx.check_cancelled()
        if _settle_already_committed(ctx, run, source):
            todo.remove(source)
            tally[ALREADY_COMMITTED] += 1
            done += 1
            ctx.progress(done, run.declared_size, "ingesting")
    progress = _Progress(done, run.declared_size)
    try:
        settling = Settling(ctx, run, tools, agent, RunTally(run.id, run.declared_size))
        _ingest(settling, todo, deaths, tally, progress, encodes)
    except BaseException:
        clear_in_flight(quire.db, run.id, ctx.attempt)  # stopped, not killed: nothing died here
        raise
    return tally


@dataclass
class _Progress:
    done: int
    total: int


def _ingest(
    settling: Settling,
    todo: deque[ManifestSource],
    deaths: dict[int, int],
    tally: Counter[str],
    progress: _Progress,
    encodes: list[Future[Any]],
) -> None:
    """Group by group, pipelined as an index job's batches are: group k+1 is read, parsed and chunked while
    group k is embedded on the encoder's thread, then group k settles, source by source, while group k+1 is
    embedded. A source that died before is worked on alone: the group before it settles first, and the
    next group is read only once it has settled. Each encode goes into ``encodes`` (the handler stops them)."""
    ctx, tools = settling.ctx, settling.tools
    root = Path(settling.run.folder)
    embedding: tuple[list[ManifestSource], Future[Any]] | None = None
    settle = partial(_settle_group, settling, tally=tally, progress=progress)
    while todo:
        ctx.check_cancelled()
        window = next_window(todo, deaths)
        alone = bool(deaths.get(window[0].id, 0))
        if alone and embedding is not None:
            settle(*embedding)
            embedding = None
        try:
            group = prepare_group(tools, root, window)
        except ControlFlow:
            raise
        except Exception:
            if embedding is not None:  # the sources before the fault settle first, as one at a time did
                settle(*embedding)
            raise
        todo.extendleft(reversed(window))  # what the group did not take goes first next time
        encodes.append(ENCODE_STAGE.submit(embed_works, tools, [tools.ready[s.id] for s in group]))
        assert tools.flight is not None
        tools.flight.encoding([s.id for s in group], encodes[-1])
        if embedding is not None:
            settle(*embedding)
        embedding = (group, encodes[-1])
        if alone:
            settle(*embedding)
            embedding = None
    if embedding is not None:
        settle(*embedding)


def _stop_encodes(encodes: Sequence[Future[Any]]) -> None:
    """Never leave an encode of this run running behind its attempt: a queued one never starts, a running one
    is waited for (after the run's terminal transition, so a cancel is not held up by it)."""
    for encode in encodes:
        encode.cancel()
        with contextlib.suppress(BaseException):
            encode.result()


def _settle_group(
    settling: Settling,
    group: list[ManifestSource],
    encode: Future[Any],
    *,
    tally: Counter[str],
    progress: _Progress,
) -> None:
    """Wait for the group's vectors (an unavailable endpoint raises here: the run faults; a cancel request is
    looked for meanwhile), write its owned copies, then settle its sources one per transaction, in order, each
    transaction checking first for a cancel request."""
    tools = settling.tools
    while not wait([encode], timeout=CANCEL_POLL_SECONDS).done:  # an encode takes seconds: a cancel need not
        settling.ctx.check_cancelled()
    encode.result()
    write_owned_copies(tools, [tools.ready.get(s.id) for s in group])
    assert tools.flight is not None
    tools.flight.release([s.id for s in group])
    tools.flight.move([group[0].id])  # embedded: from now on only the one being settled
    for n, source in enumerate(group):  # each source's transaction checks for a cancel request first
        then = [s.id for s in group[n + 1 : n + 2]]
        last = progress if not then else None  # the job's progress, once a group: in its last transaction
        tally[_settle_source(settling, source, then_in_flight=then, progress=last)] += 1
        progress.done += 1


def _committed_earlier(earlier: dict[str, EarlierCommit], source: ManifestSource) -> EarlierCommit | None:
    found = earlier.get(source.relative_path)
    return found if found is not None and found.sha256 == source.content_sha256 else None


def _settle_already_committed(ctx: JobContext, run: RunRecord, source: ManifestSource) -> bool:
    """A retry's source the failed run committed: stored ``already_committed`` with the item that holds it,
    if that item is still live when judged under the lock (else the source is ingested as any other)."""
    with ctx.write() as conn:
        commit = _committed_earlier(lineage_commits(conn, run.retry_of), source)
        if commit is None:
            return False
        record_outcome(
            conn, ctx, run, source, ALREADY_COMMITTED, f"run {commit.run_id} committed it", item_id=commit.item_id
        )
        fence_run(conn, run.id, ctx.attempt)
    return True


def _settle_source(
    settling: Settling,
    source: ManifestSource,
    *,
    then_in_flight: Sequence[int],
    progress: _Progress | None = None,
) -> str:
    """Settle in one fenced transaction what its group prepared (a source that changed meanwhile is read
    again on its own, up to ``MAX_ROUNDS``); re-file read entries if the transaction rolls back. The same
    transaction hands the in-flight mark on to ``then_in_flight`` (the next source to settle) and, given
    ``progress`` (the sources settled before this one), records the job's progress."""
    ctx, run, tools = settling.ctx, settling.run, settling.tools
    quire = tools.quire
    root = Path(run.folder)
    for round_no in range(MAX_ROUNDS):
        if round_no == 0 and source.id in tools.ready:
            work = tools.ready.pop(source.id)
        else:
            pre = judge_path(root, source.relative_path, hidden=[quire.data_dir])
            work = prepare_source(tools, root, source) if pre.verdict == VISIBLE else None
        reads: list[audit.PendingEntry] = []
        try:
            with ctx.write(unless_cancelled=True) as conn:
                disposition = settle_source_in_tx(
                    conn, settling, source, work, reads, last_round=round_no == MAX_ROUNDS - 1
                )
                assert tools.flight is not None
                tools.flight.now(conn, then_in_flight)
                if progress is not None:  # this source included
                    ctx.progress(progress.done + 1, progress.total, "ingesting")
                fence_run(conn, run.id, ctx.attempt)  # immediately before commit, under the write lock
            return disposition
        except (SourceChanged, SecondLiveItem):  # changed, or another writer's item stands for it now: judged again
            _refile(quire, reads)
        except BaseException:
            _refile(quire, reads)
            raise
    raise RunFault("invariant violation: a source was neither settled nor retried")  # pragma: no cover


def _refile(quire: Quire, reads: Sequence[audit.PendingEntry]) -> None:
    try:
        audit.append_reads(quire.db, reads)
    except Exception:  # the original failure matters more; the read is logged at least
        log.exception("could not file %d read audit entries again", len(reads))


def _complete(ctx: JobContext, run: RunRecord) -> dict[str, int]:
    """running → completed, guarded on the stamp; the entry's counts are read here, under the lock. A cancel
    request that committed before this transaction wins: it was accepted while the run was running."""
    with ctx.write(unless_cancelled=True) as conn:
        fence_run(conn, run.id, ctx.attempt)
        counts = run_counts(conn, run.id, run.declared_size)
        if counts["pending"] != 0:
            raise RunFault("invariant violation: the run reached its end with unsettled sources")
        settle_terminal(conn, run, ctx.attempt, counts)
    return counts


def _cancel(ctx: JobContext, run: RunRecord) -> None:
    """running → cancelled, guarded on the stamp, with its one terminal entry (what committed stays)."""
    with ctx.write() as conn:
        fence_run(conn, run.id, ctx.attempt)
        counts = settle_cancelled(conn, run, ctx.attempt)
    log.info("folder run %s cancelled by request at %d of %d sources", run.id, counts["settled"], run.declared_size)


def _fault_reason(exc: BaseException) -> str:
    """A short, path-free reason for a run fault."""
    if isinstance(exc, KnowledgeError):
        return str(exc)[:300]
    if isinstance(exc, sa_exc.DBAPIError):
        orig = exc.orig if exc.orig is not None else exc
        return f"database error: {str(orig).splitlines()[0][:300]}" if str(orig) else "database error"
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc.strerror or 'operating system error'}"
    return sanitize_error(exc)[:300]


def _fail(ctx: JobContext, run: RunRecord, exc: BaseException) -> dict[str, int]:
    """running → failed, guarded on the stamp, with its one terminal entry."""
    reason = _fault_reason(exc)
    with ctx.write() as conn:
        fence_run(conn, run.id, ctx.attempt)
        return settle_failed(conn, run, ctx.attempt, reason)
