"""How rows read (issue 12): skipped is quiet and counted apart, page counts and OCR in the details
column, OCR'd chunks marked in the chunk viewer and in search results. Pure functions, no window."""

from __future__ import annotations

import dataclasses

from app.chunk_viewer import chunk_label
from app.item_text import STATUS_COLORS, details_text, progress_of, summary_text
from app.search_results import LOCATION, SearchResultsModel
from knowledge.library.ids import BaseId, ItemId
from knowledge.library.tree import Item
from knowledge.search.query import Hit


def _item(**changes: object) -> Item:
    base = Item(
        id=ItemId(1), base_id=BaseId(1), parent_id=None, root_id=None, type="file", name="a.pdf", source_path=None,
        relative_path=None, status="completed", error_code=None, error_message=None, content_sha256=None,
        size=None, mtime=None, blob_sha256=None, text_sha256=None, note_text=None, parser=None,
        parser_version=None, chunker_version=None, model_fingerprint=None, chunk_count=3, metadata={},
        generation=0, job_id=None, run_id=None, owner=None, created_at=0.0, updated_at=0.0,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_summary_counts_skipped_apart_and_a_folder_of_completed_and_skipped_is_done() -> None:
    summary = {"completed": 97, "skipped": 23}
    assert summary_text(summary) == "120 items · 97 indexed · 23 skipped"
    assert summary_text({"completed": 2, "skipped": 1, "failed": 1}) == "4 items · 2 indexed · 1 skipped · 1 failed"
    folder = _item(type="directory", status="processing")
    assert progress_of(folder, summary) == 1.0


def test_skipped_rows_are_grey_with_their_reason_and_failed_ones_red() -> None:
    skipped = _item(status="skipped", error_code="unsupported_type", error_message="unsupported file type .7z")
    assert details_text(skipped, {}) == "unsupported file type .7z"
    assert STATUS_COLORS["skipped"] != STATUS_COLORS["failed"] and STATUS_COLORS["skipped"] == "#9e9e9e"
    assert progress_of(skipped, {}) == 1.0


def test_details_carry_page_counts_and_ocr() -> None:
    scanned = _item(metadata={"page_count": 12, "ocr": "eng", "ocr_pages": "1-12"})
    assert details_text(scanned, {}) == "3 chunks · 12 pages · OCR p.1-12"
    typed = _item(metadata={"page_count": 1, "ocr": None, "ocr_pages": None}, chunk_count=1)
    assert details_text(typed, {}) == "1 chunk · 1 page"


def test_ocr_chunks_are_marked_in_the_viewer_and_in_search_results(qtbot: object) -> None:
    chunk = {"item_name": "scan.pdf", "ordinal": 0, "page": 2, "token_count": 40, "ocr": True}
    assert chunk_label(chunk, False) == "#1 · page 2 · OCR · 40 tokens"
    assert "OCR" not in chunk_label({**chunk, "ocr": False}, False)
    hit = Hit(
        chunk_id=1, item_id=1, item_name="scan.pdf", source_path=None, ordinal=0, text="t", page=2,
        line_start=None, line_end=None, score=1.0, mode="keyword", ocr=True,
    )  # fmt: skip
    model = SearchResultsModel()
    model.set_hits([hit])
    assert model.index(0, LOCATION).data() == "page 2 · OCR"
