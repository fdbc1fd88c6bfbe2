"""The architecture as a test: which package, and which room of ``knowledge/``, may import which.

* ``app → knowledge → jobs``; ``knowledge/`` and ``jobs/`` import no Qt; ``jobs/`` imports no knowledge.
* Inside ``knowledge/`` the rooms form a ladder (``ROOM_IMPORTS``): a room imports only the rooms listed
  for it. Imports under ``if TYPE_CHECKING:`` are for annotations only and are not edges.
* ``app/`` (the window and the CLI) imports a room of ``knowledge/`` through its face (the room's
  ``__init__``), never a module inside it — except ``store`` and ``sources``, whose modules are the face.
* Inside a room the modules import each other without a cycle (annotation-only and function-level
  imports count too: each says the one module needs the other). So do the modules of ``app/`` (the window
  and ``app/cli`` together) and of ``jobs/``, by the same rules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

# room -> the rooms it may import (besides itself). Top-level modules of knowledge/ are rooms too.
ROOM_IMPORTS: dict[str, set[str]] = {
    "errors": set(),
    "paths": set(),
    "instance_lock": {"errors", "store"},
    "principal": {"errors"},
    "components": {"errors", "store", "sources", "ingest"},
    "preferences": {"errors", "store", "paths", "principal"},
    "store": {"errors"},
    "sources": {"errors"},
    "library": {"errors", "store", "principal"},
    "ingest": {"errors", "store", "sources", "library", "preferences"},
    "search": {"errors", "store", "sources", "library", "ingest"},
    "lifecycle": {"errors", "store", "sources", "library", "ingest", "principal", "preferences"},
    "folder_runs": {"errors", "store", "sources", "library", "ingest", "lifecycle", "principal", "preferences"},
    "runtime": {"errors", "store", "library", "ingest", "search", "preferences"},
    "sync": {"errors", "store", "sources", "library", "ingest", "lifecycle", "principal", "runtime", "preferences"},
    "compose": {"runtime", "lifecycle", "folder_runs", "portable", "sync"},
    "portable": {"errors", "store", "library", "ingest", "principal", "runtime", "folder_runs"},
    "agents": {
        "errors",
        "store",
        "library",
        "ingest",
        "search",
        "lifecycle",
        "folder_runs",
        "principal",
        "runtime",
    },
}
FACE_ROOMS = {"library", "ingest", "search", "lifecycle", "folder_runs", "agents", "portable", "sync"}


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def module_imports_of(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` a file imports anywhere in it, annotation-only imports included;
    ``from package import module`` names the module, not the package's face."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
    return found & modules


def cycles_in(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(group)
    return found


def imports_of(path: Path) -> Iterator[str]:
    """Absolute module names imported by a file (``from a import b`` yields ``a.b`` and ``a``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _type_checking_lines(tree)
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def imported_packages(package: str) -> set[str]:
    return {name.split(".")[0] for path in (REPO / package).rglob("*.py") for name in imports_of(path)}


def room_of(path: Path) -> str:
    return path.relative_to(REPO / "knowledge").parts[0].removesuffix(".py")


def test_core_packages_import_no_qt_and_no_stdlib_sqlite() -> None:
    for package in ("knowledge", "jobs"):
        mods = imported_packages(package)
        assert "PySide6" not in mods, package
        assert "sqlite3" not in mods, package
    assert "sqlite3" not in imported_packages("app")


def test_jobs_does_not_import_knowledge() -> None:
    assert "knowledge" not in imported_packages("jobs")
    assert "app" not in imported_packages("jobs")
    assert "app" not in imported_packages("knowledge")


def _documented_room_imports() -> dict[str, set[str]]:
    """The "may import" column of the rooms table in docs/ARCHITECTURE.md, room by room."""
    documented: dict[str, set[str]] = {}
    in_table = False
    for line in (REPO / "docs" / "ARCHITECTURE.md").read_text().splitlines():
        if line.startswith("| room | what it owns | may import |"):
            in_table = True
        elif in_table and not line.startswith("|"):
            break
        elif in_table and line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            room = cells[0].strip("`").rstrip("/")
            assert room not in documented, f"{room} is listed twice"
            documented[room] = set() if cells[-1] == "—" else {r.strip() for r in cells[-1].split(",")}
    return documented


def test_the_architecture_page_lists_the_same_ladder() -> None:
    assert _documented_room_imports() == ROOM_IMPORTS, "docs/ARCHITECTURE.md's rooms table: say what ROOM_IMPORTS says"


def test_rooms_of_knowledge_import_only_the_rooms_below_them() -> None:
    violations: list[str] = []
    for path in (REPO / "knowledge").rglob("*.py"):
        if path.name == "__init__.py" and path.parent == REPO / "knowledge":
            continue
        room = room_of(path)
        assert room in ROOM_IMPORTS, f"knowledge/{room} is a room the layering contract does not know"
        for name in imports_of(path):
            parts = name.split(".")
            if parts[0] != "knowledge" or len(parts) < 2:
                continue
            target = parts[1]
            if target in ROOM_IMPORTS and target != room and target not in ROOM_IMPORTS[room]:
                violations.append(f"{path.relative_to(REPO)} imports {name}")
    assert not violations, "\n".join(sorted(set(violations)))


# Cycles inside a room still to break, each with the reason it is still here. The list may only shrink.
KNOWN_ROOM_CYCLES: dict[frozenset[str], str] = {}


def test_no_import_cycle_inside_a_room() -> None:
    paths = {module_of(p): p for p in (REPO / "knowledge").rglob("*.py") if p.parent != REPO / "knowledge"}
    graph = {module: module_imports_of(path, set(paths)) - {module} for module, path in paths.items()}
    for module in graph:  # only the edges inside a module's own room
        room = module.split(".")[1]
        graph[module] = {target for target in graph[module] if target.split(".")[1] == room}
    found = {frozenset(group) for group in cycles_in(graph)}
    assert sorted(map(sorted, found - set(KNOWN_ROOM_CYCLES))) == [], "break the cycle (or move what both need)"
    assert sorted(map(sorted, set(KNOWN_ROOM_CYCLES) - found)) == [], "broken: remove it from KNOWN_ROOM_CYCLES"


@pytest.mark.parametrize("package", ["app", "jobs"])
def test_no_import_cycle_inside_app_or_jobs(package: str) -> None:
    """What the modules of a room of ``knowledge/`` hold to, for the whole of ``app/`` (``app/cli`` included) and
    ``jobs/``: what two modules both need goes in a leaf they import (``app.cli.base``, ``app.window_face``), not
    in one of them."""
    paths = {module_of(p): p for p in (REPO / package).rglob("*.py")}
    graph = {module: module_imports_of(path, set(paths)) - {module} for module, path in paths.items()}
    found = sorted(map(sorted, cycles_in(graph)))
    assert found == [], "break the cycle (or move what both need to a leaf module)"


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert cycles_in(graph) == [{"a", "b", "c"}]


def test_the_app_imports_rooms_through_their_faces() -> None:
    violations: list[str] = []
    for path in (REPO / "app").rglob("*.py"):
        for name in imports_of(path):
            parts = name.split(".")
            if parts[0] == "knowledge" and len(parts) >= 3 and parts[1] in FACE_ROOMS:
                if not (REPO / "knowledge" / parts[1] / f"{parts[2]}.py").exists():
                    continue  # ``from knowledge.room import name``: a name of the face
                if parts[2] in _face_modules(parts[1]):
                    continue  # a module the face itself names as public
                violations.append(f"{path.relative_to(REPO)} imports {name}")
    assert not violations, "\n".join(sorted(set(violations)))


def _face_modules(room: str) -> set[str]:
    tree = ast.parse((REPO / "knowledge" / room / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {ast.literal_eval(e) for e in node.value.elts}  # type: ignore[attr-defined]
    return set()


def test_no_private_name_is_imported_across_modules() -> None:
    violations = [
        f"{path.relative_to(REPO)} imports {name}"
        for package in ("app", "knowledge", "jobs")
        for path in (REPO / package).rglob("*.py")
        for name in imports_of(path)
        if name.split(".")[0] in ("app", "knowledge", "jobs")
        and name.split(".")[-1].startswith("_")
        and not name.split(".")[-1].startswith("__")
    ]
    assert not violations, "\n".join(violations)


def test_importing_the_core_loads_neither_qt_nor_torch() -> None:
    code = (
        "import sys, pkgutil, importlib, knowledge, jobs, app.cli\n"
        "for pkg in (knowledge, jobs, app.cli):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if not m.name.endswith('__main__'): importlib.import_module(m.name)\n"
        "bad = [m for m in ('PySide6', 'torch', 'sentence_transformers') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _job_types() -> dict[str, tuple[str, str]]:
    """Each job type a room registers (``JobType(NAME, …)``): the constant's name -> (its room, its value)."""
    registered: set[tuple[str, str]] = set()
    constants: dict[tuple[str, str], str] = {}
    for path in (REPO / "knowledge").rglob("*.py"):
        tree = ast.parse(path.read_text())
        room = room_of(path)
        for node in ast.walk(tree):
            is_job_type = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "JobType" and node.args
            if is_job_type and isinstance(node.args[0], ast.Name):  # type: ignore[attr-defined]
                registered.add((room, node.args[0].id))  # type: ignore[attr-defined]
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                for target in stmt.targets:
                    if isinstance(target, ast.Name) and isinstance(stmt.value.value, str):
                        constants[(room, target.id)] = stmt.value.value
    return {name: (room, constants[(room, name)]) for room, name in registered}


def test_no_room_enqueues_another_rooms_job_by_name() -> None:
    """A room schedules another room's work through that room's verbs (``lifecycle.schedule_index``,
    ``schedule_delete``, ``sync.schedule_reconcile``…), never by its job type: neither the constant nor
    the type's string appears outside the room that registers it (the app included)."""
    job_types = _job_types()
    assert {"INDEX_DOCUMENTS", "DELETE_SUBTREE", "SYNC_ROOT"} <= set(job_types), job_types
    values = {value: room for room, value in job_types.values()}
    violations: list[str] = []
    for package in ("knowledge", "app"):
        for path in (REPO / package).rglob("*.py"):
            room = room_of(path) if package == "knowledge" else "app"
            for name in imports_of(path):
                owner = job_types.get(name.split(".")[-1])
                if owner is not None and name.startswith("knowledge.") and owner[0] != room:
                    violations.append(f"{path.relative_to(REPO)} imports {name}")
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and values.get(node.value, room) != room:  # type: ignore[arg-type]
                    violations.append(f"{path.relative_to(REPO)} names the job type {node.value!r}")
    assert not violations, "\n".join(sorted(set(violations)))


def test_app_writes_no_sql() -> None:
    for path in Path(REPO / "app").rglob("*.py"):
        source = path.read_text()
        for word in ("INSERT INTO", "UPDATE ", "DELETE FROM", "exec_driver_sql", ".execute("):
            assert word not in source, f"{path.name} contains {word!r}"
    assert "sqlalchemy" not in imported_packages("app")
