"""The Office core properties (``docProps/core.xml``) DOCX and PPTX share, read the same way for both.

python-docx and python-pptx expose the same fields under the same names; a malformed value (both
parse dates lazily) is logged and stored as empty rather than failing the document.
"""

from __future__ import annotations

import logging
from datetime import datetime

from knowledge.sources.model import MetadataValue
from knowledge.sources.textutil import clean_value

log = logging.getLogger(__name__)

# metadata key -> core property attribute, for the text fields the census stores.
TEXT_PROPERTIES = {
    "title": "title", "author": "author", "subject": "subject", "keywords": "keywords",
    "category": "category", "description": "comments", "identifier": "identifier", "language": "language",
}  # fmt: skip
DATE_PROPERTIES = {"created": "created", "modified": "modified"}


def core_fields(props: object) -> dict[str, MetadataValue]:
    fields: dict[str, MetadataValue] = {key: clean_value(_read(props, attr)) for key, attr in TEXT_PROPERTIES.items()}
    for key, attr in DATE_PROPERTIES.items():
        value = _read(props, attr)
        fields[key] = value.isoformat() if isinstance(value, datetime) else None
    return fields


def _read(props: object, attr: str) -> object:
    try:
        return getattr(props, attr)
    except Exception:
        log.info("core property %s unreadable; stored as empty", attr, exc_info=True)
        return None
