"""Every public write operation, called as an agent, is refused by the operations layer (not the CLI)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from sqlalchemy import text

import knowledge
from knowledge import folder_runs, portable, preferences, sync
from knowledge.agents import access, proposals
from knowledge.errors import Forbidden
from knowledge.folder_runs import start
from knowledge.library import agent_exclusions, bases
from knowledge.lifecycle import operations, set_ocr_language
from knowledge.principal import Principal, acting_as, require_person
from knowledge.runtime import Quire
from knowledge.sync import roots as sync_roots
from tests.conftest import quire_cli
from tests.knowledge.helpers import make_base
from tests.support.files import write_tree

AGENT = Principal.agent("bot")
PERSON = Principal.person("tester")

# Writes a person never calls: the worker's, startup's and repair scans' own (they act as ``system``).
SYSTEM_WRITES = {
    "bases.mark_base_failed",
    "bases.verify_base_indexes",
    "repair.repair_stranded_runs",
    "audit.append_reads",  # re-files read entries of a rolled-back source (the worker's)
    "delete_subtree.delete_subtree",  # the four job handlers and their repair scans
    "index_documents.index_documents",
    "prepare_root.prepare_root",
    "reindex_subtree.reindex_subtree",
    "recovery.repair_deleting_roots",
    "recovery.repair_orphan_active_items",
    "recovery.repair_blob_files",
    "import_.discard_import",  # the repair scan that removes a crashed import
    "restore_rules.expected_schema",  # builds a throwaway database to compare a backup's schema with
    "restore_rules.hold_back",  # a stage of restore_backup (which is walked)
    "import_stages.apply_runs",  # the stages of import_base (which is walked)
    "import_stages.apply_items",
    "import_stages.apply_chunks",
    "import_stages.apply_blobs",
    "backup.run_auto_backup_if_due",  # the window's timer: a backup a person configured
    "migrations.migrate",
    "pg_grants.grant",  # the store administrator's database rights (`quire store grant`; the server judges who may)
    "blobs.unlink_unrecorded",  # the after-commit removal of an owned file nobody references
    "roots.request_reconcile",  # folder sync's watcher and jobs (the worker's own)
    "roots.set_watcher_state",
    "claim.release",
    "reconcile.reconcile",
    "deaths.clear_in_flight",  # a folder-run attempt that stops without dying clears its marks (the worker's)
    "access.record_call",  # the audit of an agent's own call
    "slices.encode_missing",  # an index job's encode keeps a big file's vectors in the cache (the worker's)
    "proposals.propose_folder_run",  # open to agents by design: a proposal is not a write to knowledge
    "proposals.propose_note",
}


def _public_writers(module: ModuleType) -> set[str]:
    """Public functions of ``module`` whose body opens a write transaction or calls a guarded operation."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except OSError:  # an empty module has no source to read
        return set()
    found = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            body = ast.unparse(node)
            if ".write()" in body or "start_run(" in body or "add_items(" in body:
                found.add(f"{module.__name__.rsplit('.', 1)[-1]}.{node.name}")
    return found


def _knowledge_modules() -> list[ModuleType]:
    """Every module of ``knowledge/``: a writer added anywhere later is found by the scan."""
    found = []
    for info in pkgutil.walk_packages(knowledge.__path__, "knowledge."):
        if not info.name.endswith("__main__"):
            found.append(importlib.import_module(info.name))
    return found


def _snapshot(quire: Quire) -> dict[str, int]:
    with quire.db.read() as conn:
        return {
            t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
            for t in ("bases", "items", "jobs", "folder_runs", "agent_proposals", "settings")
        }


@pytest.fixture
def world(quire: Quire, tmp_path: Path) -> dict[str, Any]:
    base = make_base(quire, "kb")
    folder = write_tree(tmp_path / "folder", {"a.md": "alpha text", "b.md": "beta text"})
    note = operations.add_items(quire, base.id, [operations.NoteInput("a person's note")]).created[0]
    run = folder_runs.start_run(quire, PERSON, base.id, folder)
    pending = proposals.propose_note(quire, AGENT, base.id, "an agent's note")
    return {"base": base, "folder": folder, "note": note, "run": run.run_id, "proposal": pending.id}


def _operations(quire: Quire, w: dict[str, Any], who: Principal) -> dict[str, Callable[[], object]]:
    b = w["base"].id
    return {
        "operations.add_items": lambda: operations.add_items(quire, b, [operations.NoteInput("x")]),
        "operations.delete_items": lambda: operations.delete_items(quire, b, [w["note"]]),
        "operations.reindex_items": lambda: operations.reindex_items(quire, b, [w["note"]]),
        "bases.create_base": lambda: make_base(quire, "other"),
        "bases.rename_base": lambda: bases.rename_base(quire.db, b, "renamed"),
        "bases.set_locked": lambda: bases.set_locked(quire.db, b, True),
        "bases.confirm_endpoint": lambda: bases.confirm_endpoint(quire.db, b),
        "bases.delete_base": lambda: bases.delete_base(quire.db, quire.queue, b, quire.blobs_dir),
        "start.start_run": lambda: folder_runs.start_run(quire, who, b, w["folder"]),
        "split_start.start_split": lambda: folder_runs.start_split(quire, who, b, w["folder"]),
        "start.create_or_replay": lambda: start.create_or_replay(
            quire, who, w["base"], folder_runs.preview(quire, PERSON, b, w["folder"]), "walked-key"
        ),
        "revert.revert_run": lambda: folder_runs.revert_run(quire, who, w["run"]),
        "cancel.cancel_run": lambda: folder_runs.cancel_run(quire, who, w["run"]),
        "judging.set_descendant_cap": lambda: folder_runs.set_descendant_cap(quire, 5),
        "retry.retry_run": lambda: folder_runs.retry_run(quire, who, w["run"]),
        "proposals.accept_proposal": lambda: proposals.accept_proposal(quire, who, w["proposal"]),
        "proposals.dismiss_proposal": lambda: proposals.dismiss_proposal(quire, who, w["proposal"]),
        "access.set_enabled": lambda: access.set_enabled(quire, who, True),
        "access.revoke_token": lambda: access.revoke_token(quire, who),
        "access.allow_root": lambda: access.allow_root(quire, who, w["folder"]),
        "access.disallow_root": lambda: access.disallow_root(quire, who, w["folder"]),
        "agent_exclusions.exclude_from_agents": lambda: agent_exclusions.exclude_from_agents(quire, b, w["note"]),
        "agent_exclusions.include_for_agents": lambda: agent_exclusions.include_for_agents(quire, b, w["note"]),
        "import_.import_base": lambda: portable.import_base(quire, w["folder"] / "a.md"),
        "relocate.relocate_base": lambda: portable.relocate.relocate_base(quire, b, "/old", "/new"),
        "backup.backup_data_dir": lambda: portable.backup.backup_data_dir(quire, w["folder"] / "backups"),
        "backup.restore_backup": lambda: portable.backup.restore_backup(w["folder"], w["folder"] / "restored"),
        "backup.set_auto_backup": lambda: portable.backup.set_auto_backup(quire, None),
        "salvage.salvage": lambda: portable.salvage.salvage(quire.data_dir, w["folder"] / "salvaged"),
        "preferences.set_value": lambda: preferences.set_value(quire.db, "worker.threads", "1"),
        "preferences.set_paused": lambda: preferences.set_paused(quire.db, True),
        "preferences.apply_battery_rule": lambda: preferences.apply_battery_rule(quire.db, True),
        "roots.enable_sync": lambda: sync.enable_sync(quire, b, w["note"]),
        "roots.disable_sync": lambda: sync_roots.disable_sync(quire, b, w["note"]),
        "roots.set_setting": lambda: sync_roots.set_setting(quire.db, sync_roots.POLL_SECONDS, 5.0),
        "ocr_language.set_ocr_language": lambda: set_ocr_language(quire.db, b, "eng"),
        "review.dismiss": lambda: sync.dismiss(quire, 1, ["a.md"], "bot"),
    }


def test_the_walk_covers_every_public_write_operation(quire: Quire, world: dict[str, Any]) -> None:
    writers: set[str] = set()
    for module in _knowledge_modules():
        writers |= _public_writers(module)
    assert len(writers) >= 15  # the scan itself finds the writers (it is not vacuous)
    walked = set(_operations(quire, world, AGENT))
    assert writers - SYSTEM_WRITES <= walked, f"not walked as an agent: {sorted(writers - SYSTEM_WRITES - walked)}"


def test_every_write_is_refused_for_an_agent_in_the_context(quire: Quire, world: dict[str, Any]) -> None:
    before = _snapshot(quire)
    refused = []
    with acting_as(AGENT):
        # even a call that names a person is refused: code running for an agent cannot become one
        for name, call in _operations(quire, world, PERSON).items():
            with pytest.raises(Forbidden, match="an agent may not"):
                call()
            refused.append(name)
        # reads stay open
        assert operations.list_items(quire, world["base"].id)
        assert len(folder_runs.preview(quire, AGENT, world["base"].id, world["folder"]).eligible) == 2
    assert _snapshot(quire) == before
    assert len(refused) == len(_operations(quire, world, PERSON))


def test_every_write_is_refused_for_an_agent_principal_passed_explicitly(quire: Quire, world: dict[str, Any]) -> None:
    before = _snapshot(quire)
    explicit = {k: v for k, v in _operations(quire, world, AGENT).items() if "(quire, who" in inspect.getsource(v)}
    assert {"start.start_run", "revert.revert_run", "proposals.accept_proposal"} <= set(explicit)
    for call in explicit.values():
        with pytest.raises(Forbidden):
            call()
    assert _snapshot(quire) == before
    require_person("read")  # no agent anywhere: a person's call goes ahead


def test_cli_as_agent_is_refused_by_the_operations(data_dir: Path, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "f", {"a.md": "alpha"})
    assert quire_cli("base", "create", "kb", "--precision", "fp32", data_dir=data_dir).returncode == 0
    for args in (
        ("run", "start", "kb", str(folder)),
        ("add", "kb", "--note", "hello"),
        ("base", "lock", "kb"),
        ("base", "delete", "kb"),
        ("proposals", "accept", "1"),
    ):
        done = quire_cli("--as-agent", "bot", *args, data_dir=data_dir)
        assert done.returncode == 5, (args, done.stderr)
        assert "an agent may not" in done.stderr
    assert quire_cli("--as-agent", "bot", "run", "preview", "kb", str(folder), data_dir=data_dir).returncode == 0
