"""Core commands: ``jobs``, ``worker``, ``gui``; the store's opening that every command shares."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.cli.base import Output, TemporaryFailure, UsageError
from app.cli.paging import add_paging, limit_of, next_cursor, paged, with_more
from app.cli.worker_progress import ProgressLine, default_interval
from jobs.outage import OutageTooLong
from knowledge import preferences
from knowledge.compose import open_quire
from knowledge.principal import Principal
from knowledge.runtime import Quire

JOB_STATUSES = ("pending", "running", "completed", "failed", "cancelled")
WORKER_NICENESS = 10
# Overrides the worker.nice preference for every worker this environment starts (the window's included): the
# test suite sets 0, since a niced worker starves beside the other test process and the test waits on it.
NICE_ENV = "QUIRE_WORKER_NICE"


def principal_of(args: argparse.Namespace, quire: Quire) -> Principal:
    """Who asks: the agent named by ``--as-agent``, else the person — on a team store their own database role
    (so audit entries and folder runs name that person), else this machine's user."""
    if getattr(args, "as_agent", None):
        return Principal.agent(str(args.as_agent))
    return Principal.person(quire.person_name())


def person_of(quire: Quire) -> str:
    """The person as an actor or owner: ``person:NAME`` (see :func:`principal_of`)."""
    return f"person:{quire.person_name()}"


@contextlib.contextmanager
def opened(args: argparse.Namespace, *, hosts_worker: bool = False) -> Iterator[Quire]:
    """The chosen store, open: a team store (``--store``/``QUIRE_STORE``) or the data directory."""
    if getattr(args, "store", None):
        from knowledge.compose import open_team_quire

        quire = open_team_quire(
            args.store, data_dir=Path(args.data_dir), queue_url=args.queue, hosts_worker=hosts_worker, create=False
        )
        try:
            yield quire
        finally:
            quire.close()
        return
    with open_data_dir(Path(args.data_dir), hosts_worker=hosts_worker) as quire:
        yield quire


@contextlib.contextmanager
def open_data_dir(data_dir: Path, *, hosts_worker: bool = False) -> Iterator[Quire]:
    """The data directory, open; a directory that cannot be opened is explained (a sentence and the ways
    back), not reported as an errno."""
    try:
        quire = open_quire(data_dir, hosts_worker=hosts_worker)
    except Exception:
        from knowledge.portable import explain_open_failure

        problem = explain_open_failure(data_dir)
        if problem is not None:
            raise problem from None
        raise
    try:
        yield quire
    finally:
        quire.close()


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("jobs", parents=[common], help="list jobs; `jobs pause|resume` pauses or resumes indexing")
    p.add_argument("jobs_action", nargs="?", choices=("list", "pause", "resume"), default="list", metavar="ACTION")
    p.add_argument("--status", choices=JOB_STATUSES)
    add_paging(p)
    p.set_defaults(func=cmd_jobs)

    p = sub.add_parser("worker", parents=[common], help="run the job consumer in the foreground")
    p.add_argument("--until-idle", action="store_true", help="exit when no runnable job is left")
    p.add_argument("--timeout", type=float, help="exit after this many seconds")
    p.add_argument("--threads", type=int, help="jobs at once (default: the worker.threads preference)")
    p.add_argument("--lease-seconds", type=float, default=30.0)
    p.add_argument("--no-watch", action="store_true", help="do not watch synced folders (they are not reconciled)")
    p.add_argument(
        "--log",
        action="store_true",
        help="also log to worker.log in the data directory (owner-only, rotated at 10 MB, 3 kept): the window's worker",
    )
    p.add_argument(
        "--warm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="load the model and start the parse process at once (default: unless --until-idle finds nothing to index)",
    )
    p.add_argument(
        "--progress-every",
        type=float,
        metavar="SECONDS",
        help="report progress on stderr this often (default: every second on a terminal, a line every 30 s "
        "otherwise; 0: never)",
    )
    p.add_argument(
        "--nice",
        type=int,
        help=f"lower the worker's CPU priority by this much (default: ${NICE_ENV} if set, else the worker.nice "
        f"preference, {WORKER_NICENESS})",
    )
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("gui", parents=[common], help="open the desktop window")
    p.set_defaults(func=cmd_gui)


def cmd_jobs(args: argparse.Namespace, out: Output) -> int:
    if args.jobs_action in ("pause", "resume"):
        return cmd_jobs_pause(args, out)
    limit = limit_of(args)
    with opened(args) as quire:
        records = quire.queue.list(status=args.status, limit=limit, after_id=args.after)
    rows = [r.as_dict() for r in records]
    more = next_cursor(records, limit, lambda r: int(r.id))
    out.emit(
        paged("jobs", rows, more),
        lambda d: with_more(
            "\n".join(
                f"{r['id']:>6} {r['type']:<18} {r['status']:<10} attempt {r['attempt']} "
                f"{r['progress_done']}/{r['progress_total']} {job_machine(r)}{r['last_error'] or ''}"
                for r in d["jobs"]
            )
            or "no jobs",
            more,
        ),
    )
    return 0


def job_machine(job: dict[str, Any]) -> str:
    """A job's machine in ``quire jobs``, and for a pending pinned job why it waits."""
    if not job.get("host"):
        return ""
    if job["status"] == "pending":
        return f"on {job['host']}: waiting for a worker on {job['host']} "
    return f"on {job['host']} "


def cmd_jobs_pause(args: argparse.Namespace, out: Output) -> int:
    paused = args.jobs_action == "pause"
    with opened(args) as quire:
        preferences.set_paused(quire.db, paused)
        waiting = quire.queue.live_count()
    out.emit(
        {"paused": paused, "live_jobs": waiting},
        "indexing paused: running jobs finish, no new job starts" if paused else "indexing resumed",
    )
    return 0


def cmd_worker(args: argparse.Namespace, out: Output) -> int:
    log_file: logging.Handler | None = None
    if args.log:
        from knowledge.store.private_log import worker_log_handler

        log_file = worker_log_handler(Path(args.data_dir))
        logging.getLogger().addHandler(log_file)
    keep_warnings_off_the_terminal(log_file)
    if args.nice is None:
        args.nice = nice_from_environment()
    if args.threads is None or args.nice is None:
        from knowledge import preferences

        with opened(args) as quire:
            if args.threads is None:
                args.threads = int(preferences.get(quire.db, "worker.threads"))
            if args.nice is None:
                args.nice = int(preferences.get(quire.db, "worker.nice"))
    if args.threads < 1:
        raise UsageError("--threads must be at least 1")
    if not 0 <= args.nice <= 19:
        raise UsageError(f"--nice (or {NICE_ENV}) must be between 0 and 19")
    if args.progress_every is not None and not args.progress_every >= 0:
        raise UsageError("--progress-every takes a number of seconds, 0 or more")
    lower_priority(args.nice)
    with opened(args, hosts_worker=True) as quire:
        report = quire.recover()
        warm = args.warm if args.warm is not None else (not args.until_idle or quire.has_indexing_work())
        worker = quire.make_worker(threads=args.threads, lease_seconds=args.lease_seconds, warm=warm)
        _stop_on_signals(worker.stop)
        watcher = None
        if not args.until_idle and not args.no_watch:  # the watcher only schedules sync jobs
            from knowledge.sync import SyncWatcher

            watcher = SyncWatcher(quire)
            watcher.start()
        interval = args.progress_every if args.progress_every is not None else default_interval(sys.stderr)
        progress = ProgressLine(quire, sys.stderr, interval).start()
        try:
            done = worker.run(until_idle=args.until_idle, timeout=args.timeout)
        except OutageTooLong as exc:  # never exit 0 on a lost link: a service manager restarts on failure
            raise TemporaryFailure(str(exc)) from None
        finally:
            progress.stop()
            if watcher is not None:
                watcher.stop()
    out.emit({"recovery": report.as_dict(), "jobs_finished": done}, f"worker stopped; {done} job(s) finished")
    return 0


def keep_warnings_off_the_terminal(log_file: logging.Handler | None) -> None:
    """Libraries' warnings (Python's, and the parsers' the parse process forwards) go to the worker's log file
    when it keeps one, never to the terminal: on a real folder one HTML library's warning filled it."""
    from knowledge.ingest import PARSER_WARNINGS

    logging.captureWarnings(True)
    for name in ("py.warnings", PARSER_WARNINGS):
        logger = logging.getLogger(name)
        logger.propagate = False
        logger.addHandler(log_file if log_file is not None else logging.NullHandler())


def nice_from_environment() -> int | None:
    """The niceness ``QUIRE_WORKER_NICE`` asks for (None: unset); a value that is not a number is refused."""
    raw = os.environ.get(NICE_ENV, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"{NICE_ENV} must be a whole number between 0 and 19, not {raw!r}") from None


def lower_priority(niceness: int) -> None:
    """Background work yields the CPU to what a person is waiting for.

    The worker parses and embeds flat out on every core; searching (the app, ``quire search``) and the
    window's own thread would otherwise wait for the encoder's threads in the scheduler's queue
    (FACTS.md #8). A nicer worker loses nothing when nothing else runs. POSIX only.
    """
    if niceness > 0 and hasattr(os, "nice"):
        with contextlib.suppress(OSError):  # not allowed here: run at the normal priority
            os.nice(niceness)


def _stop_on_signals(stop: Any) -> None:
    """SIGTERM/SIGINT stop taking jobs; running jobs are left to recovery (never cancelled)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(_signum: int, _frame: Any) -> None:
        threading.Thread(target=stop, daemon=True).start()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def cmd_gui(args: argparse.Namespace, out: Output) -> int:
    """The window on the data directory, or on a team store (``--store``/``QUIRE_STORE``, its queue with it):
    the window's own worker is told the store through its environment, never its arguments."""
    from app.main import run_gui  # Qt is imported here, for this command only
    from app.team_store import TeamStore

    store = TeamStore(args.store, args.queue) if args.store else None
    return int(run_gui(Path(args.data_dir), store))
