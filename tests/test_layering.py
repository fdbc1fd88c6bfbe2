"""Layering rules that hold by construction: knowledge/ and jobs/ import no Qt; jobs/ imports no knowledge."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def imported_modules(package: str) -> set[str]:
    found: set[str] = set()
    for path in (REPO / package).rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_core_packages_import_no_qt_and_no_stdlib_sqlite() -> None:
    for package in ("knowledge", "jobs"):
        mods = imported_modules(package)
        assert "PySide6" not in mods, package
        assert "sqlite3" not in mods, package
    assert "sqlite3" not in imported_modules("app")


def test_jobs_does_not_import_knowledge() -> None:
    assert "knowledge" not in imported_modules("jobs")
    assert "app" not in imported_modules("jobs")
    assert "app" not in imported_modules("knowledge")


def test_importing_the_core_loads_neither_qt_nor_torch() -> None:
    code = (
        "import sys, pkgutil, importlib, knowledge, jobs\n"
        "for pkg in (knowledge, jobs):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if not m.name.endswith('__main__'): importlib.import_module(m.name)\n"
        "bad = [m for m in ('PySide6', 'torch', 'sentence_transformers') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_app_writes_no_sql() -> None:
    for path in Path(REPO / "app").rglob("*.py"):
        source = path.read_text()
        for word in ("INSERT INTO", "UPDATE ", "DELETE FROM", "exec_driver_sql", "sqlalchemy"):
            assert word not in source, f"{path.name} contains {word!r}"
