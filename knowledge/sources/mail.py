"""A saved e-mail message (``.eml``, RFC 5322) through the standard library's :mod:`email` (``policy.default``,
its headers bounded first: :mod:`knowledge.sources.mail_headers`).

The text is a short header block (``Subject``, ``From``, ``To``, ``Cc``, ``Date`` as the message shows them,
so a search for a sender or a subject word finds the message) followed by the body. The body is the
plain-text part when there is one, else the HTML part converted to text by the HTML reader; a part in an
unknown charset is decoded as UTF-8 with replacement characters rather than losing the message. Two
segments (headers, body), no pages or lines.

Subject, from, to, cc and date are metadata (census). Attached files of a type Quire reads become the
message's children (:func:`with_attachments`), each read like a file.
"""

from __future__ import annotations

from email.message import EmailMessage, MIMEPart
from pathlib import PurePosixPath

from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.mail_headers import parse_message
from knowledge.sources.model import MetadataValue, ParsedDocument, SourceRejected, failing_as
from knowledge.sources.textutil import Block, clean_value, document, join_blocks

_SNIFF_BYTES = 8 * 1024
SHOWN_HEADERS = (("Subject", "subject"), ("From", "from"), ("To", "to"), ("Cc", "cc"), ("Date", "date"))


def parse_eml(data: bytes, fmt: Format) -> ParsedDocument:
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise SourceRejected("binary", "file looks like binary data, not an e-mail message")
    with failing_as("e-mail message could not be read (malformed structure)"):
        message = parse_message(data)  # headers bounded first: the parser is superlinear in them
        fields = _header_fields(message)
        body = _body_text(message)
    return with_attachments(message_document("mail", fields, body, fmt.mime), data, "message.eml")


def with_attachments(doc: ParsedDocument, data: bytes, name: str) -> ParsedDocument:
    """The message with its attached files of a type Quire reads, to become its children (read like files,
    ``knowledge.lifecycle.members``); attachments of other types are left out, as a folder's would be
    skipped, and the ones refused (a name that is no file name, over the size limit) say why."""
    from dataclasses import replace

    from knowledge.sources.archive import MAX_UNPACKED_BYTES
    from knowledge.sources.formats import is_supported
    from knowledge.sources.members import attachments

    found = attachments(data, name, max_bytes=MAX_UNPACKED_BYTES // 10)
    kept = tuple(m for m in found.members if is_supported(PurePosixPath(m.name)))
    return replace(doc, members=kept, refused=tuple(found.refused)) if kept or found.refused else doc


def message_document(parser: str, fields: dict[str, MetadataValue], body: str, mime: str) -> ParsedDocument:
    """A message as the mail readers lay it out: the shown header fields (``subject``, ``from``, ``to``,
    ``cc``, ``date``), then the body; the fields are its metadata."""
    header_block = "\n".join(f"{label}: {fields[key]}" for label, key in SHOWN_HEADERS if fields.get(key))
    text, segments = join_blocks([Block(header_block), Block(body)])
    if not body.strip() and not fields.get("subject"):
        raise SourceRejected("no_text", "message has no subject and no text body")
    metadata = blank_metadata(parser)
    metadata.update(fields)
    return document(parser, text, segments, metadata, mime)


def html_to_text(content: str) -> str:
    """An HTML body as the HTML reader shows it."""
    from knowledge.sources.html_page import make_soup, visible_text

    return visible_text(make_soup(content))


def _header_fields(message: EmailMessage) -> dict[str, MetadataValue]:
    fields: dict[str, MetadataValue] = {}
    for label, key in SHOWN_HEADERS:
        value = _header(message, label)
        fields[key] = clean_value(value)
    date = message.get("Date")
    when = getattr(date, "datetime", None) if date is not None else None
    if when is not None:
        fields["date"] = when.isoformat()
    return fields


def _header(message: EmailMessage, name: str) -> str | None:
    try:
        value = message.get(name)
    except (ValueError, IndexError, TypeError):  # a header the parser cannot make sense of: keep the raw text
        raw = message.get_all(name, failobj=None)
        value = raw[0] if raw else None
    return None if value is None else str(value)


def _body_text(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    content = _content(part)
    if part.get_content_subtype() == "html":
        return html_to_text(content)
    return content


def _content(part: MIMEPart) -> str:
    try:
        content = part.get_content()
    except (LookupError, UnicodeError):  # an unknown or lying charset: keep the text, mark what is lost
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""
