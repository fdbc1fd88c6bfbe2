"""Issue 12 end to end, with the real model and an in-process worker: skipped is not failed, scans and
images are read by OCR and found by keyword search on the right page, "no text" is said out loud, and
``reindex --failed`` re-runs exactly the failed items."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from sqlalchemy import text

from knowledge.lifecycle import operations, reindex_failed
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import quire_cli
from tests.knowledge.helpers import drain, make_base
from tests.sources.builders import image_bytes, make_pdf, noise_image, scanned_pdf
from tests.support.files import write_tree


def by_path(quire: Quire) -> dict[str, operations.tree.Item]:
    return {i.relative_path or i.name: i for i in operations.list_items(quire, "kb", flat=True)}


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("inside.txt", "packed words")
    return out.getvalue()


def _png(image: object) -> bytes:
    from PIL.Image import Image

    assert isinstance(image, Image)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_a_real_folder_completes_with_the_right_files_skipped_and_a_corrupt_pdf_fails(
    quire: Quire, tmp_path: Path
) -> None:
    make_base(quire)
    good_pdf = make_pdf([["rivers run north"]])
    folder = write_tree(
        tmp_path / "notes",
        {
            "a.txt": "alpha notes about herons",
            "b.md": "# Beta\n\nmore notes",
            "receipt.png": image_bytes(["Receipt from the marmalade shop"]),
            "holiday.jpg": b"",  # replaced below by a photo with no text
            "bundle.7z": _zip(),
            "empty.txt": "",
            ".quireignore": "secret.txt\nbuild/\n",
            "secret.txt": "not to be read",
            "build/out.txt": "generated",
            "sub/c.txt": "gamma",
        },
    )
    out = io.BytesIO()
    noise_image(7).convert("RGB").save(out, format="JPEG")
    (folder / "holiday.jpg").write_bytes(out.getvalue())
    broken = write_tree(tmp_path / "broken", {"ok.txt": "fine", "corrupt.pdf": good_pdf[: len(good_pdf) // 2]})

    operations.add_items(quire, "kb", [PathInput(folder), PathInput(broken)])
    drain(quire)

    items = by_path(quire)
    assert (items["notes"].status, items["notes"].error_code) == ("completed", None)  # skipped never fails it
    expected = {
        "a.txt": ("completed", None),
        "b.md": ("completed", None),
        "sub/c.txt": ("completed", None),
        "receipt.png": ("completed", None),  # read by OCR
        "holiday.jpg": ("skipped", "no_text"),
        "bundle.7z": ("skipped", "unsupported_type"),
        "empty.txt": ("skipped", "empty"),
        "secret.txt": ("skipped", "excluded"),
    }
    assert {p: (items[p].status, items[p].error_code) for p in expected} == expected
    assert items["secret.txt"].error_message == "excluded by .quireignore"
    assert items["holiday.jpg"].error_message == "no text found: OCR found nothing in the image"
    assert items["bundle.7z"].error_message == "unsupported file type .7z"
    assert "build" not in items and "build/out.txt" not in items  # an ignored folder is not walked
    assert items["receipt.png"].metadata["ocr"] == "eng" and items["receipt.png"].chunk_count >= 1

    assert (items["broken"].status, items["broken"].error_code) == ("failed", "children_failed")
    assert (items["corrupt.pdf"].status, items["corrupt.pdf"].error_code) == ("failed", "parse_error")
    assert items["ok.txt"].status == "completed"

    skipped = operations.list_items(quire, "kb", status="skipped", flat=True)
    assert sorted(i.name for i in skipped) == ["bundle.7z", "empty.txt", "holiday.jpg", "secret.txt"]


_WORDS = [
    "river",
    "meadow",
    "orchard",
    "harbour",
    "lantern",
    "quarry",
    "valley",
    "saddle",
    "copper",
    "willow",
    "market",
    "timber",
    "ledger",
    "bridge",
    "chapel",
    "garden",
    "kettle",
    "mirror",
    "parcel",
    "signal",
    "ticket",
    "window",
    "basket",
    "candle",
]


def _prose(seed: int) -> list[str]:
    """A page of plain lines (~300 tokens): long enough that page 2's last line is in a chunk of its own."""
    return [" ".join(_WORDS[(seed * 7 + row * 3 + k) % len(_WORDS)] for k in range(7)) for row in range(22)]


def test_scanned_pdf_and_png_are_found_by_keyword_on_the_right_page_marked_ocr(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = write_tree(
        tmp_path / "scans",
        {
            "letter.pdf": scanned_pdf([_prose(0), [*_prose(1), "The second page ends with xylophonist"]]),
            "note.png": image_bytes(["Whiteboard photo mentions quetzalcoatlus"]),
        },
    )
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    items = by_path(quire)
    assert items["scans"].status == "completed"
    letter = items["letter.pdf"]
    assert letter.status == "completed"
    assert (letter.metadata["page_count"], letter.metadata["ocr"], letter.metadata["ocr_pages"]) == (2, "eng", "1-2")

    hits = search(quire, "kb", "xylophonist", mode="keyword")
    assert hits and hits[0].item_name == "letter.pdf"
    assert hits[0].page == 2 and hits[0].ocr and hits[0].as_dict()["ocr"] is True

    hits = search(quire, "kb", "quetzalcoatlus", mode="keyword")
    assert hits and hits[0].item_name == "note.png" and hits[0].ocr and hits[0].page == 1

    chunks = operations.list_item_chunks(quire, "kb", letter.id)
    assert chunks and all(c["ocr"] for c in chunks)
    assert any("xylophonist" in c["text"] and c["page"] == 2 for c in chunks)


def test_text_layer_chunks_are_not_marked_ocr(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = write_tree(tmp_path / "typed", {"typed.pdf": make_pdf([["ordinary typed pangolin text"]])})
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    hits = search(quire, "kb", "pangolin", mode="keyword")
    assert hits and not hits[0].ocr
    assert by_path(quire)["typed.pdf"].metadata["ocr"] is None


def test_image_only_pdf_without_legible_text_is_skipped_no_text_never_completed(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = write_tree(tmp_path / "photos", {"album.pdf": scanned_pdf([noise_image(1), noise_image(2)])})
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    items = by_path(quire)
    album = items["album.pdf"]
    assert (album.status, album.error_code, album.chunk_count) == ("skipped", "no_text", 0)
    assert album.error_message == (
        "no text found: the PDF has 2 pages without a text layer (images) and OCR found nothing"
    )
    assert items["photos"].status == "completed"


def _generations(quire: Quire) -> dict[str, int]:
    with quire.db.read() as conn:
        rows = conn.execute(text("SELECT coalesce(relative_path, name), generation FROM items")).all()
    return {r[0]: r[1] for r in rows}


def test_reindex_failed_reruns_exactly_the_failed_items(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    make_base(quire)
    good_pdf = make_pdf([["the repaired report on otters"]])
    folder = write_tree(
        tmp_path / "mixed",
        {
            "ok.txt": "fine words",
            "report.pdf": good_pdf[: len(good_pdf) // 2],  # corrupt: failed
            "other/bad.pdf": b"%PDF-1.4 garbage",  # corrupt: failed
            "bundle.7z": _zip(),  # skipped: never retried by --failed
            "empty.txt": "",  # skipped
        },
    )
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    before = by_path(quire)
    assert {p: before[p].status for p in ("report.pdf", "other/bad.pdf", "bundle.7z", "ok.txt")} == {
        "report.pdf": "failed", "other/bad.pdf": "failed", "bundle.7z": "skipped", "ok.txt": "completed",
    }  # fmt: skip
    generations = _generations(quire)
    (folder / "report.pdf").write_bytes(good_pdf)  # the user fixed one of them

    result = quire_cli("--json", "reindex", "--failed", "kb", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    retried = json.loads(result.stdout)["retried"]
    assert sorted(retried) == sorted([before["report.pdf"].id, before["other/bad.pdf"].id])
    drain(quire)

    after, now = by_path(quire), _generations(quire)
    bumped = sorted(p for p in now if now[p] != generations[p])
    assert bumped == ["other/bad.pdf", "report.pdf"]  # exactly the failed ones were reset and re-run
    assert after["report.pdf"].status == "completed"
    assert after["other/bad.pdf"].status == "failed"
    assert after["bundle.7z"].status == "skipped" and after["empty.txt"].status == "skipped"
    assert after["mixed"].status == "failed"  # bad.pdf is still broken

    # scoped to an item, and nothing failed there → a no-op that says so
    again = quire_cli("--json", "reindex", "--failed", "kb", str(after["ok.txt"].id), data_dir=data_dir)
    assert again.returncode == 0 and json.loads(again.stdout)["retried"] == []
    scoped = reindex_failed(quire, "kb", [after["other"].id])
    assert scoped.item_ids == [after["other/bad.pdf"].id]
    drain(quire)


def test_cli_items_status_skipped_json_carries_page_counts(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    make_base(quire)
    folder = write_tree(
        tmp_path / "cli",
        {"scan.pdf": scanned_pdf([["one page of a scanned zebu memo"]]), "x.7z": _zip(), "a.txt": "words"},
    )
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    listed = quire_cli("--json", "items", "kb", "--status", "skipped", data_dir=data_dir)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["items"]
    assert [(r["name"], r["status"], r["error_code"]) for r in rows] == [("x.7z", "skipped", "unsupported_type")]
    every = json.loads(quire_cli("--json", "items", "kb", data_dir=data_dir).stdout)["items"]
    scan = next(r for r in every if r["name"] == "scan.pdf")
    assert (scan["metadata"]["page_count"], scan["metadata"]["ocr_pages"]) == (1, "1")

    refused = quire_cli("base", "ocr-language", "kb", "klingon", data_dir=data_dir)
    assert refused.returncode == 2 and "'klingon' is not installed" in refused.stderr
    shown = json.loads(quire_cli("--json", "base", "ocr-language", "kb", data_dir=data_dir).stdout)
    assert shown["ocr_language"] == "eng" and "eng" in shown["installed"]
