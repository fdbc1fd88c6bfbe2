"""A base's OCR language: which Tesseract trained data reads its scans and images.

Refused with a clear message when the language's trained data is not installed, so a typo never turns
into every scan of the base failing later. Changing it does not re-read anything by itself: reindex the
items (``quire reindex``) to read them again in the new language.
"""

from __future__ import annotations

from knowledge.errors import InvalidInput
from knowledge.library.bases import Base, assert_base_writable, load_base, resolve_base, store_ocr_language
from knowledge.principal import require_person
from knowledge.sources.ocr import installed_languages, language_refusal
from knowledge.store.database import Database

__all__ = ["installed_languages", "set_ocr_language"]


def set_ocr_language(db: Database, base_ref: str | int, language: str) -> Base:
    require_person("change a knowledge base's OCR language")
    language = language.strip()
    if refusal := language_refusal(language):  # outside the transaction: it asks the engine what is installed
        raise InvalidInput(refusal)
    with db.write() as conn:
        base = resolve_base(conn, base_ref)
        assert_base_writable(base, "change its OCR language")
        store_ocr_language(conn, base.id, language)
        return load_base(conn, base.id)
