"""Rich Text Format through striprtf: the document's text with RTF's control words removed.

RTF is 7-bit text whose non-ASCII characters are escapes (``\\'e9``, ``\\u233``) in the code page the
header declares (``\\ansicpg``, Windows-1252 when absent). The file must start with ``{\\rtf``; anything
else is ``parse_error``. RTF has no pages Quire can know, so the whole text is one segment. The
``\\info`` group (title, author, dates) is not read: striprtf drops it (census).
"""

from __future__ import annotations

import codecs
import re

from striprtf.striprtf import rtf_to_text

from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, SourceRejected, failing_as
from knowledge.sources.textutil import Block, document, join_blocks

_CODE_PAGE = re.compile(rb"\\ansicpg(\d{3,5})")


def parse_rtf(data: bytes, fmt: Format) -> ParsedDocument:
    if not data.lstrip()[:5] == b"{\\rtf":
        raise SourceRejected("parse_error", "not an RTF file (no {\\rtf header)")
    encoding = _code_page(data)
    with failing_as("RTF could not be read (unexpected structure)"):
        body: str = rtf_to_text(data.decode("latin-1"), encoding=encoding, errors="replace")  # type: ignore[no-untyped-call]
    text, segments = join_blocks([Block(body)])
    if not text:
        raise SourceRejected("no_text", "document has no text")
    return document("rtf", text, segments, blank_metadata("rtf"), fmt.mime)


def _code_page(data: bytes) -> str:
    match = _CODE_PAGE.search(data[:4096])
    if match:
        name = f"cp{int(match.group(1))}"
        try:
            codecs.lookup(name)
            return name
        except LookupError:
            pass
    return "cp1252"
