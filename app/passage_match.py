"""Find a passage's characters on a rendered PDF page, whose text comes from another extractor.

A chunk's text was extracted by pypdf at ingest; the page the viewer draws is pdfium's, whose text
differs in whitespace, line breaks, hyphenation marks and ligatures. Both are compared as the sequence
of their letters and digits only (NFKC, case-folded), each kept with the index of the pdfium character
it came from, so a match maps straight back to pdfium's character boxes.

* the whole passage found verbatim on the page: that span (the usual case);
* else its longest prefix that ends at the page's last letter: the passage runs on to the next page,
  and the rest (``remainder``) is looked for at the start of that page;
* else the span covered by ``difflib``'s matching blocks of a useful size (the extractors disagree about
  order or a few characters), when they cover most of the passage.

A match is widened over the punctuation that clings to its first and last letters, so a sentence's
full stop is covered too.

Pure functions, no Qt: tested directly and run off the main thread.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

MIN_BLOCK = 6  # shorter common runs of letters are chance, not the passage
MIN_COVERED = 0.6  # share of the passage's letters the fuzzy blocks must cover to count as found


@dataclass(frozen=True)
class Folded:
    """Letters and digits of a text, case-folded, each with the index of the character it came from."""

    letters: str
    origin: tuple[int, ...]
    chars: str  # the text folded, to widen a match over the punctuation around it


def fold(chars: str) -> Folded:
    letters: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(chars):
        for c in unicodedata.normalize("NFKC", char).casefold():
            if c.isalnum():
                letters.append(c)
                origin.append(index)
    return Folded("".join(letters), tuple(origin), chars)


@dataclass(frozen=True)
class PageMatch:
    first: int  # index of the first page character of the passage
    last: int  # index of its last character (inclusive)
    remainder: str  # the passage's folded letters not on this page (it continues on the next)


def match_on_page(page: Folded, passage: str, *, continued: bool = False) -> PageMatch | None:
    """Where ``passage`` (raw text, or folded letters when ``continued``) lies on ``page``; ``None`` if
    not found. ``continued``: the rest of a passage begun on the previous page, expected at the top."""
    wanted = passage if continued else fold(passage).letters
    if not wanted or not page.letters:
        return None
    at = page.letters.find(wanted)
    if at >= 0:
        return _match(page, at, at + len(wanted), "")
    runs_on = _running_on(page, wanted, continued)
    if runs_on is not None:
        return runs_on
    return _fuzzy(page, wanted)


def _match(page: Folded, start: int, end: int, remainder: str) -> PageMatch:
    """Letters ``start``..``end`` as page characters, widened over punctuation that clings to them
    (a sentence's full stop, a closing quote or bracket, an opening one)."""
    first, last, chars = page.origin[start], page.origin[end - 1], page.chars
    while first > 0 and _clings(chars[first - 1]):
        first -= 1
    while last + 1 < len(chars) and _clings(chars[last + 1]):
        last += 1
    return PageMatch(first, last, remainder)


def _clings(char: str) -> bool:
    return not char.isspace() and not char.isalnum()


def _running_on(page: Folded, wanted: str, continued: bool) -> PageMatch | None:
    """The passage's longest prefix that ends the page (or, ``continued``, begins it)."""
    if continued:
        size = _longest(lambda k: page.letters.startswith(wanted[:k]), len(wanted))
        return _match(page, 0, size, wanted[size:]) if size >= MIN_BLOCK else None
    size = _longest(lambda k: wanted[:k] in page.letters, len(wanted))
    if size < MIN_BLOCK or not page.letters.endswith(wanted[:size]):
        return None
    start = len(page.letters) - size
    return _match(page, start, len(page.letters), wanted[size:])


def _longest(holds: Callable[[int], bool], limit: int) -> int:
    """The largest k ≤ limit with ``holds(k)``, for a property true up to some k and false after."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if holds(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _fuzzy(page: Folded, wanted: str) -> PageMatch | None:
    matcher = difflib.SequenceMatcher(None, wanted, page.letters, autojunk=False)
    blocks = [b for b in matcher.get_matching_blocks() if b.size >= MIN_BLOCK]
    if not blocks or sum(b.size for b in blocks) < MIN_COVERED * len(wanted):
        return None
    return _match(page, blocks[0].b, blocks[-1].b + blocks[-1].size, "")
