"""E-mail headers bounded before the standard library's :mod:`email` parses them.

``policy.default`` parses a structured header (addresses, ``Content-Type`` parameters) in more than linear
time: 8 KB of commas in ``To`` took 1.2 s, 8 KB of semicolons after ``Content-Type: text/plain`` 5 s, and
doubling the size about triples it. So a message is read with :data:`BOUNDED_POLICY`, which keeps at most
:data:`MAX_FIELD_CHARS` of a header's value (:data:`MAX_MIME_FIELD_CHARS` of a ``Content-*`` header, whose
real values are short) in every header of every part, and :func:`check_header_block` refuses a message
whose own header block holds more than :data:`MAX_HEADERS` fields or :data:`MAX_HEADER_BYTES` bytes
(``too_large``). A field's shown value is cut at 2,000 characters anyway (``textutil.clean_value``).
"""

from __future__ import annotations

import re
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import EmailPolicy

from knowledge.sources.model import SourceRejected

MAX_FIELD_CHARS = 2048
MAX_MIME_FIELD_CHARS = 1024
MAX_HEADERS = 1000
MAX_HEADER_BYTES = 256 * 1024
# What the email parser takes for a header line (feedparser's headerRE): a field, a continuation, a From line.
_HEADER_LINE = re.compile(rb"From |[\x21-\x39\x3b-\x7e]*:|[\t ]")


class _BoundedPolicy(EmailPolicy):
    def header_source_parse(self, sourcelines: list[str]) -> tuple[str, str]:
        name, value = super().header_source_parse(sourcelines)
        mime = name.strip().lower().startswith("content-")
        return name, value[: MAX_MIME_FIELD_CHARS if mime else MAX_FIELD_CHARS]


BOUNDED_POLICY = _BoundedPolicy()


def parse_message(data: bytes) -> EmailMessage:
    """The message in ``data``, its headers bounded (module doc); raises ``SourceRejected`` (``too_large``)
    for a header block over the limits. Other failures are the parser's own exceptions."""
    check_header_block(data)
    message = BytesParser(policy=BOUNDED_POLICY).parsebytes(data)
    assert isinstance(message, EmailMessage)  # an EmailPolicy builds EmailMessage
    return message


def check_header_block(data: bytes) -> None:
    """Refuse a message whose header block (the lines the parser reads as headers, from the top) holds more
    than :data:`MAX_HEADERS` fields or :data:`MAX_HEADER_BYTES` bytes."""
    pos = fields = 0
    while pos < len(data):
        newline = data.find(b"\n", pos, pos + MAX_HEADER_BYTES + 1)
        end = min(len(data), pos + MAX_HEADER_BYTES + 1) if newline < 0 else newline + 1
        if not _HEADER_LINE.match(data, pos, end):
            return
        fields += data[pos : pos + 1] not in (b" ", b"\t")
        pos = end
        if pos > MAX_HEADER_BYTES:
            raise SourceRejected("too_large", f"e-mail headers are over {MAX_HEADER_BYTES // 1024} KB")
        if fields > MAX_HEADERS:
            raise SourceRejected("too_large", f"e-mail message has more than {MAX_HEADERS} header fields")
