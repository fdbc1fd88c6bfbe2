"""Man pages (roff with the man or mdoc macros) rendered to plain text, one rendered line per source line.

Not a roff engine: one pass over the lines, each handled on its own, so the work is linear in the input.
Comments are dropped, ``.TH``/``.Dt`` become a title line, ``.SH``/``.SS``/``.Sh``/``.Ss`` heading lines,
font macros (``.B``, ``.BR``, ``.Nm``, ``.Fl``…) keep their text, paragraph macros become a blank line, and
every other request (``.de`` definitions with their bodies, ``.if``, ``.ds``, ``.nr``…) is dropped. Escapes
are translated or dropped (:func:`unescape`). Each rendered line is a segment carrying the number of the
source line it came from, so a hit points at the line an editor shows in the page's source.

A file named like a man page (``ls.1``, ``LGPL-2.1``) whose start is not roff is read as plain text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, Segment, SourceRejected
from knowledge.sources.plain import decode_nonblank, parse_text
from knowledge.sources.textutil import clean_value, document

_TEXT = Format("text", "text/plain")
_HEAD_LINES = 400  # a page's title request comes after at most this many preamble lines
_TITLE_REQUESTS = frozenset({"TH", "Dd", "Dt"})
_HEADINGS = frozenset({"SH", "SS", "Sh", "Ss"})
_BREAKS = frozenset({"TP", "IP", "PP", "LP", "P", "Pp", "br", "sp", "HP", "Bl", "El", "Bd", "Ed", "It", "Lp"})
_JOINED_FONTS = frozenset({"BR", "IR", "RB", "BI", "IB", "RI"})  # alternating fonts: arguments run together
_SPACED_FONTS = frozenset({"B", "I", "SM", "SB"})
# mdoc macros whose name is dropped and whose arguments are kept (they may also appear inside a line)
_MDOC = frozenset(
    {
        "Nm", "Ar", "Fl", "Cm", "Op", "Oo", "Oc", "Pa", "Em", "Sy", "Li", "Ev", "Va", "Dv", "Er", "Fn", "Ft", "Fa",
        "Fo", "Fc", "Ic", "Ql", "Dq", "Sq", "Pq", "Do", "Dc", "Qo", "Qc", "Qq", "Ad", "An", "Lk", "Mt", "Cd", "Nd",
        "Xr", "Ns", "No", "Bx", "Ux", "At", "St", "Tn", "In", "Vt", "Ms", "Aq", "Bq", "Brq", "Ta", "D1", "Dl",
    }
)  # fmt: skip
_MDOC_PUNCT = frozenset({",", ".", ";", ":", ")", "]", "?", "!"})
_MDOC_STOPS = _MDOC | _MDOC_PUNCT  # what ends a macro's arguments

_NAMED = {
    "em": "\u2014", "en": "\u2013", "bu": "\u2022", "aq": "'", "dq": '"', "lq": "\u201c", "rq": "\u201d",
    "oq": "\u2018", "cq": "\u2019", "ga": "`", "ti": "~", "ha": "^", "rs": "\\", "mi": "-", "hy": "-",
    "co": "\u00a9", "rg": "\u00ae", "tm": "\u2122", "de": "\u00b0", "mu": "\u00d7", "<=": "\u2264",
    ">=": "\u2265", "->": "\u2192", "<-": "\u2190",
}  # fmt: skip
_SIMPLE = {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", "t": "\t", "'": "'", "`": "`", ".": "."}
_DROPPED = frozenset("&|^)c:%,/dru{}pak")
# One alternation, each branch of bounded length: the scan is linear in the line.
_ESCAPE = re.compile(
    r"""\\(?:
        "(?P<comment>.*)                          # comment to the end of the line
      | [fFsnk*gVYm](?:\[[^\]\n]{0,64}\]|\([^\n]{2}|[-+]?\d{1,2}|[^\n])   # font, size, register, string
      | [hvwoXlLDNbxzSRAB]'[^'\n]{0,256}'?       # a quoted argument: motions, widths, device control
      | \((?P<named>[^\n]{2})                      # \(em
      | \[(?P<long>[^\]\n]{1,64})\]               # \[em]
      | (?P<one>[^\n])                            # \- \e \& ...
      | $
    )""",
    re.VERBOSE,
)


def looks_like_roff(head: bytes) -> bool:
    """Whether a page's start is roff: only requests and comments before a ``.TH``, ``.Dd`` or ``.Dt``."""
    count = 0
    for _, line in _source_lines(head.decode("latin-1")):
        count += 1
        if count >= _HEAD_LINES:
            return False
        stripped = line.strip()
        if not stripped:
            continue
        if stripped[0] not in ".'":
            return False
        if _request(stripped)[0] in _TITLE_REQUESTS:
            return True
    return False


def parse_man(data: bytes, fmt: Format) -> ParsedDocument:
    """A man page's text, headings and options kept, markup gone; plain text when it is not roff."""
    decoded = decode_nonblank(data)
    if not looks_like_roff(decoded.text[:8192].encode("utf-8", "replace")):
        if decoded.text.lstrip().startswith(".so "):
            raise SourceRejected("no_text", "a man page that only points to another page (.so)")
        return parse_text(data, _TEXT)
    lines, title = _render(decoded.text)
    if not any(text.strip() for text, _ in lines):
        raise SourceRejected("no_text", "the man page has no text once its markup is removed")
    text, segments = _joined(lines)
    metadata = blank_metadata("roff")
    metadata.update(encoding=decoded.encoding, title=clean_value(title))
    return document("roff", text, segments, metadata, fmt.mime)


def _joined(lines: list[tuple[str, int]]) -> tuple[str, tuple[Segment, ...]]:
    parts: list[str] = []
    segments: list[Segment] = []
    offset = 0
    while lines and not lines[-1][0]:
        lines.pop()  # a break at the end adds nothing
    for body, source_line in lines:
        piece = body + "\n"
        parts.append(piece)
        segments.append(Segment(offset, offset + len(piece), None, source_line, source_line))
        offset += len(piece)
    return "".join(parts), tuple(segments)


def _render(text: str) -> tuple[list[tuple[str, int]], str | None]:
    out: list[tuple[str, int]] = []
    title: str | None = None
    page_name: str | None = None
    named = False  # the page's name from its first .Nm, which a bare .Nm repeats
    for number, line in _source_lines(text):
        if line[:1] not in (".", "'"):
            _emit(out, unescape(line), number)
            continue
        name, rest = _request(line)
        args = _arguments(rest)
        if name in ("TH", "Dt") and args:
            page_name = page_name if named and page_name else unescape(args[0])
            title = f"{page_name}({unescape(args[1])})" if len(args) > 1 else page_name
            _emit(out, title, number)
        elif name == "Nm" and args and not named:
            page_name, named = unescape(args[0]), True
        if name in _HEADINGS:
            _break(out, number)
            _emit(out, " ".join(unescape(a) for a in args), number)
        elif name in _BREAKS:
            _break(out, number)
            if args and name in ("IP", "It"):
                _emit(out, _mdoc(args, page_name) if name == "It" else unescape(args[0]), number)
        elif name in _SPACED_FONTS:
            _emit(out, " ".join(unescape(a) for a in args), number)
        elif name in _JOINED_FONTS:
            _emit(out, "".join(unescape(a) for a in args), number)
        elif name in _MDOC:
            _emit(out, _mdoc([name, *args], page_name), number)
    return out, title


def _source_lines(text: str) -> Iterator[tuple[int, str]]:
    """Numbered lines without comments and without the bodies of macro definitions (``.de`` … ``..``)."""
    defining = False
    for number, line in _logical_lines(text):
        if defining:
            defining = line.strip() != ".."
            continue
        if line.startswith(('.\\"', "'\\\"", ".\\#", '\\"')) or line.strip() == ".":
            continue
        name = _request(line)[0] if line[:1] in (".", "'") else ""
        if name in ("de", "de1", "am", "ig"):
            defining = True
            continue
        yield number, line


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Numbered lines, a line ending in a lone backslash joined with the next (numbered by its first)."""
    pending: list[str] = []
    first = 1
    for number, line in enumerate(text.split("\n"), start=1):
        if not pending:
            first = number
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield first, "".join(pending)
        pending.clear()
    if pending:
        yield first, "".join(pending)


def _request(line: str) -> tuple[str, str]:
    """A control line's request name and the rest: ``.  SH NAME`` → (``SH``, ``NAME``)."""
    body = line[1:].lstrip(" \t")
    cut = 0
    while cut < len(body) and not body[cut].isspace() and (cut == 0 or body[cut] != "\\"):
        cut += 1
    return body[:cut], body[cut:].strip()


def _arguments(rest: str) -> list[str]:
    """Arguments split on blanks, a double-quoted one kept whole (``""`` inside it is a quote)."""
    args: list[str] = []
    i, length = 0, len(rest)
    while i < length:
        if rest[i].isspace():
            i += 1
            continue
        if rest[i] == '"':
            end = i + 1
            piece: list[str] = []
            while end < length and not (rest[end] == '"' and rest[end + 1 : end + 2] != '"'):
                piece.append(rest[end])
                end += 2 if rest[end] == '"' else 1
            args.append("".join(piece))
            i = end + 1
        else:
            end = i
            while end < length and not rest[end].isspace():
                end += 1
            args.append(rest[i:end])
            i = end
    return args


def _mdoc(tokens: list[str], page_name: str | None) -> str:
    """An mdoc line: macro names dropped, ``Fl`` arguments with their dash, a bare ``Nm`` as the page name."""
    words: list[str] = []
    flag = False
    for index, token in enumerate(tokens):
        if token in _MDOC:
            flag = token == "Fl"
            next_is_macro = index + 1 >= len(tokens) or tokens[index + 1] in _MDOC_STOPS
            if token == "Fl" and next_is_macro:
                words.append("-")
            elif token == "Nm" and next_is_macro and page_name:
                words.append(page_name)
            continue
        word = unescape(token)
        if index > 0 and tokens[index - 1] == "Xr" and index + 1 < len(tokens) and tokens[index + 1].isalnum():
            word = f"{word}({tokens[index + 1]})"  # .Xr ls 1 names ls(1)
        elif index > 1 and tokens[index - 2] == "Xr":
            continue
        if token in _MDOC_PUNCT and words:
            words[-1] += word
            continue
        words.append(f"-{word}" if flag else word)
    return " ".join(words)


def unescape(text: str) -> str:
    """Roff escapes translated (``\\(em`` → an em dash, ``\\-`` → ``-``) or dropped (fonts, sizes, strings)."""
    return _ESCAPE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    if match.group("comment") is not None:
        return ""
    named = match.group("named") or match.group("long")
    if named is not None:
        return _NAMED.get(named, "")
    one = match.group("one")
    if one is None or one in _DROPPED:
        return ""
    return _SIMPLE.get(one, one)


def _emit(out: list[tuple[str, int]], text: str, number: int) -> None:
    text = text.rstrip()
    if text:
        out.append((text, number))


def _break(out: list[tuple[str, int]], number: int) -> None:
    if out and out[-1][0]:
        out.append(("", number))
