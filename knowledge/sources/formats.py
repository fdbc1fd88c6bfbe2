"""Which file types Quire reads, decided by suffix, and the version of each parser.

A name without a suffix Quire knows (``LICENSE``, ``GPL-3``, ``notes.2024``, ``Makefile``) is not refused by its
name: :func:`judged_by_content` says its first bytes decide (``knowledge.sources.dispatch.require_text``), read
as plain text when they are text. Only a suffix known to name a binary type (``.exe``, ``.mp3``) is refused
unread.

The table is fixed in code rather than taken from :mod:`mimetypes`, whose answers depend on the host's
``/etc/mime.types`` and would make the same file parse differently on two machines.

``PARSER_VERSIONS`` is stamped on derived data (chunks, vectors): bump a parser's version whenever its output for
the same bytes changes (text, segments or metadata), so stale chunks are rebuilt rather than trusted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import PurePath

PARSER_VERSIONS: dict[str, str] = {
    # 2: a stray byte in mostly-UTF-8 text is replaced (decoding.py), not a cp1252/detector guess;
    # 3: a man page (roff) is rendered and PostScript skipped, where both used to be read as text
    "text": "text-3",
    "markdown": "markdown-3",  # 2: created, modified, aliases, inline #tags, [[wiki links]]; 3: as text-2
    "code": "code-2",  # 2: as text-2
    "html": "html-2",  # 2: as text-2
    "pdf": "pdf-3",  # 2: pages without a text layer are read by OCR; metadata ocr, ocr_pages; 3: ruled tables' rows
    "docx": "docx-2",  # 2: table rows as "header: value" lines
    "epub": "epub-2",  # 2: as text-2 (its chapters are decoded the same way)
    "image": "image-1",
    "note": "note-1",
    "csv": "csv-2",  # 2: as text-2
    "spreadsheet": "spreadsheet-1",
    "slides": "slides-1",
    "odt": "odt-1",
    "odp": "odp-1",
    "rtf": "rtf-1",
    "mail": "mail-2",  # 2: attached files become children
    "outlook": "outlook-2",  # 2: attached files become children
    "container": "container-1",
    "roff": "roff-1",
}


@dataclass(frozen=True)
class Format:
    """How to read one suffix: the parser, the MIME type to record, (for code) the language, and (for
    ``notes.md.gz``) the compression to undo before the parser reads the file inside."""

    parser: str
    mime: str
    language: str | None = None
    compression: str | None = None
    by_content: bool = False  # read as text for want of a name; its content may still say roff or PostScript


# A single compressed file is read as the file inside (knowledge/sources/compressed.py); an archive is not.
COMPRESSIONS = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz"}
OLE_SIGNATURE = bytes.fromhex("d0cf11e0a1b11ae1")  # a compound file's first bytes (an Outlook .msg is one)
_ARCHIVE_SUFFIXES = frozenset({".tar", ".zip", ".7z", ".rar", *COMPRESSIONS})


# Types Quire does not read whose files are binary: refused by name, never opened to be sniffed.
_BINARY_SUFFIXES = frozenset(
    {
        ".7z", ".rar", ".zst", ".lz", ".lz4", ".lzma", ".z", ".cab", ".iso", ".img", ".dmg", ".vhd", ".vmdk",
        ".exe", ".dll", ".so", ".dylib", ".o", ".a", ".lib", ".obj", ".class", ".jar", ".war", ".pyc", ".pyo",
        ".pyd", ".whl", ".deb", ".rpm", ".msi", ".apk", ".pdb", ".wasm", ".bin",
        ".db", ".sqlite", ".sqlite3", ".mdb", ".accdb", ".parquet", ".avro", ".npy", ".npz", ".pkl", ".pickle",
        ".pt", ".pth", ".onnx", ".safetensors", ".gguf", ".h5", ".hdf5",
        ".mp3", ".mp4", ".m4a", ".m4v", ".aac", ".wav", ".flac", ".ogg", ".oga", ".opus", ".wma", ".mid",
        ".avi", ".mkv", ".mov", ".wmv", ".webm", ".flv", ".mpg", ".mpeg",
        ".psd", ".ai", ".xcf", ".sketch", ".ico", ".icns", ".avif", ".jxl", ".raw", ".cr2", ".nef", ".dng",
        ".ttf", ".otf", ".woff", ".woff2", ".eot", ".doc", ".xls", ".ppt", ".pages", ".key", ".numbers",
        ".odg", ".mobi", ".azw", ".azw3", ".djvu", ".xps", ".chm", ".swf", ".blend", ".glb", ".stl",
        ".p7s", ".p7m", ".p12", ".pfx", ".der", ".gpg", ".kdbx",
    }
)  # fmt: skip

# Page-description formats: no extractor ships with Quire, so they are skipped by design, with the way out.
_PAGE_DESCRIPTIONS = {
    "PostScript": "PostScript is a page-description format; Quire reads the text of its PDF (ps2pdf makes one)",
    "DVI": "DVI is a page-description format; Quire reads the text of its PDF (dvipdf makes one) or its TeX source",
    "PCL": "PCL is a printer's page-description language; Quire reads the text of the PDF printed instead",
}
_PAGE_SUFFIXES = {".ps": "PostScript", ".eps": "PostScript", ".epsf": "PostScript", ".epsi": "PostScript",
                  ".dvi": "DVI", ".pcl": "PCL", ".pxl": "PCL"}  # fmt: skip
# first bytes: DSC or bare PostScript, DOS EPS binary header, DVI preamble, PCL reset, PJL job start
_PAGE_MAGIC = ((b"%!PS", "PostScript"), (b"\xc5\xd0\xd3\xc6", "PostScript"), (b"\xf7\x02", "DVI"),
               (b"\x1bE", "PCL"), (b"\x1b%-12345X", "PCL"))  # fmt: skip
# a man page: section digit and an optional suffix (ls.1, printf.3p, openssl.1ssl, File::Spec.3pm)
_MAN_SECTION = re.compile(r"\.[1-9][a-z]{0,6}")
MAN_PAGE = Format("roff", "text/troff")

_TEXT_SUFFIXES = (
    ".txt", ".text", ".log", ".rst", ".org", ".adoc", ".asciidoc", ".tex", ".bib",
    ".srt", ".vtt",
)  # fmt: skip
_MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd")
# read by OCR (knowledge/sources/image.py); HEIC/HEIF through pillow-heif
_IMAGE_SUFFIXES = {
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".tif": "image/tiff",
    ".tiff": "image/tiff", ".webp": "image/webp", ".bmp": "image/bmp", ".gif": "image/gif",
    ".heic": "image/heic", ".heif": "image/heif",
}  # fmt: skip
_OOXML = "application/vnd.openxmlformats-officedocument"
_ODF = "application/vnd.oasis.opendocument"
# tables keep their headers (knowledge/sources/tables.py), slides their notes
_OFFICE_SUFFIXES = {
    ".csv": ("csv", "text/csv"), ".tsv": ("csv", "text/tab-separated-values"),
    ".xlsx": ("spreadsheet", f"{_OOXML}.spreadsheetml.sheet"),
    ".xlsm": ("spreadsheet", "application/vnd.ms-excel.sheet.macroEnabled.12"),
    ".ods": ("spreadsheet", f"{_ODF}.spreadsheet"),
    ".pptx": ("slides", f"{_OOXML}.presentationml.presentation"),
    ".odp": ("odp", f"{_ODF}.presentation"),
    ".odt": ("odt", f"{_ODF}.text"), ".rtf": ("rtf", "application/rtf"),
    ".eml": ("mail", "message/rfc822"), ".msg": ("outlook", "application/vnd.ms-outlook"),
    # containers: their files become child items (knowledge/sources/members.py, lifecycle/members.py)
    ".zip": ("container", "application/zip"), ".tar": ("container", "application/x-tar"),
    ".tgz": ("container", "application/gzip"), ".tbz2": ("container", "application/x-bzip2"),
    ".txz": ("container", "application/x-xz"), ".mbox": ("container", "application/mbox"),
}  # fmt: skip
_HTML_SUFFIXES = {".html": "text/html", ".htm": "text/html", ".xhtml": "application/xhtml+xml"}

# suffix -> language name; the MIME type is the generic one for text so no table of x- types is needed.
_CODE_LANGUAGES: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "javascript", ".ts": "typescript", ".tsx": "typescript", ".java": "java", ".c": "c",
    ".h": "c", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".cs": "csharp", ".go": "go", ".rs": "rust", ".rb": "ruby", ".php": "php", ".swift": "swift",
    ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".sh": "shell", ".bash": "shell",
    ".zsh": "shell", ".ps1": "powershell", ".sql": "sql", ".css": "css", ".scss": "scss", ".less": "less",
    ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".ini": "ini", ".cfg": "ini",
    ".xml": "xml", ".lua": "lua", ".pl": "perl", ".r": "r", ".dart": "dart", ".hs": "haskell",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".clj": "clojure", ".m": "objective-c",
    ".vue": "vue", ".svelte": "svelte", ".proto": "protobuf", ".graphql": "graphql", ".tf": "terraform",
}  # fmt: skip


def _build_formats() -> dict[str, Format]:
    formats: dict[str, Format] = {s: Format("text", "text/plain") for s in _TEXT_SUFFIXES}
    formats.update({s: Format("markdown", "text/markdown") for s in _MARKDOWN_SUFFIXES})
    formats.update({s: Format("code", "text/plain", lang) for s, lang in _CODE_LANGUAGES.items()})
    formats.update({s: Format("html", mime) for s, mime in _HTML_SUFFIXES.items()})
    formats[".pdf"] = Format("pdf", "application/pdf")
    formats[".docx"] = Format("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
    formats[".epub"] = Format("epub", "application/epub+zip")
    formats.update({s: Format(parser, mime) for s, (parser, mime) in _OFFICE_SUFFIXES.items()})
    formats.update({s: Format("image", mime) for s, mime in _IMAGE_SUFFIXES.items()})
    return formats


FORMATS: dict[str, Format] = _build_formats()
SUPPORTED_SUFFIXES: frozenset[str] = frozenset(FORMATS)  # the built-in types (extra parsers are not listed)


def add_format(suffix: str, parser: str) -> None:
    """Read ``suffix`` with the extra parser ``parser`` (``knowledge.sources.dispatch.register_parser``)."""
    FORMATS[suffix.lower()] = Format(parser, "text/plain")


def suffix_of(name: str) -> str:
    """The lowercased final suffix of a file name (``""`` for none); only the name part is looked at."""
    return PurePath(name).suffix.lower()


def format_for(name: str) -> Format | None:
    """The format for a file name, or ``None`` when Quire does not read that type.

    ``x.md.gz`` is Markdown to decompress first; an inner name without a known suffix (``changelog.gz``,
    ``changelog.Debian.gz``) is text; ``x.tar.gz`` and other archives are not supported."""
    suffix = suffix_of(name)
    compression = COMPRESSIONS.get(suffix)
    if compression is None:
        return _by_suffix(suffix)
    inner = inner_name(name)
    inner_suffix = suffix_of(inner)
    if inner_suffix == ".tar":  # a compressed tar is a container: its reader unpacks the stream itself
        return FORMATS[".tar"]
    if inner_suffix in _ARCHIVE_SUFFIXES or inner_suffix in _PAGE_SUFFIXES or not inner.strip("."):
        return None
    known = _by_suffix(inner_suffix) or _by_suffix(".txt", by_content=True)
    return replace(known, compression=compression) if known else None


def _by_suffix(suffix: str, *, by_content: bool = False) -> Format | None:
    known = FORMATS.get(suffix)
    if known is not None:
        return replace(known, by_content=True) if by_content else known
    named_binary = suffix in _BINARY_SUFFIXES or suffix in _ARCHIVE_SUFFIXES
    return MAN_PAGE if _MAN_SECTION.fullmatch(suffix) and not named_binary else None


def page_description(name: str) -> str | None:
    """Why a file named like PostScript, DVI or PCL (``x.ps``, ``manual.ps.gz``) is not read; else ``None``."""
    suffix = suffix_of(name)
    if suffix in COMPRESSIONS:
        suffix = suffix_of(inner_name(name))
    kind = _PAGE_SUFFIXES.get(suffix)
    return _PAGE_DESCRIPTIONS[kind] if kind else None


def page_description_content(head: bytes) -> str | None:
    """Why a file whose first bytes are PostScript, DVI or PCL is not read; else ``None``."""
    start = head.lstrip(b"\x04\r\n\t ")  # a PostScript print job may begin with a ^D
    first_line = start.split(b"\n", 1)[0][:128]
    for magic, kind in _PAGE_MAGIC:
        if start.startswith(magic) or (kind == "PostScript" and start.startswith(b"%!") and b"PS-Adobe" in first_line):
            return _PAGE_DESCRIPTIONS[kind]
    return None


def unsupported_reason(name: str) -> str:
    """What a skipped file of a type Quire does not read says, judged by its name alone."""
    return page_description(name) or f"unsupported file type {PurePath(name).suffix.lower() or '(no extension)'}"


def inner_name(name: str) -> str:
    """The name of the file inside a compressed one: ``notes.md.gz`` → ``notes.md``."""
    return PurePath(name).stem


def judged_by_content(name: str) -> bool:
    """Whether ``name`` says nothing Quire knows about its type, so the file's first bytes decide: no suffix,
    or one that is neither a format Quire reads nor a binary type (``GPL-3``, ``LGPL-2.1``, ``notes.2024``).
    A compressed file is judged by its inner name (``format_for``), never by content."""
    # a bare ".gz" or ".7z" has no suffix to Python (a dotfile) but says its type all the same
    named = {suffix_of(name), PurePath(name).name.lower()}
    refused = _BINARY_SUFFIXES | _ARCHIVE_SUFFIXES | _PAGE_SUFFIXES.keys()
    return format_for(name) is None and not named & refused and bool(name.strip("."))


def is_container(name: str) -> bool:
    """Whether ``name`` is an archive or mailbox whose files become child items."""
    fmt = format_for(name)
    return fmt is not None and fmt.parser == "container"


def is_supported(path: PurePath) -> bool:
    """Whether Quire may read a file with ``path``'s name: a known suffix (or inner suffix for a compressed
    file), or a name whose content decides (:func:`judged_by_content`). Nothing on disk is touched."""
    return format_for(path.name) is not None or judged_by_content(path.name)
