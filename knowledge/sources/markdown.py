"""Markdown: the source text itself (markup kept), one segment per line, and a little metadata.

* YAML front matter (a ``---`` block on the first line) is split off: only ``title``, ``author``,
  ``date``, ``created``, ``updated`` (or ``modified``/``lastmod``), ``tags``/``tag`` and ``aliases``/``alias``
  are read from it (census), and the block is not part of the indexed text, so undeclared keys are neither
  stored nor searchable. Body segments keep their *source* line numbers.
  The reader handles the YAML people write in front matter (scalars, quoted strings, ``[a, b]`` and
  ``- item`` lists, ``|``/``>`` blocks) without a YAML library.
* ATX headings (``# Title``) outside fenced code blocks are counted; the first one is the title when
  the front matter has none.
* Note-vault structure (Obsidian, Logseq): inline ``#tags`` (a ``#`` at the start of a word, followed by
  letters, digits, ``_``, ``-`` or ``/`` and not only digits) join the front-matter tags, compared without
  case; ``[[wiki links]]`` and ``![[embeds]]`` are kept as ``links``: their targets without ``|alias`` or
  ``#heading``, in order, once each, joined by `` | `` (a character a link target cannot contain).
  Neither is looked for inside fenced code blocks or inline code spans.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, SourceRejected
from knowledge.sources.plain import decode_nonblank
from knowledge.sources.textutil import clean_value, document, line_segments

# front matter key -> the field it feeds (Obsidian accepts the singular forms too)
_FRONT_MATTER_KEYS = {
    "title": "title", "author": "author", "date": "date", "tags": "tags", "tag": "tags",
    "aliases": "aliases", "alias": "aliases", "created": "created", "updated": "modified",
    "modified": "modified", "lastmod": "modified",
}  # fmt: skip
_MAX_FRONT_MATTER_LINES = 200
_KEY = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:(?:[ \t]+(.*))?$")
_FIRST_KEY = re.compile(r"^\s*(#.*)?$|^[A-Za-z_][\w-]*[ \t]*:")
_BLOCK_SCALAR = frozenset({"", "|", ">", "|-", ">-", "|+", ">+"})
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")
_TAG = re.compile(r"(?<![^\s(\[,;])#([\w/-]*[^\W\d][\w/-]*)")
_WIKI_LINK = re.compile(r"!?\[\[([^\[\]|#^\n]+)(?:[#^][^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")


def parse_markdown(data: bytes, fmt: Format) -> ParsedDocument:
    decoded = decode_nonblank(data)
    front, body, first_line = split_front_matter(decoded.text)
    if not body.strip():
        raise SourceRejected("empty", "file has no text besides its front matter")
    fields = read_front_matter(front)
    headings = list(atx_headings(body))
    inline_tags, links = vault_marks(body)
    metadata = blank_metadata("markdown")
    metadata.update(
        encoding=decoded.encoding,
        title=clean_value(" ".join(fields.get("title", []))) or (clean_value(headings[0]) if headings else None),
        author=clean_value("; ".join(fields.get("author", []))),
        date=clean_value(" ".join(fields.get("date", []))),
        created=clean_value(" ".join(fields.get("created", []))),
        modified=clean_value(" ".join(fields.get("modified", []))),
        tags=clean_value(", ".join(_once([t.lstrip("#") for t in fields.get("tags", [])] + inline_tags))),
        aliases=clean_value(", ".join(_once(fields.get("aliases", [])))),
        links=clean_value(" | ".join(_once(links))),
        heading_count=len(headings),
    )
    return document("markdown", body, line_segments(body, first_line), metadata, fmt.mime)


def split_front_matter(text: str) -> tuple[list[str], str, int]:
    """``(front matter lines, body, body's first source line)``; no front matter gives ``([], text, 1)``."""
    lines = text.split("\n", _MAX_FRONT_MATTER_LINES + 1)
    if lines[0].rstrip() != "---" or len(lines) < 2 or not _FIRST_KEY.match(lines[1]):
        return [], text, 1
    # When the split hit its limit, the last element is the unsplit rest of the file, not a line.
    last = len(lines) - 1 if len(lines) > _MAX_FRONT_MATTER_LINES + 1 else len(lines)
    for index in range(1, last):
        if lines[index].rstrip() in ("---", "..."):
            return lines[1:index], "\n".join(lines[index + 1 :]), index + 2
    return [], text, 1


def read_front_matter(lines: list[str]) -> dict[str, list[str]]:
    """The declared keys' values as lists of strings; every other key is skipped unread."""
    values: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        match = _KEY.match(line)
        if match:
            key, raw = match.group(1).lower(), (match.group(2) or "").strip()
            field = _FRONT_MATTER_KEYS.get(key)
            current = values.setdefault(field, []) if field else None
            if current is not None and raw not in _BLOCK_SCALAR:
                current.extend(_inline_values(raw))
        elif current is not None and line[:1] in (" ", "\t", "-"):
            item = line.strip()
            current.extend(_inline_values(item[2:] if item.startswith("- ") else item))
    return values


def _inline_values(raw: str) -> list[str]:
    raw = _drop_comment(raw.strip())
    if raw.startswith("[") and raw.endswith("]"):
        return [v for v in (_unquote(part) for part in raw[1:-1].split(",")) if v]
    value = _unquote(raw)
    return [value] if value else []


def _drop_comment(raw: str) -> str:
    if raw[:1] in ("'", '"'):
        return raw
    cut = raw.find(" #")
    return raw if cut < 0 else raw[:cut].rstrip()


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in ("'", '"'):
        return value[1:-1]
    return value


def atx_headings(body: str) -> Iterator[str]:
    """Texts of ATX headings, skipping fenced code blocks (a ``# comment`` in a shell block is no heading)."""
    for line in prose_lines(body):
        heading = _ATX.match(line)
        if heading:
            yield (heading.group(2) or "").strip()


def prose_lines(body: str) -> Iterator[str]:
    """The body's lines outside fenced code blocks."""
    fence: str | None = None
    for line in body.split("\n"):
        opener = _FENCE.match(line)
        if opener:
            marker = opener.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        if fence is None:
            yield line


def vault_marks(body: str) -> tuple[list[str], list[str]]:
    """Inline ``#tags`` and ``[[wiki link]]`` targets, in order of appearance (see module doc)."""
    tags: list[str] = []
    links: list[str] = []
    for line in prose_lines(body):
        if "#" not in line and "[[" not in line:
            continue
        line = without_code_spans(line)
        tags.extend(_TAG.findall(line))  # "# Heading" is no tag: a tag's "#" is followed by its name
        links.extend(target.strip() for target in _WIKI_LINK.findall(line) if target.strip())
    return tags, links


def without_code_spans(line: str) -> str:
    """``line`` with each inline code span (a run of backticks, up to the next run of the same length) made one
    space. Linear in the line: every run is looked at once, and each knows the next run of its length (a
    backtracking pattern took cubic time on a long line of unmatched backticks)."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(line)]
    if len(runs) < 2:
        return line
    next_same: list[int | None] = [None] * len(runs)
    last_of_length: dict[int, int] = {}
    for i in range(len(runs) - 1, -1, -1):
        length = runs[i][1] - runs[i][0]
        next_same[i] = last_of_length.get(length)
        last_of_length[length] = i
    kept: list[str] = []
    at, i = 0, 0
    while i < len(runs):
        close = next_same[i]
        if close is None:
            i += 1
            continue
        kept.append(line[at : runs[i][0]])
        kept.append(" ")
        at, i = runs[close][1], close + 1
    kept.append(line[at:])
    return "".join(kept)


def _once(values: list[str]) -> list[str]:
    """``values`` without repeats (compared without case), first spelling and order kept."""
    seen: set[str] = set()
    kept = []
    for value in values:
        if value and value.casefold() not in seen:
            seen.add(value.casefold())
            kept.append(value)
    return kept
