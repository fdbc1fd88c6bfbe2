"""Parse throughput of the office, mail, compressed and container readers (``knowledge/sources``), in-process.

Run on purpose: ``python -m tests.benchmarks.bench_formats [ROWS]``; prints JSON (and writes it to
``tests/benchmarks/results/formats.json``). Each format gets one generated file of comparable content
(``ROWS`` rows or paragraphs of short prose), parsed ``REPEAT`` times; the figures are the median
seconds per parse, the file size and the extracted characters per second. Plain text and DOCX of the
same prose are the baselines.
"""

from __future__ import annotations

import gzip
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import docx

from knowledge.sources import parse_bytes
from tests.sources.builders import make_pdf, ruled_table, tar_of, zip_of
from tests.sources.office_builders import (
    make_eml,
    make_msg,
    make_odp,
    make_ods,
    make_odt,
    make_pptx,
    make_rtf,
    make_xlsx,
)

REPEAT = 5
PDF_LINES = 40  # text lines a page
TABLE_ROWS = 25  # ruled rows a page
RESULTS = Path(__file__).parent / "results" / "formats.json"


def _sentence(n: int) -> str:
    return f"Row {n} records the harbour crane that lifted {n * 7} crates of tea and copper wire."


def samples(rows: int) -> dict[str, tuple[str, bytes]]:
    prose = [_sentence(n) for n in range(rows)]
    table = [["Id", "Crates", "Note"]] + [[n, n * 7, _sentence(n)] for n in range(rows)]
    document = docx.Document()
    for line in prose:
        document.add_paragraph(line)
    buffer = io.BytesIO()
    document.save(buffer)
    markdown = ("# Harbour log\n\n" + "\n\n".join(prose) + "\n").encode()
    files = {f"day-{n:03d}.md": "\n\n".join(prose[n * 20 : n * 20 + 20]).encode() for n in range(rows // 20)}
    mbox = b"".join(
        b"From log@example.org Tue Mar  5 10:30:00 2024\n"
        + make_eml(f"Day {n}", plain=body.decode()).replace(b"\r\n", b"\n")
        for n, body in enumerate(files.values())
    )
    return {
        "txt": ("log.txt", "\n".join(prose).encode()),
        "docx": ("log.docx", buffer.getvalue()),
        "csv": ("log.csv", "\n".join(",".join(f'"{c}"' for c in row) for row in table).encode()),
        "xlsx": ("log.xlsx", make_xlsx([("Log", table)])),
        "ods": ("log.ods", make_ods([("Log", table)])),
        "pptx": ("log.pptx", make_pptx([(f"Slide {n}", line, "notes " + line) for n, line in enumerate(prose[::10])])),
        "odp": ("log.odp", make_odp([(f"Slide {n}", line, "notes " + line) for n, line in enumerate(prose[::10])])),
        "odt": ("log.odt", make_odt(prose)),
        "rtf": ("log.rtf", make_rtf(prose)),
        "pdf": ("log.pdf", make_pdf([prose[n : n + PDF_LINES] for n in range(0, rows, PDF_LINES)])),
        "pdf-table": ("table.pdf", make_pdf([_table_page(table, n) for n in range(1, rows + 1, TABLE_ROWS)])),
        "eml": ("log.eml", make_eml("Harbour log", plain="\n\n".join(prose))),
        "eml-html": ("log-html.eml", make_eml("Harbour log", html="".join(f"<p>{p}</p>" for p in prose))),
        "md.gz": ("log.md.gz", gzip.compress(markdown)),
        "msg": ("log.msg", make_msg("Harbour log", plain="\n\n".join(prose))),
        # containers: unpacking and the file list only (each member is then parsed as its own child)
        "zip": ("logs.zip", zip_of(files)),
        "tar.gz": ("logs.tar.gz", gzip.compress(tar_of(files))),
        "mbox": ("logs.mbox", mbox),
    }


def _table_page(table: list[list[object]], first: int) -> bytes:
    """A page holding a ruled table: the header row, then ``TABLE_ROWS`` rows from ``first`` (short cells)."""
    rows = [[str(r[0]), str(r[1]), f"crane {r[0]}"] for r in table[first : first + TABLE_ROWS]]
    return ruled_table([str(c) for c in table[0]], rows)


def _median_seconds(action: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(rows: int = 2000) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for fmt, (name, data) in samples(rows).items():
        parsed = parse_bytes(data, name=name)  # warm: imports the parser's library once
        seconds = _median_seconds(lambda data=data, name=name: parse_bytes(data, name=name))
        results[fmt] = {
            "bytes": len(data),
            "chars": len(parsed.text),
            "seconds": round(seconds, 4),
            "chars_per_second": round(len(parsed.text) / seconds),
        }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows, "repeat": REPEAT, "formats": results}, indent=2) + "\n")
    return results


if __name__ == "__main__":
    print(json.dumps(main(*(int(a) for a in sys.argv[1:])), indent=2))
