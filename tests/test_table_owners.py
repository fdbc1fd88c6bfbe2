"""One owner per table: the module that writes a table's rows, written down in one place.

A write is an SQLAlchemy ``insert(t)``/``update(t)``/``delete(t)`` or ``t.insert()``/``t.update()``/
``t.delete()`` call on a schema table, or SQL text that inserts into, updates or deletes from it. Migrations
(``knowledge.store.migrations`` and the schema modules) may write any table: they evolve the schema itself.

``SHARED_FOR_NOW`` lists the writers that are not yet their table's owner. Each entry is a debt that the
owner's verbs are to absorb; the test fails when a module outside owner + debt writes a table, and when a
listed debt is paid (the module no longer writes), so the list only ever shrinks.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict

from jobs import schema as jobs_schema
from knowledge.store import schema, schema_agents, schema_portable, schema_runs, schema_sync
from tests.conftest import REPO

TABLE_OWNERS: dict[str, str] = {
    "settings": "knowledge.store.settings",
    "bases": "knowledge.library.bases",
    "identities": "knowledge.library.bases",
    "items": "knowledge.library.tree",
    "item_links": "knowledge.library.links",
    "chunks": "knowledge.library.index",
    "vector_cache": "knowledge.library.index",
    "blobs": "knowledge.library.blobs",
    "blob_contents": "knowledge.library.blobs",
    "audit_log": "knowledge.library.audit",
    "agent_proposals": "knowledge.agents.proposals",
    "base_imports": "knowledge.portable.import_stages",
    "folder_runs": "knowledge.folder_runs.ledger",
    "folder_run_sources": "knowledge.folder_runs.start",
    "folder_run_outcomes": "knowledge.folder_runs.commit",
    "folder_run_in_flight": "knowledge.folder_runs.deaths",
    "ingest_batches": "knowledge.folder_runs.commit",
    "sync_roots": "knowledge.sync.roots",
    "sync_pending": "knowledge.sync.pending",
    "jobs": "jobs.queue",
    "worker_sessions": "jobs.sessions",
}

SHARED_FOR_NOW: dict[str, set[str]] = {
    "bases": {"knowledge.lifecycle.ocr_language", "knowledge.portable.import_"},
    "identities": {"knowledge.portable.import_"},
    "chunks": {"knowledge.portable.import_stages"},
    "audit_log": {"knowledge.portable.import_"},
    "base_imports": {"knowledge.portable.import_"},
    "folder_runs": {
        "knowledge.folder_runs.commit",
        "knowledge.folder_runs.start",
        "knowledge.portable.import_stages",
    },
    "folder_run_outcomes": {"knowledge.folder_runs.deaths"},
}

MIGRATIONS = {"knowledge.store.migrations"}
SCHEMA_MODULES = (schema, schema_agents, schema_portable, schema_runs, schema_sync, jobs_schema)
TABLES = {name for module in SCHEMA_MODULES for name in module.metadata.tables}
_SQL_WRITE = re.compile(r"\b(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.I)


def tables_written(source: str) -> set[str]:
    """The schema tables a module's source writes (see the module docstring for what counts)."""
    written: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in {"insert", "update", "delete"} and node.args:
                target = node.args[0]
                if isinstance(target, ast.Name):
                    written.add(target.id)
            elif isinstance(func, ast.Attribute) and func.attr in {"insert", "update", "delete"}:
                written.update([func.value.id] if isinstance(func.value, ast.Name) else [])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            written.update(m.group(1).lower() for m in _SQL_WRITE.finditer(node.value))
    return written & TABLES


def writers() -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for package in ("knowledge", "jobs"):
        for path in sorted((REPO / package).rglob("*.py")):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            if module in MIGRATIONS or module.startswith("knowledge.store.schema") or module == "jobs.schema":
                continue
            for table in tables_written(path.read_text()):
                found[table].add(module)
    return found


def test_every_table_has_one_owner() -> None:
    assert TABLES - set(TABLE_OWNERS) == set(), "a table without an owner: add it to TABLE_OWNERS"
    assert set(TABLE_OWNERS) - TABLES == set(), "an owner of a table that no longer exists"


def test_only_the_owner_writes_a_table() -> None:
    strays = {
        table: sorted(modules - {TABLE_OWNERS[table]} - SHARED_FOR_NOW.get(table, set()))
        for table, modules in writers().items()
    }
    assert {t: m for t, m in strays.items() if m} == {}, "write through the owner's verbs instead"


def test_a_paid_debt_leaves_the_list() -> None:
    found = writers()
    paid = {table: sorted(extra - found.get(table, set())) for table, extra in SHARED_FOR_NOW.items()}
    assert {t: m for t, m in paid.items() if m} == {}, "no longer a writer: remove it from SHARED_FOR_NOW"


def test_the_detector_sees_each_form_of_write() -> None:
    source = (
        "conn.execute(insert(items).values(a=1))\n"
        "conn.execute(chunks.delete())\n"
        "conn.execute(text('UPDATE bases SET name = :n'))\n"
        "conn.execute(text(f'DELETE FROM settings WHERE key = {k}'))\n"
        "conn.execute(text('INSERT OR IGNORE INTO blobs (hash) VALUES (:h)'))\n"
        "conn.execute(select(jobs))  # a read\n"
        "conn.execute(text('SELECT * FROM folder_runs'))  # a read\n"
    )
    assert tables_written(source) == {"items", "chunks", "bases", "settings", "blobs"}


def test_settings_are_read_through_their_door_only() -> None:
    """Reads too: one door (``knowledge.store.settings``) answers every stored setting. The diagnosis of a
    damaged file reads it with raw apsw on purpose (SQLAlchemy's engine may not open it)."""
    allowed = {REPO / "knowledge/store/settings.py", REPO / "knowledge/portable/diagnose.py"}
    readers = [
        path.relative_to(REPO).as_posix()
        for package in ("knowledge", "jobs", "app")
        for path in (REPO / package).rglob("*.py")
        if path not in allowed
        and not path.name.startswith(("schema", "migrations"))
        and re.search(r"FROM\s+settings\b|settings\.c\.", path.read_text())
    ]
    assert readers == []
