"""Fixture builders: real documents made in-process, so the tests need no checked-in binaries.

The PDF is written by hand (catalog, page tree, Helvetica font, one content stream per page, a correct
cross-reference table) to know exactly what each page holds; pypdf is only used to encrypt a copy.
"""

from __future__ import annotations

import datetime as dt
import io
import tarfile
import zipfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

import docx
from ebooklib import epub
from pypdf import PdfReader, PdfWriter

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

PNG_BYTES = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4"
    b"\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
)


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def _content_stream(lines: list[str]) -> bytes:
    ops = ["BT", "/F1 12 Tf", "72 720 Td", "14 TL"]
    ops += [f"{_pdf_string(line)} Tj T*" for line in lines]
    ops.append("ET")
    return "\n".join(ops).encode("latin-1")


def make_pdf(pages: Sequence[list[str] | bytes], info: dict[str, str] | None = None, *, flate_bomb: int = 0) -> bytes:
    """A valid PDF with one Helvetica text line per entry of each page (an empty list: a blank page; bytes:
    the page's content stream as given). ``flate_bomb`` > 0 makes the first page's content a FlateDecode
    stream of that many spaces."""
    page_ids = [4 + 2 * index for index in range(len(pages))]
    kids = " ".join(f"{page_id} 0 R" for page_id in page_ids)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for page_id, lines in zip(page_ids, pages, strict=True):
        content = lines if isinstance(lines, bytes) else _content_stream(lines)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {page_id + 1} 0 R >>".encode()
        )
        if flate_bomb and page_id == page_ids[0]:
            import zlib

            packed = zlib.compress(b" " * flate_bomb, 9)
            objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream")
            continue
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    trailer_info = ""
    if info:
        objects.append(("<< " + " ".join(f"/{k} {_pdf_string(v)}" for k, v in info.items()) + " >>").encode("latin-1"))
        trailer_info = f" /Info {len(objects)} 0 R"
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref_at = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{trailer_info} >>\n".encode()
    out += f"startxref\n{xref_at}\n%%EOF\n".encode()
    return bytes(out)


def ruled_table(header: list[str], rows: list[list[str]], *, above: Sequence[str] = ()) -> bytes:
    """A page's content stream: ``above`` as text lines, then a table whose every cell is ruled (stroked
    horizontal and vertical lines, as a word processor draws a grid), one Helvetica value per cell."""
    width, height, left, top = 130, 20, 72, 600
    xs = [left + width * column for column in range(len(header) + 1)]
    ys = [top - height * row for row in range(len(rows) + 2)]
    ops = [f"{xs[0]} {y} m {xs[-1]} {y} l S" for y in ys] + [f"{x} {ys[0]} m {x} {ys[-1]} l S" for x in xs]
    ops += ["BT", "/F1 12 Tf", "72 720 Td", "14 TL", *(f"{_pdf_string(line)} Tj T*" for line in above), "ET"]
    ops += ["BT", "/F1 10 Tf"]
    for row, values in enumerate([header, *rows]):
        ops += [f"1 0 0 1 {xs[c] + 4} {ys[row] - 14} Tm {_pdf_string(v)} Tj" for c, v in enumerate(values)]
    ops.append("ET")
    return "\n".join(ops).encode("latin-1")


def encrypt_pdf(data: bytes, password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=password, owner_password="owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def make_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Quarterly Report", level=1)
    document.add_paragraph("Revenue grew in every region.")
    table = document.add_table(rows=2, cols=3)
    for col, value in enumerate(["Region", "Q1", "Q2"]):
        table.cell(0, col).text = value
    table.cell(1, 0).text = "North"
    merged = table.cell(1, 1).merge(table.cell(1, 2))
    merged.text = "steady"
    document.add_paragraph("")
    document.add_paragraph("Closing remarks after the table.")
    props = document.core_properties
    props.title = "Quarterly Report"
    props.author = "Ada Lovelace"
    props.subject = "Finance"
    props.keywords = "revenue, regions"
    props.category = "Reports"
    props.comments = "Internal summary"
    props.language = "en-GB"
    props.identifier = "urn:quire:report:1"
    props.last_modified_by = "ada"
    props.content_status = "Draft"
    props.revision = 3
    props.created = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    props.modified = dt.datetime(2024, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def make_epub() -> bytes:
    book = epub.EpubBook()
    book.set_identifier("urn:isbn:9780000000001")
    book.set_title("A Tale of Two Chapters")
    book.set_language("en")
    book.add_author("Jane Doe")
    book.add_author("John Roe")
    book.add_metadata("DC", "publisher", "Quire Press")
    book.add_metadata("DC", "date", "2020-05-01")
    book.add_metadata("DC", "description", "<p>Two <b>short</b> chapters.</p>")
    book.add_metadata("DC", "rights", "All rights reserved")
    chapters = []
    for number, body in ((1, "It was the best of times."), (2, "It was the worst of times.")):
        chapter = epub.EpubHtml(title=f"Chapter {number}", file_name=f"c{number}.xhtml", lang="en")
        chapter.content = f"<h1>Chapter {number}</h1><p>{body}</p><script>var x = 1;</script>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    buffer = io.BytesIO()
    epub.write_epub(buffer, book)
    return buffer.getvalue()


# -- images of text, for OCR (issue 12) ---------------------------------------------------------
# Rendered with Pillow's bundled font (no system fonts needed), black on white, at the size of a page
# scanned at 150 dpi.


def render_page(lines: list[str], size: tuple[int, int] | None = None) -> PILImage:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", size or (1240, max(1754, 300 + 70 * len(lines))), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=40)
    for row, line in enumerate(lines):
        draw.text((100, 150 + row * 70), line, fill=0, font=font)
    return image


def printed_page(words: Sequence[str], points: float, dpi: int = 300, seed: int = 0) -> tuple[PILImage, str]:
    """An A4 page of ``points``-pt prose (random ``words``, lines 1.35 apart) as scanned at ``dpi``: the
    picture and the words on it."""
    import random

    from PIL import Image, ImageDraw, ImageFont

    rnd = random.Random(seed)
    size = round(points * dpi / 72)
    image = Image.new("L", (round(8.27 * dpi), round(11.69 * dpi)), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=size)
    lines, y = [], round(0.8 * dpi)
    while y + size < image.height - 0.8 * dpi:
        line: list[str] = []
        while draw.textlength(" ".join([*line, "harbour"]), font=font) < 6.6 * dpi:
            line.append(rnd.choice(words))
        draw.text((round(0.8 * dpi), y), " ".join(line), fill=0, font=font)
        lines.append(" ".join(line))
        y += round(size * 1.35)
    return image, " ".join(lines)


def image_bytes(lines: list[str], fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    render_page(lines, (1400, 300 + 70 * len(lines))).save(out, format=fmt)
    return out.getvalue()


def scanned_pdf(pages: list[list[str] | PILImage]) -> bytes:
    """An image-only PDF (no text layer): each page a picture, of text lines or as given."""
    images = [p if not isinstance(p, list) else render_page(p) for p in pages]
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=150)
    return out.getvalue()


def noise_image(seed: int = 0, size: tuple[int, int] = (900, 1200)) -> PILImage:
    """A grey photo-like picture with no legible text."""
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, size=(size[1], size[0]), dtype=np.uint8)
    return Image.fromarray(pixels)


def zip_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def tar_of(files: dict[str, bytes], mode: str = "w") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tf:  # type: ignore[call-overload]
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
