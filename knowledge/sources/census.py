"""Metadata census: every field a parser reads is stored or excluded, with why (nothing is kept by accident).

For each parser, :data:`CENSUS` lists the fields the *source* states that the parser sees — named the
way the source names them (``/Title`` in a PDF, ``core_properties.author`` in a DOCX, ``dc:creator`` in
an EPUB) — and says for each one either

* :func:`stored` — it becomes ``ParsedDocument.metadata[key]`` (several sources may feed one key, e.g.
  a Markdown title from front matter or else the first heading), or
* :func:`excluded` — it is deliberately left out, with a reason. A blank reason raises, so an exclusion
  cannot be declared without one.

:func:`assert_declared` runs on every parse (``parse_bytes``/``parse_note``): a parser that starts
yielding a key nobody declared fails loudly instead of silently widening what Quire stores. The tests
also hold the census against the libraries' own field lists (python-docx ``CoreProperties``, the PDF
document-information keys), so a library upgrade that adds a field is noticed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from knowledge.sources.model import MetadataValue


class UndeclaredMetadata(RuntimeError):
    """A parser produced a metadata key its census does not declare as stored: a programming error."""


@dataclass(frozen=True)
class Stored:
    """A source field kept in ``metadata[key]``."""

    source: str
    key: str

    def __post_init__(self) -> None:
        if not self.source.strip() or not self.key.strip():
            raise ValueError("a stored field needs a source name and a metadata key")


@dataclass(frozen=True)
class Excluded:
    """A source field deliberately not kept, and why."""

    source: str
    reason: str

    def __post_init__(self) -> None:
        if not self.source.strip():
            raise ValueError("an excluded field needs a source name")
        if not self.reason.strip():
            raise ValueError(f"excluding {self.source!r} needs a reason")


def stored(source: str, key: str) -> Stored:
    return Stored(source, key)


def excluded(source: str, reason: str) -> Excluded:
    return Excluded(source, reason)


@dataclass(frozen=True)
class ParserCensus:
    """Everything one parser reads from a source, each field stored or excluded exactly once."""

    parser: str
    stored: tuple[Stored, ...]
    excluded: tuple[Excluded, ...]

    def __post_init__(self) -> None:
        names = [f.source for f in self.stored] + [f.source for f in self.excluded]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"{self.parser}: fields declared twice: {duplicates}")

    @property
    def stored_keys(self) -> frozenset[str]:
        return frozenset(f.key for f in self.stored)

    @property
    def sources(self) -> frozenset[str]:
        return frozenset(f.source for f in self.stored) | frozenset(f.source for f in self.excluded)


_NOT_CONTENT = "software name, not about the content"

_TEXT = ParserCensus("text", (stored("detected character encoding", "encoding"),), ())

_CODE = ParserCensus(
    "code",
    (stored("detected character encoding", "encoding"), stored("file suffix", "language")),
    (),
)

_ROFF = ParserCensus(
    "roff",
    (
        stored("detected character encoding", "encoding"),
        stored(".TH or .Dt: the page's name and section, as name(section)", "title"),
    ),
    (
        excluded(".TH date, source and manual (or .Dd date, .Os)", "packaging details, not about the content"),
        excluded("macro definitions, registers and strings", "typesetting plumbing, not the page's text"),
    ),
)

_NOTE = ParserCensus("note", (stored("title typed by the user", "title"),), ())

_MARKDOWN = ParserCensus(
    "markdown",
    (
        stored("detected character encoding", "encoding"),
        stored("front matter: title", "title"),
        stored("first ATX heading", "title"),
        stored("front matter: author", "author"),
        stored("front matter: date", "date"),
        stored("front matter: created", "created"),
        stored("front matter: updated, modified or lastmod", "modified"),
        stored("front matter: tags or tag", "tags"),
        stored("inline #tags", "tags"),
        stored("front matter: aliases or alias", "aliases"),
        stored("[[wiki links]] and ![[embeds]]: their targets", "links"),
        stored("ATX headings", "heading_count"),
    ),
    (
        excluded(
            "front matter: other keys",
            "front matter keys other than the ones above are not read: they are user-defined, "
            "with no agreed meaning, and the front matter block is not indexed as text either",
        ),
        excluded("[[link|alias]] display text and #heading anchors", "the target note is what a link names"),
        excluded("Markdown [text](url) links", "web addresses and file paths, not notes of the vault"),
    ),
)

_HTML = ParserCensus(
    "html",
    (
        stored("declared or detected character encoding", "encoding"),
        stored("<title>", "title"),
        stored("<html lang>", "language"),
        stored('<meta name="author">', "author"),
        stored('<meta name="description">', "description"),
    ),
    (
        excluded('<meta name="keywords">', "search-engine hints, often stuffed with terms not in the page"),
        excluded('<meta name="generator">', _NOT_CONTENT),
        excluded(
            "other <meta> tags (viewport, robots, Open Graph, Twitter cards)",
            "page plumbing and social-card copies of the title/description, not about the content",
        ),
    ),
)

_PDF = ParserCensus(
    "pdf",
    (
        stored("/Title", "title"),
        stored("/Author", "author"),
        stored("/Subject", "subject"),
        stored("/Keywords", "keywords"),
        stored("/CreationDate", "created"),
        stored("/ModDate", "modified"),
        stored("page tree: number of pages", "page_count"),
        stored("OCR language, when a page without a text layer was read by OCR", "ocr"),
        stored("pages whose text came from OCR", "ocr_pages"),
    ),
    (
        excluded("/Creator", "name of the authoring application, not about the content"),
        excluded("/Producer", "name of the PDF-writing software, not about the content"),
        excluded("/Trapped", "a print-production flag"),
        excluded("other document-information keys", "tool-specific keys with no agreed meaning"),
        excluded(
            "XMP metadata stream",
            "restates the document-information fields in XML; parsing it adds no field we keep",
        ),
        excluded("document outline (bookmarks)", "navigation; the section titles are in the page text"),
        excluded("annotations and form fields", "reviewers' notes and form input, not the document's text"),
    ),
)

# Office core properties (docProps/core.xml): the same fields, read the same way, in DOCX and PPTX.
_OFFICE_CORE_STORED = (
    stored("core_properties.title", "title"),
    stored("core_properties.author", "author"),
    stored("core_properties.subject", "subject"),
    stored("core_properties.keywords", "keywords"),
    stored("core_properties.category", "category"),
    stored("core_properties.comments", "description"),
    stored("core_properties.identifier", "identifier"),
    stored("core_properties.language", "language"),
    stored("core_properties.created", "created"),
    stored("core_properties.modified", "modified"),
)
_OFFICE_CORE_EXCLUDED = (
    excluded("core_properties.content_status", "workflow state such as 'Draft', not about the content"),
    excluded(
        "core_properties.last_modified_by",
        "the account name of whoever saved last: personal data that search does not need",
    ),
    excluded("core_properties.last_printed", "printing history, not about the content"),
    excluded("core_properties.revision", "a save counter kept by the word processor"),
    excluded("core_properties.version", "a version label set by document-management tools"),
    excluded(
        "extended properties (docProps/app.xml)",
        "application name, template, company and page/word counts: "
        "about the software or the organisation, and the counts are stale estimates",
    ),
)

_DOCX = ParserCensus("docx", _OFFICE_CORE_STORED, _OFFICE_CORE_EXCLUDED)

_SLIDES = ParserCensus(
    "slides",
    (*_OFFICE_CORE_STORED, stored("presentation: number of slides", "slide_count")),
    (
        *_OFFICE_CORE_EXCLUDED,
        excluded("slide layouts and masters", "placeholder prompts ('Click to add title'), not the deck's content"),
        excluded("comments", "reviewers' remarks with their names, not the deck's content"),
        excluded("pictures, charts and media", "no text to index; chart data is a copy of a workbook"),
    ),
)

_CSV = ParserCensus(
    "csv",
    (stored("detected character encoding", "encoding"), stored("rows with a value", "row_count")),
    (excluded("sniffed delimiter and quoting", "how the file is written, not what it says"),),
)

_SPREADSHEET = ParserCensus(
    "spreadsheet",
    (
        stored("visible worksheets: number", "sheet_count"),
        stored("visible worksheets: names", "sheets"),
        stored("rows with a value", "row_count"),
    ),
    (
        excluded("hidden sheets and chart sheets", "hidden on purpose by the author, or pictures with no text"),
        excluded("formulas", "the cached results are read; the formula text is spreadsheet plumbing"),
        excluded(
            "document properties (docProps/core.xml, meta.xml)",
            "python-calamine does not read them; workbooks rarely carry a useful title",
        ),
        excluded("cell formats, comments and defined names", "presentation and reviewers' notes, not the values"),
    ),
)

# OpenDocument meta.xml: the same fields, read the same way, in ODT and ODP.
_ODF_META_STORED = (
    stored("dc:title", "title"),
    stored("dc:creator", "author"),
    stored("dc:subject", "subject"),
    stored("dc:description", "description"),
    stored("dc:language", "language"),
    stored("meta:keyword", "keywords"),
    stored("meta:creation-date", "created"),
    stored("dc:date", "modified"),
)
_ODF_META_EXCLUDED = (
    excluded("meta:generator", _NOT_CONTENT),
    excluded("meta:initial-creator", "the first author's account name; dc:creator is the author kept"),
    excluded("meta:editing-cycles and meta:editing-duration", "a save counter and time spent, not content"),
    excluded("meta:document-statistic", "page/word counts computed by the editor"),
    excluded("meta:print-date and meta:printed-by", "printing history and an account name"),
    excluded("meta:template, meta:auto-reload, meta:hyperlink-behaviour", "editor settings"),
    excluded("meta:user-defined", "user-defined keys with no agreed meaning"),
)

_ODT = ParserCensus("odt", _ODF_META_STORED, _ODF_META_EXCLUDED)

_ODP = ParserCensus(
    "odp",
    (*_ODF_META_STORED, stored("presentation: number of slides (draw:page)", "slide_count")),
    (
        *_ODF_META_EXCLUDED,
        excluded("master pages and layouts", "placeholder prompts and page furniture, not the deck's content"),
        excluded("annotations (office:annotation)", "reviewers' remarks with their names, not the content"),
        excluded("pictures, charts and media", "no text to index; chart data is a copy of a spreadsheet"),
    ),
)

_RTF = ParserCensus(
    "rtf",
    (),
    (
        excluded(
            "\\info group (title, author, operator, dates, counts)",
            "striprtf drops the group without reading it; RTF files rarely fill it in",
        ),
    ),
)

_EPUB = ParserCensus(
    "epub",
    (
        stored("dc:title", "title"),
        stored("dc:creator", "author"),
        stored("dc:language", "language"),
        stored("dc:date", "date"),
        stored("dc:publisher", "publisher"),
        stored("dc:identifier", "identifier"),
        stored("dc:description", "description"),
        stored("dc:subject", "subject"),
        stored("spine: number of chapters", "chapter_count"),
    ),
    (
        excluded("dc:contributor", "secondary credits and conversion tools (e.g. 'calibre'), not authorship"),
        excluded("dc:rights", "a licensing statement, not about the content"),
        excluded("dc:coverage", "rarely set, with no agreed format"),
        excluded("dc:relation", "links to other resources, not about this content"),
        excluded("dc:source", "the work this edition was derived from: provenance, not content"),
        excluded("dc:type", "a genre code with no agreed vocabulary"),
        excluded("dc:format", "always the EPUB media type"),
        excluded(
            "OPF <meta> entries (dcterms:modified, generator, cover, calibre:*)",
            "package bookkeeping and tool-specific extensions, not about the content",
        ),
        excluded(
            "navigation document and NCX (table of contents)",
            "chapter titles that are already in the chapter text",
        ),
    ),
)

_IMAGE = ParserCensus(
    "image",
    (
        stored("number of pages (frames of a multi-page TIFF)", "page_count"),
        stored("pixel width of the first page", "width"),
        stored("pixel height of the first page", "height"),
        stored("OCR language", "ocr"),
        stored("pages whose OCR found text", "ocr_pages"),
    ),
    (
        excluded(
            "EXIF (camera, lens, exposure, date taken, GPS position)",
            "photographic settings and, for GPS, where the person was: personal data search does not need",
        ),
        excluded("embedded ICC colour profile", "colour management, not about the content"),
        excluded("XMP and IPTC blocks", "editing-tool bookkeeping; captions are rare and unreliable"),
        excluded("image mode, DPI and compression", "how the pixels are stored, not what they say"),
        excluded("animation frames after the first (GIF, WebP)", "animations are not documents"),
    ),
)

_MAIL = ParserCensus(
    "mail",
    (
        stored("Subject header", "subject"),
        stored("From header", "from"),
        stored("To header", "to"),
        stored("Cc header", "cc"),
        stored("Date header (ISO 8601 when it parses)", "date"),
    ),
    (
        excluded("Bcc header", "hidden recipients the sender chose not to show: kept hidden"),
        excluded("Reply-To and Sender headers", "routing addresses, usually the From address again"),
        excluded(
            "Message-ID, In-Reply-To and References headers",
            "threading identifiers; useful for threads, which are not built yet, and not about the content",
        ),
        excluded("Received, Return-Path and authentication headers", "the route through mail servers"),
        excluded("X-* and List-* headers", "client- and list-specific extensions with no agreed meaning"),
        excluded("MIME structure and charsets", "how the message is encoded, not what it says"),
        excluded(
            "attachments (names and content)",
            "an attachment is a file of its own: one of a type Quire reads is a child item of its message",
        ),
        excluded("alternative body parts", "the HTML twin of a plain-text body says the same thing"),
    ),
)

_OUTLOOK = ParserCensus(
    "outlook",
    (
        stored("PR_SUBJECT", "subject"),
        stored("From header, else PR_SENDER_NAME with PR_SENDER_EMAIL_ADDRESS", "from"),
        stored("To header, else the To recipients (display name and address)", "to"),
        stored("Cc header, else the Cc recipients", "cc"),
        stored("Date header, else PR_CLIENT_SUBMIT_TIME (ISO 8601; none for an unsent draft)", "date"),
    ),
    (
        excluded("Bcc recipients and PR_DISPLAY_BCC", "hidden recipients the sender chose not to show: kept hidden"),
        excluded("PR_DISPLAY_TO and PR_DISPLAY_CC", "display-name copies of the recipients already stored"),
        excluded("PR_MESSAGE_CLASS", "which Outlook form shows the item, not what it says"),
        excluded(
            "transport headers other than From, To, Cc and Date",
            "the route through mail servers, threading identifiers and client extensions, as for .eml",
        ),
        excluded("named properties and other MAPI properties", "Outlook's bookkeeping, with no agreed meaning"),
        excluded("RTF body", "the plain or HTML body says the same thing (extract-msg derives one from it)"),
        excluded(
            "attachments (names and content)",
            "an attachment is a file of its own: one of a type Quire reads is a child item of its message",
        ),
    ),
)

_CONTAINER = ParserCensus(
    "container",
    (
        stored("files read from it (its children)", "files"),
        stored("entries not read (links, devices, bombs, encrypted, over a limit)", "not_read"),
    ),
    (
        excluded("member contents", "each file inside is read as a child item of its own"),
        excluded("member dates, owners and permissions", "archive bookkeeping, not what the files say"),
        excluded("ZIP archive comment and extra fields", "tool-specific annotations with no agreed meaning"),
        excluded("mbox From_ lines", "the envelope sender and date; each message's own headers are read"),
    ),
)

_DOCUMENTS = (_TEXT, _MARKDOWN, _CODE, _HTML, _PDF, _DOCX, _EPUB, _IMAGE, _NOTE, _ROFF)
_OFFICE = (_CSV, _SPREADSHEET, _SLIDES, _ODT, _ODP, _RTF, _MAIL, _OUTLOOK, _CONTAINER)
CENSUS: Mapping[str, ParserCensus] = MappingProxyType({c.parser: c for c in (*_DOCUMENTS, *_OFFICE)})


def blank_metadata(parser: str) -> dict[str, MetadataValue]:
    """Every stored key of ``parser`` set to ``None``: all files of one type expose the same keys."""
    return dict.fromkeys(sorted(CENSUS[parser].stored_keys))


def assert_declared(parser: str, metadata: Mapping[str, object]) -> None:
    """Raise :class:`UndeclaredMetadata` if ``metadata`` has a key the census does not declare stored."""
    census = CENSUS.get(parser)
    if census is None:
        raise UndeclaredMetadata(f"parser {parser!r} has no metadata census")
    undeclared = sorted(set(metadata) - census.stored_keys)
    if undeclared:
        raise UndeclaredMetadata(f"parser {parser!r} yields undeclared metadata fields: {undeclared}")
