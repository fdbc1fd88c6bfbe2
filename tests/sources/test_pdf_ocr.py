"""Scanned PDF pages: the resolution chosen per page from its text height, and pages read in parallel within the
address-space limit."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from knowledge.sources import ocr, pdf_ocr
from knowledge.sources.pdf_ocr import MAX_DPI, MIN_DPI, TARGET_LINE_PX, choose_dpi, line_height
from tests.conftest import REPO

from .builders import noise_image, printed_page, render_page, scanned_pdf

_WORDS = ["the", "harbour", "survey", "found", "silt", "near", "the", "northern", "quay", "and", "the"]
_WORDS += ["dredger", "will", "return", "in", "spring"]


def test_choose_dpi_gives_text_lines_their_pixels_between_150_and_300() -> None:
    assert choose_dpi(None) == MAX_DPI and choose_dpi(0.0) == MAX_DPI  # unmeasured: as every page was read
    assert choose_dpi(18.0) == 150  # large print: half the resolution, a quarter of the pixels
    assert choose_dpi(9.0) == 175 and choose_dpi(7.0) == 225  # body text, small print: more pixels
    assert choose_dpi(2.0) == MAX_DPI  # tiny print: never past 300
    heights = [h / 2 for h in range(1, 81)]
    chosen = [choose_dpi(h) for h in heights]
    assert chosen == sorted(chosen, reverse=True)  # larger print never gets more pixels
    assert all(MIN_DPI <= dpi <= MAX_DPI and dpi % 25 == 0 for dpi in chosen)
    assert all(h * dpi / 72 >= TARGET_LINE_PX for h, dpi in zip(heights, chosen, strict=True) if dpi < MAX_DPI)


def _probe(image: Any, dpi: int) -> float | None:
    """The page as a PDF scanned at ``dpi``, rendered by pdfium at the probe's resolution and measured."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(scanned_pdf([image]) if dpi == 150 else _pdf(image, dpi))
    try:
        probe = document[0].render(scale=pdf_ocr.PROBE_DPI / 72, grayscale=True).to_pil()
        return line_height(probe, pdf_ocr.PROBE_DPI)
    finally:
        document.close()


def _pdf(image: Any, dpi: int) -> bytes:
    import io

    out = io.BytesIO()
    image.save(out, format="PDF", resolution=dpi)
    return out.getvalue()


def test_line_height_measures_the_print_and_refuses_what_has_no_lines() -> None:
    from PIL import Image

    large = _probe(render_page([f"line {n} of large print for the harbour" for n in range(20)]), 150)  # 19 pt
    small, _words = printed_page(_WORDS, 9.0, 300)
    body = _probe(small, 300)
    assert large is not None and 14.0 <= large <= 20.0
    assert body is not None and 7.0 <= body <= 10.0
    assert choose_dpi(large) == MIN_DPI and choose_dpi(body) > MIN_DPI
    assert _probe(noise_image(3), 150) is None  # a photograph: no contrast between paper and ink
    assert _probe(Image.new("L", (1240, 1754), 255), 150) is None  # a blank page


def test_pages_are_read_in_parallel_with_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    if pdf_ocr.ocr_workers(4) < 2:
        pytest.skip("one core here: pages are read one after the other")
    data = scanned_pdf([[f"page {n} tells of the {word} harbour"] for n, word in enumerate(_WORDS[:4])])
    serial = pdf_ocr.ocr_pages(data, [0, 1, 2, 3], "eng", pdf_ocr.OcrPlan(workers=1))
    real, lock = ocr.recognize, threading.Lock()
    threads: set[str] = set()
    running, most = [0], [0]

    def watched(*args: Any) -> str:
        with lock:
            threads.add(threading.current_thread().name)
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return real(*args)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(ocr, "recognize", watched)
    parallel = pdf_ocr.ocr_pages(data, [0, 1, 2, 3], "eng", pdf_ocr.OcrPlan(workers=2))
    assert parallel == serial and sorted(parallel) == [0, 1, 2, 3]
    assert all(f"tells of the {word} harbour" in parallel[n] for n, word in enumerate(_WORDS[:4]))
    assert most[0] == 2 and len(threads) == 2  # two readers at once, never more
    assert threading.main_thread().name not in threads  # the calling thread only renders (pdfium)


def test_ocr_workers_fit_the_address_space_limit() -> None:
    """In a process under RLIMIT_AS (as the parse process runs), a worker is given only where its memory fits."""
    script = (
        "import resource, psutil\n"
        "from knowledge.sources.pdf_ocr import ocr_workers, _PER_WORKER_BYTES as each\n"
        "free = ocr_workers(8)\n"
        "used = psutil.Process().memory_info().vms\n"
        "resource.setrlimit(resource.RLIMIT_AS, (used + each + each // 2, resource.RLIM_INFINITY))\n"
        "print(free, ocr_workers(8), ocr_workers(1))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    free, limited, one_page = (int(n) for n in out.stdout.split())
    if free < 2:
        pytest.skip("one core here: one worker with or without the limit")
    assert free == pdf_ocr.ocr_workers(8)
    assert (limited, one_page) == (1, 1)
