"""OCR of the PDF pages that have no text layer: each rendered by pdfium at a resolution chosen for it, the
pages of one document read by Tesseract in parallel.

**Resolution per page.** A page is first rendered at ``PROBE_DPI`` (1 pixel a point; ~20-35 ms) and the height
of its text lines is measured there (:func:`line_height`: the ink rows' runs, in vertical strips so that
columns whose lines do not line up are measured apart; runs taller than an inch are pictures, not lines).
:func:`choose_dpi` then gives the lines
``TARGET_LINE_PX`` pixels at the least, between ``MIN_DPI`` and ``MAX_DPI``: large print is read at 150 dpi,
about twice as fast as at 300 (Tesseract's time follows the pixels) at the same word accuracy, and small print
gets more pixels. A page whose lines cannot be measured (a photograph, too little contrast, fewer than three
lines) is read at ``MAX_DPI``, as every page was before. The long side never exceeds ``ocr.MAX_SIDE``.

**Pages in parallel.** pdfium is not thread-safe, so this thread renders the pages one after the other, and
up to :func:`ocr_workers` threads recognise them (tesserocr releases the GIL while Tesseract reads, and
``ocr.py`` keeps one engine per thread; the pool lives as long as the process, so a thread's engine is made
once, not once per document). A page is rendered while the others are read and handed over when a reader is
free, so memory holds ``workers + 1`` page images whatever the page count. The worker count is the cores
this process may run on, the pages to read, and what the address-space limit the parse process runs under
leaves room for (``_PER_WORKER_BYTES`` each): parsing's time and memory limits still hold for all of OCR.

A page pdfium cannot render is left out (logged), so one bad page never loses the rest.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from knowledge.sources import ocr

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger(__name__)

PROBE_DPI = 72
MIN_DPI = 150
MAX_DPI = 300
TARGET_LINE_PX = 20  # a text line's ink height (ascender to descender) Tesseract reads as well as at 300 dpi
_DPI_STEP = 25
_PROBE_MAX_SIDE = 2000  # pixels: a poster-sized page is probed at less than a point a pixel
_PROBE_STRIPS = 4
_MIN_LINES = 3
_MIN_RUN_PX = 2  # shorter ink runs are specks or rules, not text lines
_MAX_LINE_INCHES = 1.0  # taller ink runs are pictures (or lines run together), not text lines
_MIN_CONTRAST = 60  # grey levels between paper and ink below which a page is not measured
_PER_WORKER_BYTES = 256 * 1024 * 1024  # a page image, Tesseract's working memory on it, its thread's arena
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


@dataclass(frozen=True)
class OcrPlan:
    """How to read a document's pages: ``dpi`` None chooses per page; ``workers`` None uses :func:`ocr_workers`."""

    dpi: int | None = None
    workers: int | None = None


ADAPTIVE = OcrPlan()
FIXED_300_SERIAL = OcrPlan(dpi=MAX_DPI, workers=1)  # how every scanned page was read before (benchmarks)


def choose_dpi(line_height_pt: float | None) -> int:
    """The resolution to read a page whose text lines are ``line_height_pt`` points high (None: unmeasured)."""
    if line_height_pt is None or line_height_pt <= 0:
        return MAX_DPI
    wanted = 72 * TARGET_LINE_PX / line_height_pt
    return int(min(MAX_DPI, max(MIN_DPI, math.ceil(wanted / _DPI_STEP) * _DPI_STEP)))


def line_height(image: Image, dpi: float) -> float | None:
    """The median height, in points, of the text lines in a greyscale page ``image`` rendered at ``dpi``;
    None when the page shows no measurable lines."""
    import numpy as np

    pixels = np.asarray(image.convert("L"), dtype=np.uint8)
    if pixels.size == 0:
        return None
    paper, ink = float(np.median(pixels)), float(np.percentile(pixels, 0.5))
    if paper - ink < _MIN_CONTRAST:
        return None
    dark = pixels < (paper + ink) / 2
    width = dark.shape[1]
    heights: list[int] = []
    for strip in range(_PROBE_STRIPS):
        rows = dark[:, strip * width // _PROBE_STRIPS : (strip + 1) * width // _PROBE_STRIPS].any(axis=1)
        edges = np.flatnonzero(np.diff(np.concatenate(([0], rows.astype(np.int8), [0]))))
        runs = edges[1::2] - edges[::2]
        heights.extend(int(run) for run in runs if _MIN_RUN_PX <= run <= dpi * _MAX_LINE_INCHES)
    if len(heights) < _MIN_LINES:
        return None
    return float(np.median(heights)) * 72 / dpi


def ocr_workers(pages: int) -> int:
    """Threads to read ``pages`` pages with: the usable cores, within the address-space limit's room."""
    return max(1, min(_cores(), pages, _memory_room() // _PER_WORKER_BYTES))


def _memory_room() -> int:
    try:
        import resource

        limit, _hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return 1 << 62
    if limit == resource.RLIM_INFINITY:
        return 1 << 62
    import psutil

    used: int = psutil.Process().memory_info().vms
    return max(0, limit - used)


def ocr_pages(data: bytes, indexes: Sequence[int], language: str, plan: OcrPlan = ADAPTIVE) -> dict[int, str]:
    """OCR text of the pages at ``indexes`` (0-based); pages whose OCR finds nothing map to ``""``."""
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except Exception:
        log.info("pdfium cannot open this PDF; its pages without text are not read by OCR", exc_info=True)
        return {}
    try:
        workers = plan.workers or ocr_workers(len(indexes))
        if workers == 1:  # on this thread, whose engine stays warm between documents
            return _serially(document, indexes, language, plan.dpi)
        return _in_parallel(document, indexes, language, plan.dpi, workers)
    finally:
        document.close()


def _serially(document: Any, indexes: Sequence[int], language: str, dpi: int | None) -> dict[int, str]:
    found: dict[int, str] = {}
    for index in indexes:
        image = _render(document, index, dpi)
        if image is not None:
            found[index] = ocr.recognize(image, language)
    return found


def _in_parallel(document: Any, indexes: Sequence[int], language: str, dpi: int | None, workers: int) -> dict[int, str]:
    pool = _shared_pool()
    found: dict[int, str] = {}
    reading: dict[Future[str], int] = {}
    try:
        for index in indexes:
            image = _render(document, index, dpi)  # this thread only: pdfium is not thread-safe
            if image is None:
                continue
            if len(reading) >= workers:  # rendered ahead; handed over when a reader is free
                _collect(reading, found, FIRST_COMPLETED)
            reading[pool.submit(ocr.recognize, image, language)] = index
        _collect(reading, found, ALL_COMPLETED)
    finally:
        for future in reading:
            future.cancel()
    return found


def _collect(reading: dict[Future[str], int], found: dict[int, str], until: str) -> None:
    done, _pending = wait(reading, return_when=until)
    for future in done:
        found[reading.pop(future)] = future.result()  # an engine's failure fails the parse, as on one thread


def _shared_pool() -> ThreadPoolExecutor:
    """One pool for the process, as many threads as cores at most; a document keeps at most its
    :func:`ocr_workers` pages in it at once, so only that many threads (and engines) are ever made for it."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_cores(), thread_name_prefix="quire-ocr")
        return _pool


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _render(document: Any, index: int, dpi: int | None) -> Image | None:
    try:
        page = document[index]
        width, height = page.get_size()
        longest = max(width, height, 1)
        if dpi is None:
            probe_scale = min(PROBE_DPI / 72, _PROBE_MAX_SIDE / longest)
            probe = page.render(scale=probe_scale, grayscale=True).to_pil()
            dpi = choose_dpi(line_height(probe, probe_scale * 72))
        scale = min(dpi / 72, ocr.MAX_SIDE / longest)
        image: Image = page.render(scale=scale, grayscale=True).to_pil()
        return image
    except Exception:
        log.info("PDF page %d could not be rendered for OCR", index + 1, exc_info=True)
        return None
