"""Two house rules of the product's modules, as tests. No module over 450 lines: past that a module holds more
than one subject, and is cut along its seams (see docs/ARCHITECTURE.md for each room's modules). No comment
cites a document outside the repository: it says the rule and its reason instead.

``OVER_FOR_NOW`` lists the modules still over, each with why. A listed module that gets under the limit
must leave the list, so it only ever shrinks.
"""

from __future__ import annotations

import re

from tests.conftest import REPO

MAX_LINES = 450

OVER_FOR_NOW: dict[str, str] = {}


def _line_counts() -> dict[str, int]:
    return {
        path.relative_to(REPO).as_posix(): len(path.read_text().splitlines())
        for package in ("knowledge", "jobs", "app")
        for path in (REPO / package).rglob("*.py")
    }


def test_no_module_is_over_the_limit() -> None:
    over = {name: n for name, n in _line_counts().items() if n > MAX_LINES and name not in OVER_FOR_NOW}
    assert over == {}, f"over {MAX_LINES} lines: cut it along its seams"


def test_a_module_back_under_the_limit_leaves_the_list() -> None:
    counts = _line_counts()
    back = sorted(name for name in OVER_FOR_NOW if counts.get(name, 0) <= MAX_LINES)
    assert back == [], "under the limit (or gone): remove it from OVER_FOR_NOW"


# Comments say the rule and its reason, not where it was first written: the documents "issue N", "seed 00N"
# and "SPEC §N" name are not in the repository. The files that still cite them, which may only shrink.
_CITATION = re.compile(r"\bissue \d+|\bseed \d{3}|\bseed ``\d{3}|SPEC §|SPEC\.md", re.IGNORECASE)
CITING_FOR_NOW: set[str] = set()


def _citing() -> set[str]:
    return {
        path.relative_to(REPO).as_posix()
        for package in ("knowledge", "jobs", "app")
        for path in (REPO / package).rglob("*.py")
        if _CITATION.search(path.read_text())
    }


def test_comments_cite_no_document_outside_the_repository() -> None:
    assert sorted(_citing() - CITING_FOR_NOW) == [], "say the rule and why instead of citing the document"
    assert sorted(CITING_FOR_NOW - _citing()) == [], "cites nothing any more: remove it from CITING_FOR_NOW"
