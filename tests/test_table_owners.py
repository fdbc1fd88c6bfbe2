"""One owner per table: the module that writes a table's rows, written down in one place.

A write is an SQLAlchemy ``insert(t)``/``update(t)``/``delete(t)`` (under any name the module gives them:
``insert as postgres_insert``, ``upsert = postgres_insert if … else sqlite_insert``, ``sa.update``) or
``t.insert()``/``t.update()``/``t.delete()`` call on a schema table (``t`` or ``schema.t``), or SQL text that
inserts into, updates or deletes from it (docstrings describe SQL and do not count). A write whose table is
named only at run time (``metadata.tables[name]``) is declared in ``UNNAMED_WRITES`` with the tables it
reaches. Migrations (``knowledge.store.migrations`` and the schema modules) may write any table: they evolve
the schema itself.

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
    "agent_exclusions": "knowledge.library.agent_exclusions",
    "chunks": "knowledge.library.index",
    "vector_cache": "knowledge.library.index",
    "blobs": "knowledge.library.blobs",
    "blob_contents": "knowledge.library.blobs",
    "audit_log": "knowledge.library.audit",
    "agent_proposals": "knowledge.agents.proposals",
    "base_imports": "knowledge.portable.import_record",
    "folder_runs": "knowledge.folder_runs.ledger",
    "folder_run_sources": "knowledge.folder_runs.ledger",
    "folder_run_outcomes": "knowledge.folder_runs.ledger",
    "folder_run_in_flight": "knowledge.folder_runs.deaths",
    "ingest_batches": "knowledge.folder_runs.ledger",
    "sync_roots": "knowledge.sync.roots",
    "sync_pending": "knowledge.sync.pending",
    "jobs": "jobs.queue",
    "worker_sessions": "jobs.sessions",
    "endpoint_pace": "knowledge.store.endpoint_turns",
    "endpoint_slots": "knowledge.store.endpoint_turns",
}

SHARED_FOR_NOW: dict[str, set[str]] = {}

MIGRATIONS = {"knowledge.store.migrations"}
SCHEMA_MODULES = (schema, schema_agents, schema_portable, schema_runs, schema_sync, jobs_schema)
TABLES = {name for module in SCHEMA_MODULES for name in module.metadata.tables}
_SQL_WRITE = re.compile(r"\b(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.I)
_VERBS = {"insert", "update", "delete"}
UNNAMED = "<a table named at run time>"

# Writes whose table the source names only at run time, with the tables they reach and why.
UNNAMED_WRITES: dict[str, set[str]] = {}


def _is_schema_module(name: str) -> bool:
    return name == "jobs.schema" or name.startswith("knowledge.store.schema")


class _Names:
    """What a module's names stand for: SQLAlchemy's write verbs under any alias (``insert as postgres_insert``,
    ``upsert = postgres_insert if … else sqlite_insert``), SQLAlchemy modules (``sa.update``) and the schema
    modules (``schema.items``)."""

    def __init__(self, tree: ast.AST) -> None:
        self.verbs: set[str] = set()
        self.sqlalchemy: set[str] = set()
        self.schemas: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "sqlalchemy":
                        self.sqlalchemy.add(alias.asname or "sqlalchemy")
                    elif _is_schema_module(alias.name) and alias.asname:
                        self.schemas.add(alias.asname)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    bound = alias.asname or alias.name
                    if node.module.split(".")[0] == "sqlalchemy":
                        (self.verbs if alias.name in _VERBS else self.sqlalchemy).add(bound)
                    elif _is_schema_module(f"{node.module}.{alias.name}"):
                        self.schemas.add(bound)
        self._follow_assignments(tree)

    def _follow_assignments(self, tree: ast.AST) -> None:
        assignments = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
        grew = True
        while grew:
            grew = False
            for node in assignments:
                value = node.value
                branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
                if all(self.is_verb(b) for b in branches):
                    for target in node.targets:
                        if isinstance(target, ast.Name) and target.id not in self.verbs:
                            self.verbs.add(target.id)
                            grew = True

    def is_verb(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.verbs
        return (
            isinstance(node, ast.Attribute)
            and node.attr in _VERBS
            and isinstance(node.value, ast.Name)
            and node.value.id in self.sqlalchemy
        )

    def table(self, node: ast.expr) -> str:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.schemas:
            return node.attr
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return str(node.slice.value)  # metadata.tables["name"]
        return UNNAMED


def _docstrings(tree: ast.AST) -> set[int]:
    """A docstring describes SQL, it never runs it."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def tables_written(source: str) -> set[str]:
    """The schema tables a module's source writes (see the module docstring for what counts); ``UNNAMED``
    for a write whose table is named only at run time."""
    tree = ast.parse(source)
    names = _Names(tree)
    docstrings = _docstrings(tree)
    written: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if names.is_verb(func):
                written.update(names.table(arg) for arg in node.args[:1])
            elif isinstance(func, ast.Attribute) and func.attr in _VERBS:
                table = names.table(func.value)
                # ``t.update()`` of something unnamed with no arguments (a dict's update takes some)
                if table in TABLES or (table == UNNAMED and not node.args and not node.keywords):
                    written.add(table)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            written.update(m.group(1).lower() for m in _SQL_WRITE.finditer(node.value))
    return written & (TABLES | {UNNAMED})


def _module_sources() -> dict[str, str]:
    sources: dict[str, str] = {}
    for package in ("knowledge", "jobs"):
        for path in sorted((REPO / package).rglob("*.py")):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            if module in MIGRATIONS or module.startswith("knowledge.store.schema") or module == "jobs.schema":
                continue
            sources[module] = path.read_text()
    return sources


def writers() -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for module, source in _module_sources().items():
        for table in tables_written(source):
            for named in UNNAMED_WRITES.get(module, set()) if table == UNNAMED else {table}:
                found[named].add(module)
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
        "from sqlalchemy import insert, select, text\n"
        "conn.execute(insert(items).values(a=1))\n"
        "conn.execute(chunks.delete())\n"
        "conn.execute(text('UPDATE bases SET name = :n'))\n"
        "conn.execute(text(f'DELETE FROM settings WHERE key = {k}'))\n"
        "conn.execute(text('INSERT OR IGNORE INTO blobs (hash) VALUES (:h)'))\n"
        "conn.execute(select(jobs))  # a read\n"
        "conn.execute(text('SELECT * FROM folder_runs'))  # a read\n"
    )
    assert tables_written(source) == {"items", "chunks", "bases", "settings", "blobs"}


def test_the_detector_sees_aliases_modules_and_tables_named_at_run_time() -> None:
    source = (
        "import sqlalchemy as sa\n"
        "from sqlalchemy.dialects.postgresql import insert as postgres_insert\n"
        "from sqlalchemy.dialects.sqlite import insert as sqlite_insert\n"
        "from knowledge.store import schema, schema_runs\n"
        "from jobs import schema as job_schema\n"
        "upsert = postgres_insert if pg else sqlite_insert\n"
        "conn.execute(upsert(folder_run_in_flight).values(run_id=1))\n"
        "conn.execute(sa.delete(schema.chunks))\n"
        "conn.execute(job_schema.jobs.update().values(status='x'))\n"
        "conn.execute(sa.insert(schema_runs.metadata.tables['ingest_batches']))\n"
        "conn.execute(postgres_insert(schema_runs.metadata.tables[name]))\n"
    )
    assert tables_written(source) == {"folder_run_in_flight", "chunks", "jobs", "ingest_batches", UNNAMED}


def test_the_detector_passes_over_what_is_not_a_write() -> None:
    source = (
        '"""A docstring may show the SQL: UPDATE jobs SET status = 1."""\n'
        "from knowledge.store import schema\n"
        "update = hasher.update  # not SQLAlchemy's\n"
        "update(items)\n"
        "counts.update(items=1)\n"
        "self.settings.update(other)\n"
        "conn.execute(select(schema.items))\n"
    )
    assert tables_written(source) == set()


def test_a_write_to_a_table_named_at_run_time_is_declared() -> None:
    unnamed = {module for module, source in _module_sources().items() if UNNAMED in tables_written(source)}
    assert unnamed == set(UNNAMED_WRITES), "name the tables such a write reaches (and why) in UNNAMED_WRITES"


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


def _documented_owners() -> dict[str, str]:
    """The owner table of docs/ARCHITECTURE.md: table -> the module that writes its rows (a path there)."""
    documented: dict[str, str] = {}
    in_table = False
    for line in (REPO / "docs" / "ARCHITECTURE.md").read_text().splitlines():
        if line.startswith("| table | owner"):
            in_table = True
        elif in_table and not line.startswith("|"):
            break
        elif in_table and line.startswith("| `"):
            table, owner = (cell.strip().strip("`") for cell in line.strip("|").split("|")[:2])
            assert table not in documented, f"{table} is listed twice"
            documented[table] = owner.removesuffix(".py").replace("/", ".")
    return documented


def test_the_architecture_page_lists_the_same_owners() -> None:
    assert _documented_owners() == TABLE_OWNERS, "docs/ARCHITECTURE.md's owner table: say what TABLE_OWNERS says"
