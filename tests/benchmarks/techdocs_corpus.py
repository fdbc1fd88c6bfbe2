"""Rebuild the second judged retrieval set's corpus (tests/knowledge/data/techdocs.jsonl.gz) from the
docstrings of Python's standard library (PSF licence), as installed on the machine that ran it.

One document per top-level module (``/usr/lib/python3.11/NAME.py``), per package (``NAME/__init__.py``) and
per public module one level inside a package (``NAME/SUB.py``, id ``NAME.SUB``): the module's docstring (the
first ``MODULE_CHARS``; a ``__doc__ = "..."`` assignment counts), then every public top-level function and
class with its signature and the first paragraph of its docstring, and each public method's likewise under
its class. Read with ``ast`` (nothing is imported or run), in source order. A document is cut at ``MAX_CHARS``
(on a line boundary): first paragraphs and the cut keep the corpus at ~0.5 M characters (~600 chunks), so the
test ingests it with the real model in about a minute; whole docstrings made 0.9 M and kept few more of the
identifiers the questions ask for. Modules with fewer than ``MIN_CHARS`` of documentation are left out, and
so are the ~120 codec modules under ``encodings/`` (one boilerplate docstring each).

    .venv/bin/python -m tests.benchmarks.techdocs_corpus [/usr/lib/python3.11]

The judged questions (tests/knowledge/data/techdocs_queries.jsonl) were written by reading the documents
this produced with Python 3.11.2 (Debian 12); a rebuild on another Python changes texts, not ids.
"""

from __future__ import annotations

import ast
import gzip
import inspect
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "knowledge" / "data" / "techdocs.jsonl.gz"
MAX_CHARS = 6000
MODULE_CHARS = 2500
SUMMARY_CHARS = 400
MIN_CHARS = 200
SKIP = {"this", "antigravity", "__future__", "__hello__", "__phello__", "_pydecimal", "pydoc_data", "idlelib",
        "lib2to3", "test", "turtledemo", "ensurepip", "distutils", "tkinter", "_sysconfigdata__linux_x86_64-linux-gnu",
        "__main__"}  # fmt: skip


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    return f"{node.name}({ast.unparse(node.args)})"


def _summary(doc: str | None) -> str:
    """A member's docstring up to its first blank line (its summary paragraph), at most SUMMARY_CHARS."""
    first = (doc or "").strip().split("\n\n", 1)[0]
    return first if len(first) <= SUMMARY_CHARS else first[: first.rfind(" ", 0, SUMMARY_CHARS)] + " ..."


def _public(name: str) -> bool:
    return not name.startswith("_") or name == "__init__"


def module_text(name: str, source: str) -> str:
    tree = ast.parse(source)
    parts = [f"Module {name}", _cut(ast.get_docstring(tree) or _assigned_doc(tree), MODULE_CHARS)]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _public(node.name):
            doc = _summary(ast.get_docstring(node))
            if doc:
                parts.append(f"{name}.{_signature(node)}\n{doc}")
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            parts.append(f"class {name}.{node.name}({bases})\n{_summary(ast.get_docstring(node))}".rstrip())
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and _public(member.name):
                    doc = _summary(ast.get_docstring(member))
                    if doc:
                        parts.append(f"{node.name}.{_signature(member)}\n{doc}")
    return _cut("\n\n".join(p.strip() for p in parts if p.strip()), MAX_CHARS)


def _assigned_doc(tree: ast.Module) -> str:
    """A module docstring written as ``__doc__ = \"\"\"...\"\"\"`` (hashlib's)."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__doc__" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return inspect.cleandoc(node.value.value)
    return ""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: text.rfind("\n", 0, limit)]


def build(lib: Path) -> list[dict[str, str]]:
    found: dict[str, Path] = {}
    for path in sorted(lib.glob("*.py")):
        found[path.stem] = path
    for path in sorted(lib.glob("*/__init__.py")):
        found[path.parent.name] = path
    for path in sorted(lib.glob("*/*.py")):  # one level of sub-modules: json.decoder, urllib.parse, ...
        if path.parent.name not in SKIP | {"encodings"} and path.stem != "__init__" and not path.stem.startswith("_"):
            found[f"{path.parent.name}.{path.stem}"] = path
    docs = []
    for name in sorted(found):
        if name in SKIP or name.startswith("_"):
            continue
        try:
            text = module_text(name, found[name].read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        if len(text) >= MIN_CHARS:
            docs.append({"id": name, "text": text})
    return docs


def main() -> None:
    lib = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/usr/lib/python3.11")
    docs = build(lib)
    with gzip.GzipFile(OUT, "wb", mtime=0) as raw:
        raw.write("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode("utf-8"))
    total = sum(len(d["text"]) for d in docs)
    print(f"{len(docs)} documents, {total} characters, {OUT.stat().st_size} bytes -> {OUT}")


if __name__ == "__main__":
    main()
