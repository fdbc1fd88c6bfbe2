"""Must-find: a query's rare word, code, name or quoted phrase finds its document first, in every mode that
reads words (issue 46).

The corpus: 30 inspection logs of near-identical prose, each with one invented marker word no other file
holds, and a few files for a code (``E2f-1`` beside ``E2f-2`` and ``E2f-12``), a person's name (beside
files with only her first name or only her surname) and a phrase (beside files with its words apart). It is
indexed once per module, with the real model, in a fresh data directory (and, in ``make test-engines``, in
a team store).

``keyword``, ``hybrid`` (the fitted fusion) and ``hybrid-rrf`` must each rank the right document first for
every case. Before the fix a candidate missing from a keyword list of one hit was imputed that list's worst
score, the hit's own, so every log got the match's keyword credit and cosine alone ordered them: the default
``hybrid`` ranked 26 of these 30 markers first (the issue's corpus: 1 of 30).

``vector`` is held to the quoted phrase only: a phrase is required in every mode, so it leaves one document
to rank. An invented word, a code or a name has no meaning the model learned: it sees only word pieces,
which lead it to the right log often (26 of these 30 markers) but by chance, not by anything vector search
promises.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from knowledge.compose import open_quire, open_team_quire
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.knowledge.helpers import drain, make_base
from tests.support.engine_fixtures import ENGINES, QUEUE_ENV, STORE_ENV
from tests.support.files import write_tree

pytestmark = pytest.mark.model

MARKERS = (
    "brindlemoss", "quorvath", "zemplinar", "tassivore", "glimmerock", "pranthel", "vorstake", "nimbrulo",
    "skellowind", "trabbacine", "oomvelt", "fendraskel", "wuzzomere", "clathrovin", "drebbleton", "yspharine",
    "morgolite", "plenkwatch", "sarvidune", "kreshmold", "bluthervane", "ixoplast", "jovandrel", "hustravine",
    "gorpelund", "zindleweft", "mavrothic", "quellspar", "ruttlebane", "spindraxis",
)  # fmt: skip
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _log(n: int, marker: str) -> str:
    return (
        f"Inspection log {n} for the riverside pumping station\n\n"
        "The crew walked the intake screens at dawn, cleared sediment from the settling basin and logged the "
        "flow readings twice a day. Pressure held steady through the week and the backup generator started on "
        "the first try. A faint vibration in pump two was noted for the next visit. "
        f"On {DAYS[n % 7]} the technician wrote {marker} on the last page, next to the meter readings. "
        "The chlorine dosing pump was flushed and its tubing replaced, the fence along the outfall was checked "
        "for gaps, and the alarm panel was tested with the control room. Rainfall was light, the river level "
        "stayed within the normal band and no overflow was recorded. Spare filters and two drums of coagulant "
        "were ordered for the coming month, and the night shift rota was agreed with the union representative.\n"
    )


def _minutes(who: str, did: str) -> str:
    return (
        "Minutes of the harbour board meeting\n\n"
        f"{who} {did}. The board discussed the dredging schedule, the budget for the new quay lights and the "
        "complaints about night-time noise from the container cranes.\n"
    )


def _assay(code: str) -> str:
    return (
        "Cell cycle assay notes\n\n"
        f"We measured how {code} binds its promoter during the G1 to S transition in serum-starved fibroblasts, "
        "with three replicates per condition and a scrambled control.\n"
    )


FILES: dict[str, str] = {
    **{f"logs/log-{n:02}.md": _log(n, marker) for n, marker in enumerate(MARKERS)},
    "assays/e2f-1.md": _assay("E2f-1"),
    "assays/e2f-2.md": _assay("E2f-2"),
    "assays/e2f-12.md": _assay("E2f-12"),
    "board/achterberg.md": _minutes("Wilhelmina Achterberg", "presented the harbour accounts"),
    "board/wilhelmina.md": _minutes("Wilhelmina Foster", "chaired the meeting"),
    "board/pieter.md": _minutes("Pieter Achterberg", "reported on the quay repairs"),
    "board/ledger.md": _minutes("The clerk", "read from the copper lantern ledger kept since 1890"),
    "board/lantern.md": _minutes("The clerk", "kept the ledger by the light of a copper lantern"),
}


@dataclass(frozen=True)
class MustFind:
    query: str
    doc: str  # the stem of the document that must rank first

    @property
    def id(self) -> str:
        return self.query


CASES = [
    *(MustFind(marker, f"log-{n:02}") for n, marker in enumerate(MARKERS)),
    # the rare word among common ones: every log matches the rest of the query
    MustFind("which inspection log mentions quorvath", "log-01"),
    MustFind("pump vibration drebbleton readings", "log-14"),
    MustFind("E2f-1", "e2f-1"),
    MustFind("Wilhelmina Achterberg", "achterberg"),
    MustFind('"copper lantern ledger"', "ledger"),
]
WORD_MODES = ("keyword", "hybrid", "hybrid-rrf")


@pytest.fixture(scope="module", params=ENGINES)
def indexed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Quire]:
    """The corpus, indexed by an in-process worker: a fresh data directory, or a fresh team store."""
    root = tmp_path_factory.mktemp("must-find")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(QUEUE_ENV, raising=False)
        mp.delenv(STORE_ENV, raising=False)
        mp.setenv("QUIRE_CONFIG_DIR", str(root / "user-config"))
        if request.param == "postgresql":
            server = request.getfixturevalue("postgres_server")
            url = server.create_database(f"quire_must_find_{uuid.uuid4().hex[:12]}")
            quire = open_team_quire(url, data_dir=root / "data")
        else:
            quire = open_quire(root / "data")
        try:
            make_base(quire)
            operations.add_items(quire, "kb", [PathInput(write_tree(root / "corpus", dict(FILES)))])
            drain(quire)
            statuses = {i.name: i.status for i in operations.list_items(quire, "kb", flat=True) if i.type == "file"}
            assert len(statuses) == len(FILES) and set(statuses.values()) == {"completed"}, statuses
            yield quire
        finally:
            quire.close()


def _first(quire: Quire, query: str, mode: str) -> str | None:
    hits = search(quire, "kb", query, mode=mode, limit=5)
    return Path(hits[0].item_name).stem if hits else None


@pytest.mark.parametrize("mode", WORD_MODES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_document_with_the_rare_word_ranks_first(indexed: Quire, case: MustFind, mode: str) -> None:
    assert _first(indexed, case.query, mode) == case.doc


def test_vector_search_keeps_a_quoted_phrase_too(indexed: Quire) -> None:
    phrase = next(c for c in CASES if c.query.startswith('"'))
    hits = search(indexed, "kb", phrase.query, mode="vector", limit=5)
    assert [Path(h.item_name).stem for h in hits] == [phrase.doc]
