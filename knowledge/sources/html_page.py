"""HTML (and the XHTML inside EPUBs): visible text with its block structure kept as line breaks.

BeautifulSoup with lxml's HTML parser (it copes with the tag soup found in real pages and EPUBs, and
resolves HTML entities that an XML parser would drop without a DTD). ``<head>``, scripts, styles,
templates, SVG and ``hidden`` elements are not text. Paragraph-like blocks are separated by a blank
line, other blocks (``div``, ``li``, ``tr`` …) by a line break, table cells by a tab; ``<pre>`` keeps
its whitespace, everything else has it collapsed as a browser would.

HTML has no pages or meaningful source lines, so the whole text is one segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bs4 import BeautifulSoup
from bs4.element import NavigableString, PageElement, PreformattedString, Tag

from knowledge.sources.census import blank_metadata
from knowledge.sources.decoding import declared_encoding
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, SourceRejected, failing_as
from knowledge.sources.plain import decode_nonblank
from knowledge.sources.textutil import Block, clean_value, document, join_blocks

_DROP = frozenset({"head", "script", "style", "noscript", "template", "svg", "iframe", "object", "embed"})
_PARAGRAPHS = frozenset({
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "ul", "ol", "dl", "figure",
    "hr", "section", "article", "header", "footer", "nav", "aside", "main", "address", "details", "form",
})  # fmt: skip
_LINES = frozenset({"div", "li", "tr", "dt", "dd", "caption", "figcaption", "summary", "legend", "body"})
_CELLS = frozenset({"td", "th"})
_PREFORMATTED = frozenset({"pre", "textarea", "listing", "plaintext"})
_WHITESPACE = re.compile(r"\s+")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")


class _TextBuilder:
    """Collects text; block boundaries ask for line breaks, which merge instead of piling up."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._pending = 0
        self._line_start = True

    def gap(self, newlines: int) -> None:
        if self._parts:
            self._pending = max(self._pending, newlines)

    def write(self, text: str, preformatted: bool = False) -> None:
        if not preformatted:
            text = _WHITESPACE.sub(" ", text)
            if self._pending or self._line_start or self._parts[-1].endswith(" "):
                text = text.lstrip(" ")
        if not text:
            return
        if self._pending:
            self._parts.append("\n" * self._pending)
            self._pending = 0
        self._parts.append(text)
        self._line_start = text.endswith("\n")

    def text(self) -> str:
        return _TRAILING_SPACE.sub("\n", "".join(self._parts)).strip()


def make_soup(markup: str) -> BeautifulSoup:
    with failing_as("HTML could not be parsed"):
        return BeautifulSoup(markup, "lxml")


@dataclass(frozen=True)
class _Leave:
    """Stack marker for the end of an element: the break it asks for and whether it was a table cell."""

    gap: int
    cell: bool


_Work = tuple[PageElement, bool] | _Leave


def visible_text(soup: BeautifulSoup) -> str:
    """The page's visible text with block structure as line breaks (see module doc).

    The walk uses an explicit stack: generated pages can nest thousands of elements deep (unclosed
    ``<font>``/``<div>`` soup), which would exhaust Python's recursion limit.
    """
    out = _TextBuilder()
    stack: list[_Work] = [(soup, False)]
    while stack:
        item = stack.pop()
        if isinstance(item, _Leave):
            out.gap(item.gap)
            if item.cell:
                out.write("\t", preformatted=True)
            continue
        node, preformatted = item
        if isinstance(node, Tag):
            _enter(node, preformatted, out, stack)
        elif isinstance(node, NavigableString) and not isinstance(node, PreformattedString):
            # PreformattedString covers comments, CDATA, doctypes and processing instructions.
            out.write(str(node), preformatted)
    return out.text()


def _enter(tag: Tag, preformatted: bool, out: _TextBuilder, stack: list[_Work]) -> None:
    name = tag.name.lower()
    if name in _DROP or tag.has_attr("hidden"):
        return
    if name == "br":
        out.write("\n", preformatted=True)
        return
    gap = 2 if name in _PARAGRAPHS else 1 if name in _LINES else 0
    out.gap(gap)
    stack.append(_Leave(gap, name in _CELLS))
    inner = preformatted or name in _PREFORMATTED
    stack.extend((child, inner) for child in reversed(tag.contents))


def _attr(tag: Tag | None, name: str) -> str | None:
    value = tag.get(name) if tag is not None else None
    return value if isinstance(value, str) else None


def _meta_content(soup: BeautifulSoup, name: str) -> str | None:
    for meta in soup.find_all("meta"):
        if isinstance(meta, Tag) and (_attr(meta, "name") or "").strip().lower() == name:
            return clean_value(_attr(meta, "content"))
    return None


def page_metadata(soup: BeautifulSoup) -> dict[str, str | None]:
    """Title, language, author and description, as the census for ``html`` declares."""
    html = soup.find("html")
    root = html if isinstance(html, Tag) else None
    title = soup.find("title")
    return {
        "title": clean_value(title.get_text()) if isinstance(title, Tag) else None,
        "language": clean_value(_attr(root, "lang") or _attr(root, "xml:lang")),
        "author": _meta_content(soup, "author"),
        "description": _meta_content(soup, "description"),
    }


def parse_html(data: bytes, fmt: Format) -> ParsedDocument:
    decoded = decode_nonblank(data, declared_encoding(data))
    soup = make_soup(decoded.text)
    with failing_as("HTML could not be read (unexpected structure)"):
        text, segments = join_blocks([Block(visible_text(soup))])
        found = page_metadata(soup)
    if not text:
        raise SourceRejected("no_text", "page has no visible text")
    metadata = blank_metadata("html")
    metadata.update(found, encoding=decoded.encoding)
    return document("html", text, segments, metadata, fmt.mime)
