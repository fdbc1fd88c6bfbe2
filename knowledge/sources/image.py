"""Images (PNG, JPEG, TIFF, WebP, BMP, GIF; HEIC/HEIF through ``pillow-heif``) read with local OCR.

Decoded by Pillow; each page of a multi-page TIFF is a page (one segment per page with text, 1-based, like
a PDF), other formats are one page (an animated GIF's first frame). Outcomes:

* the data does not decode as an image → ``parse_error`` (a fixed reason);
* more pixels than Pillow's decompression-bomb limit → ``too_large``;
* OCR finds no text → ``no_text``, saying how many pages were looked at.

Everything stored is in the census (``image``): page count, pixel size of the first page, and the OCR
language and pages (``ocr``, ``ocr_pages``), by which chunks are marked as OCR'd text.
"""

from __future__ import annotations

import io
import logging
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

from knowledge.sources import ocr
from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, SourceRejected, failing_as
from knowledge.sources.textutil import Block, document, join_blocks

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger(__name__)

MAX_PAGES = 200  # a multi-page TIFF beyond this is read up to here (logged); time limits bound the rest
_heif_registered = False


def parse_image(data: bytes, fmt: Format, *, ocr_language: str = ocr.DEFAULT_LANGUAGE) -> ParsedDocument:
    from PIL import Image as PilImage

    _register_heif()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PilImage.DecompressionBombWarning)
            image = PilImage.open(io.BytesIO(data))
            image.load()
    except (PilImage.DecompressionBombError, PilImage.DecompressionBombWarning) as exc:
        raise SourceRejected("too_large", "image has too many pixels to read safely") from exc
    except Exception as exc:
        log.info("image could not be decoded", exc_info=True)
        raise SourceRejected("parse_error", "image could not be decoded (damaged or not an image)") from exc
    width, height = image.size
    pages: list[str] = []
    with failing_as("image could not be read by OCR"):
        for frame in _pages(image):
            pages.append(ocr.recognize(frame, ocr_language))
    text, segments = join_blocks(Block(page, index + 1) for index, page in enumerate(pages))
    if not text:
        found = f"the image has {len(pages)} pages" if len(pages) > 1 else "the image"
        raise SourceRejected("no_text", f"no text found: OCR found nothing in {found}")
    metadata = blank_metadata("image")
    metadata.update(
        page_count=len(pages),
        width=width,
        height=height,
        ocr=ocr_language,
        ocr_pages=page_ranges(i + 1 for i, page in enumerate(pages) if page),
    )
    return document("image", text, segments, metadata, fmt.mime)


def _pages(image: Image) -> Iterator[Image]:
    count = getattr(image, "n_frames", 1) if image.format in ("TIFF", "MPO") else 1
    if count > MAX_PAGES:
        log.info("image has %d pages; reading the first %d", count, MAX_PAGES)
    for index in range(min(count, MAX_PAGES)):
        if index:
            image.seek(index)
        yield image.copy()


def _register_heif() -> None:
    global _heif_registered
    if not _heif_registered:
        try:
            from pillow_heif import register_heif_opener

            register_heif_opener()
        except ImportError:  # without the decoder a HEIC file is a parse_error, not a crash
            log.info("pillow-heif is not installed: HEIC images cannot be decoded")
        _heif_registered = True


def page_ranges(pages: Iterator[int] | list[int]) -> str | None:
    """``1-3,7`` for pages 1, 2, 3 and 7 (a compact, stored form); None for no pages."""
    ordered = sorted(set(pages))
    if not ordered:
        return None
    runs: list[str] = []
    start = previous = ordered[0]
    for page in [*ordered[1:], None]:
        if page is not None and page == previous + 1:
            previous = page
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if page is not None:
            start = previous = page
    return ",".join(runs)
