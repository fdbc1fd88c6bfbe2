"""Snippets: a window of a chunk around the first word that matches the query, with every match's span.

Phrases and identifiers (``"exact phrase"``, ``10.1000/xyz123``, ``parse_query``) are marked as one span
from their first word to their last wherever their words follow each other in the text, split as keyword
search splits them (at anything not a letter or digit), each word matched as a query word is."""

from __future__ import annotations

import re
from collections.abc import Sequence

SNIPPET_CHARS = 240
WORD = re.compile(r"\w+", re.UNICODE)
TOKEN = re.compile(r"[^\W_]+", re.UNICODE)  # a word as FTS5's unicode61 tokenizer cuts it


class _Matcher:
    """Whether a word matches a query term: equal, or (both at least 4 letters) sharing a prefix of all but
    the last two letters of the shorter one, at least 4 (so "proteins" marks "protein"). Terms are
    indexed by their first 4 letters, so a word costs one lookup, not one comparison per term."""

    def __init__(self, terms: Sequence[str]) -> None:
        self.exact = set(terms)
        self.by_prefix: dict[str, list[str]] = {}
        for t in self.exact:
            if len(t) >= 4:
                self.by_prefix.setdefault(t[:4], []).append(t)
        # Words that could match: the short terms whole, the others by their first 4 letters. The regex
        # finds them in C; only they are judged in Python (a chunk has ~150 words, a query a few terms).
        heads = sorted(
            {re.escape(t) + r"\b" for t in self.exact if len(t) < 4} | {re.escape(p) for p in self.by_prefix}
        )
        self.candidates = re.compile(r"\b(?:" + "|".join(heads) + r")\w*", re.IGNORECASE) if heads else None

    def spans(self, body: str) -> list[tuple[int, int]]:
        """Start and end of every matching word of ``body``, in order."""
        if self.candidates is None:
            return []
        return [(m.start(), m.end()) for m in self.candidates.finditer(body) if self(m.group(0))]

    def __call__(self, word: str) -> bool:
        w = word.lower()
        if w in self.exact:
            return True
        if len(w) < 4:
            return False
        for t in self.by_prefix.get(w[:4], ()):
            need = max(4, min(len(w), len(t)) - 2)
            if w[:need] == t[:need]:
                return True
        return False


def phrase_spans(body: str, phrases: Sequence[str]) -> list[tuple[int, int]]:
    """Start and end of every place in ``body`` where one of ``phrases``' words follow each other."""
    spans: list[tuple[int, int]] = []
    tokens = [(m.start(), m.end(), m.group(0)) for m in TOKEN.finditer(body)] if phrases else []
    for phrase in phrases:
        words = [m.group(0).lower() for m in TOKEN.finditer(phrase)]
        if not words:
            continue
        matchers = [_Matcher([w]) for w in words]
        for at in range(len(tokens) - len(words) + 1):
            if all(matchers[n](tokens[at + n][2]) for n in range(len(words))):
                spans.append((tokens[at][0], tokens[at + len(words) - 1][1]))
    return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def make_snippet(
    body: str, terms: Sequence[str], width: int = SNIPPET_CHARS, *, phrases: Sequence[str] = ()
) -> tuple[str, list[tuple[int, int]]]:
    """A window of ``body`` around the first match, with the spans of matching words and phrases."""
    words = _Matcher(terms).spans(body)
    if phrases:
        words = _merged(words + phrase_spans(body, phrases))
    start = 0
    if words:
        start = max(0, words[0][0] - width // 4)
        space = body.rfind(" ", 0, start)
        start = space + 1 if space >= 0 and start - space < 20 else start
    end = min(len(body), start + width)
    window = body[start:end].replace("\n", " ")
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(body) else ""
    offset = len(prefix) - start
    spans = [(s + offset, e + offset) for s, e in words if s >= start and e <= end]
    return prefix + window + suffix, spans
