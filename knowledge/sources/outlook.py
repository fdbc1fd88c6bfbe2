"""An Outlook message (``.msg``: MAPI properties in an OLE compound file) through ``extract-msg``.

Laid out as a saved e-mail is (:func:`knowledge.sources.mail.message_document`): the subject, sender,
recipients and date, then the body — the plain-text body when there is one, else the HTML body converted
by the HTML reader (extract-msg derives either from an RTF-only body). Sender, To, Cc and the date come
from the transport headers when the message has them, else from its properties (a draft or a sent item
has no headers). The same metadata keys as ``.eml``, so ``from:`` and ``after:`` treat both alike.

Hostile input: only bytes that begin with the compound-file signature are handed to the library, as a
file object — never the bytes themselves, which olefile would take for a *file name* when they are short.
Nothing is written to disk: extract-msg's save and its insecure features (``InsecureFeatures``) are not
used. Attached files of a type Quire reads become the message's children (``mail.with_attachments``).
"""

from __future__ import annotations

import io
import logging
from datetime import datetime
from typing import Any

from knowledge.sources.formats import OLE_SIGNATURE, Format
from knowledge.sources.mail import SHOWN_HEADERS, html_to_text, message_document, with_attachments
from knowledge.sources.model import MetadataValue, ParsedDocument, SourceRejected, failing_as
from knowledge.sources.textutil import clean_value

# extract-msg logs every missing optional stream at INFO and an unknown class at CRITICAL; a reader of one
# message needs none of it in the worker's log
logging.getLogger("extract_msg").setLevel(logging.ERROR)


def parse_msg(data: bytes, fmt: Format) -> ParsedDocument:
    if not data.startswith(OLE_SIGNATURE):
        raise SourceRejected("parse_error", "not an Outlook message (no compound-file signature)")
    import extract_msg

    with failing_as("Outlook message could not be read (damaged or not a mail message)"):
        message = extract_msg.openMsg(io.BytesIO(data), filename="message.msg", delayAttachments=True, strict=False)
        try:
            fields = _fields(message)
            body = _body(message)
        finally:
            message.close()
    return with_attachments(message_document("outlook", fields, body, fmt.mime), data, "message.msg")


def _fields(message: Any) -> dict[str, MetadataValue]:
    values = {
        "subject": getattr(message, "subject", None),
        "from": getattr(message, "sender", None),
        "to": getattr(message, "to", None),
        "cc": getattr(message, "cc", None),
    }
    fields: dict[str, MetadataValue] = {key: clean_value(_text(values.get(key))) for _label, key in SHOWN_HEADERS}
    when = getattr(message, "date", None)
    fields["date"] = when.isoformat() if isinstance(when, datetime) else None
    return fields


def _body(message: Any) -> str:
    plain = _text(getattr(message, "body", None))
    if plain and plain.strip():
        return plain.replace("\r\n", "\n")
    html = getattr(message, "htmlBody", None)
    if isinstance(html, bytes) and html.strip():
        return html_to_text(html.decode("utf-8", errors="replace"))
    return ""


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else None
