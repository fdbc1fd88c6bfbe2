"""One table of typed queries and what they must find, run on every surface (tests/search/test_query_syntax.py).

The corpus: a handful of small files of different types, folders and modification dates, each a
sentinel named by its stem. A case expects either the exact set of documents (``docs``), the document
ranked first (``top``), exactly these documents in this order, one hit each (``order``: what filters alone
list, newest first), or an error whose message contains ``error``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tests.sources.builders import make_pdf

# name -> (relative path, content, modification date)
CORPUS: dict[str, tuple[str, str | bytes, datetime]] = {
    "alpha": (
        "reports/alpha.md",
        "---\ntags: [dredging, project/harbour]\n---\n"
        "# Alpha\n\nQuarterly summary of the harbour dredging project. Ticket ABC-1234 tracks the silt survey.\n"
        "Our tidal silt budget is balanced. Baking log: [[Lab notes/delta]]; this summary: [[Alpha#Summary]].\n",
        datetime(2024, 3, 15, 12),
    ),
    "beta": (
        "reports/beta.txt",
        "Notes on the harbour dredging draft. See DOI 10.1000/xyz123 for the sediment model.\n",
        datetime(2023, 6, 15, 12),
    ),
    "gamma": (
        "Lab notes/gamma.html",
        "<html><body><p>The function parse_query splits the search input and Foo::bar calls it. "
        "The file report_v2.pdf holds the harbour figures.</p></body></html>",
        datetime(2025, 2, 10, 12),
    ),
    "delta": (
        "Lab notes/delta.md",
        "# Delta\n\nSourdough #baking at the harbour bakery (see [[alpha]]): silt-free water and a tidal rhythm "
        "of proofing.\n"
        "Batch 1234 used ABC flour; the budget for flour is tight.\n",
        datetime(2024, 8, 1, 12),
    ),
    "epsilon": (
        "papers/epsilon.pdf",
        make_pdf([["Harbour sediment transport paper.", "The dredging silt budget model."]]),
        datetime(2024, 11, 20, 12),
    ),
    # a message dated by its header (May 2024), its file copied later (January 2025)
    "zeta": (
        "mail/zeta.eml",
        "From: Ana Ruiz <ana.ruiz@harbour.example>\nTo: Lab <lab@example.org>\nSubject: Harbour sediment samples\n"
        "Date: Thu, 02 May 2024 10:00:00 +0000\nContent-Type: text/plain; charset=utf-8\n\n"
        "The harbour sediment samples arrived; the cores are in the cold room.\n",
        datetime(2025, 1, 10, 12),
    ),
}
ALL = frozenset(CORPUS)


@dataclass(frozen=True)
class Case:
    query: str
    mode: str = "hybrid"
    docs: frozenset[str] | None = None  # exactly these documents
    top: str | None = None  # this document first
    order: tuple[str, ...] | None = None  # exactly these hits, in this order
    error: str | None = None  # refused, with this in the message

    @property
    def id(self) -> str:
        return f"{self.mode}:{self.query[:40]}"


CASES: list[Case] = [
    # phrases: every hit contains the phrase (word for word), in either mode
    Case('"tidal silt budget"', docs=frozenset({"alpha"})),
    Case('"silt budget" harbour', mode="keyword", docs=frozenset({"alpha", "epsilon"})),
    # exclusions leave out whole documents
    Case("harbour -draft", mode="keyword", docs=ALL - {"beta"}),
    Case('harbour -"silt budget"', docs=frozenset({"beta", "gamma", "delta", "zeta"})),
    # filters apply inside the search (hybrid returns everything in scope, no more)
    Case("harbour type:pdf", docs=frozenset({"epsilon"})),
    Case("harbour type:markdown", docs=frozenset({"alpha", "delta"})),
    Case("harbour type:txt type:html", docs=frozenset({"beta", "gamma"})),
    Case('harbour in:"Lab notes"', docs=frozenset({"gamma", "delta"})),
    Case("harbour in:reports -draft", docs=frozenset({"alpha"})),
    Case("harbour after:2024-01 before:2024-12", docs=frozenset({"alpha", "delta", "epsilon", "zeta"})),
    Case("harbour before:2024", docs=frozenset({"beta"})),
    Case("harbour after:2025-02-01", docs=frozenset({"gamma"})),
    Case("harbour after:2025-01-01", docs=frozenset({"gamma"})),  # the message's Date, not its file's
    # tags (front matter and inline, nested ones by their parent) and senders
    Case("harbour tag:dredging", docs=frozenset({"alpha"})),
    Case("harbour tag:project", docs=frozenset({"alpha"})),
    Case("harbour tag:#Baking tag:dredging", docs=frozenset({"alpha", "delta"})),
    Case("harbour tag:proj", docs=frozenset()),
    Case("harbour from:ana", docs=frozenset({"zeta"})),
    Case("harbour from:ana.ruiz@harbour.example", mode="keyword", docs=frozenset({"zeta"})),
    Case("harbour from:Ruiz before:2025 type:mail", docs=frozenset({"zeta"})),
    Case("harbour from:nobody", docs=frozenset()),
    # identifiers reach the keyword side whole: the exact one ranks first, its scattered parts do not
    Case("ABC-1234", mode="keyword", top="alpha"),
    Case("ABC-1234", top="alpha"),
    Case("10.1000/xyz123", mode="keyword", docs=frozenset({"beta"})),
    Case("10.1000/xyz123", top="beta"),
    Case("report_v2.pdf", top="gamma"),
    Case("parse_query", mode="keyword", docs=frozenset({"gamma"})),
    Case("Foo::bar", top="gamma"),
    # the same syntax holds whichever way hybrid fuses its two rankings
    Case('"tidal silt budget"', mode="hybrid-rrf", docs=frozenset({"alpha"})),
    Case('harbour in:"Lab notes"', mode="hybrid-rrf", docs=frozenset({"gamma", "delta"})),
    Case("ABC-1234", mode="hybrid-rrf", top="alpha"),
    # filters alone list the documents they match, newest first (a message by its Date:), one hit each
    Case("tag:dredging", order=("alpha",)),
    Case("tag:#Baking tag:dredging", mode="keyword", order=("delta", "alpha")),
    Case("type:pdf", order=("epsilon",)),
    Case("type:pdf after:2024-01", mode="vector", order=("epsilon",)),
    Case("type:markdown after:2024-01", order=("delta", "alpha")),
    Case("after:2024-01 before:2024-12", order=("epsilon", "delta", "zeta", "alpha")),
    Case("in:reports -draft", order=("alpha",)),
    Case("type:pdf before:2024", order=()),
    Case("tag:proj", order=()),
    # bad queries: a message, never an exception
    Case('harbour "silt budget', error="unmatched quote"),
    Case("harbour after:notadate", error="after:notadate is not a date"),
    Case("harbour type:spreadsheet", error="unknown type:spreadsheet"),
    Case("harbour type:", error="type: needs a value"),
    Case("-harbour -draft", error="only exclusions"),
    Case("harbour tag:", error="tag: needs a value"),
    Case("harbour from:", error="from: needs a value"),
    Case("harbour tag:#", error="names no tag"),
    Case("harbour -from:ana", error="cannot be excluded"),
    Case('harbour in:"No such folder"', error='no folder called "No such folder"'),
    Case("harbour after:2025 before:2024", error="is not later than"),
    Case("x" * 1001, error="at most 1,000"),
]


def write_corpus(root: Path) -> Path:
    """The corpus as files under ``root``, each with its modification date (local time)."""
    for rel, content, when in CORPUS.values():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        os.utime(path, (when.timestamp(), when.timestamp()))
    return root


def stem(name: str) -> str:
    return Path(name).stem


def indexed_data_dir(root: Path) -> Path:
    """A data directory with base ``kb`` holding the corpus, indexed by the real worker process
    (``quire worker --until-idle``); every file completed."""
    import json

    from tests.conftest import quire_cli

    data = root / "data"
    corpus = write_corpus(root / "corpus")
    for args in (
        ("base", "create", "kb", "--precision", "fp32"),
        ("add", "kb", str(corpus)),
        ("worker", "--until-idle"),
    ):
        result = quire_cli("--json", *args, data_dir=data)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
    listed = quire_cli("--json", "items", "kb", data_dir=data)
    files = [i for i in json.loads(listed.stdout)["items"] if i["type"] == "file"]
    assert sorted(stem(i["name"]) for i in files if i["status"] == "completed") == sorted(CORPUS), listed.stdout
    return data


def judge(case: Case, names: list[str] | None, error: str | None) -> str | None:
    """What is wrong with an answer (the hits' document names in rank order, or an error message), or None."""
    if case.error is not None:
        return (
            None
            if error is not None and case.error in error
            else f"expected error {case.error!r}, got {error or names}"
        )
    if error is not None or names is None:
        return f"unexpected error {error!r}"
    found = [stem(n) for n in names]
    if case.docs is not None and set(found) != case.docs:
        return f"expected {sorted(case.docs)}, got {sorted(set(found))}"
    if case.order is not None and found != list(case.order):
        return f"expected {list(case.order)}, got {found}"
    if case.top is not None and (not found or found[0] != case.top):
        return f"expected {case.top} first, got {found}"
    return None
