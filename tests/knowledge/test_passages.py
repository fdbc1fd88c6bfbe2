"""``lifecycle.open_passages``: a document's hits for the viewer, from its own copies, never stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge import lifecycle
from knowledge.errors import GuardRejected, NotFound
from knowledge.lifecycle import NoteInput, PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.knowledge.helpers import drain, make_base
from tests.sources.builders import make_pdf


def _add(quire: Quire, *inputs: PathInput | NoteInput) -> list[int]:
    created = lifecycle.add_items(quire, "kb", list(inputs)).created
    drain(quire)
    return list(created)


def _folder(root: Path) -> Path:
    folder = root / "folder"
    folder.mkdir()
    (folder / "b.txt").write_text("gamma rays\n")
    return folder


def test_a_pdfs_passages_come_with_its_owned_copy_and_its_text_in_reading_order(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    path = tmp_path / "orchard.pdf"
    path.write_bytes(make_pdf([["Apples are pruned in late winter."], ["Plums are pruned in summer."]]))
    (item_id,) = _add(quire, PathInput(path))
    chunks = lifecycle.list_item_chunks(quire, "kb", item_id)
    wanted = [c["chunk_id"] for c in reversed(chunks)] + [10**9]  # out of order, and one that never existed
    document = lifecycle.open_passages(quire, "kb", item_id, wanted)
    assert document.kind == "pdf" and document.name == "orchard.pdf"
    assert (
        document.original is not None
        and document.original != path
        and document.original.read_bytes() == path.read_bytes()
    )
    assert [p.chunk_id for p in document.passages] == [c["chunk_id"] for c in chunks]  # reading order
    assert document.missing == 1
    for passage in document.passages:
        assert document.text[passage.start : passage.end] == passage.text  # offsets index the text given
    assert document.passages[0].location.page == 1


def test_a_text_file_is_line_based_and_a_note_is_its_own_text(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    path = tmp_path / "plan.md"
    path.write_text("# Plan\n\nwater the seedlings daily\n")
    md, note = _add(quire, PathInput(path), NoteInput("buy canes for the beans", title="shopping"))
    hit = search(quire, "kb", "seedlings", mode="keyword")[0]
    document = lifecycle.open_passages(quire, "kb", md, [hit.chunk_id])
    assert document.kind == "lines" and document.original is None
    assert document.passages[0].location.line_start == 1
    note_chunks = lifecycle.list_item_chunks(quire, "kb", note)
    shown = lifecycle.open_passages(quire, "kb", note, [note_chunks[0]["chunk_id"]])
    assert shown.kind == "text" and "buy canes for the beans" in shown.text


def test_deleted_reindexed_and_foreign_hits_open_nothing(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    path = tmp_path / "a.txt"
    path.write_text("alpha particles\n")
    (item_id,) = _add(quire, PathInput(path))
    old = lifecycle.list_item_chunks(quire, "kb", item_id)[0]["chunk_id"]

    path.write_text("beta decay\n")
    lifecycle.reindex_items(quire, "kb", [item_id])
    drain(quire)
    with pytest.raises(NotFound, match="changed since this search"):  # the hit's chunk was rebuilt
        lifecycle.open_passages(quire, "kb", item_id, [old])
    new = lifecycle.list_item_chunks(quire, "kb", item_id)[0]["chunk_id"]
    assert lifecycle.open_passages(quire, "kb", item_id, [new]).text == "beta decay\n"

    with pytest.raises(GuardRejected, match="folder"):  # a folder is no document to show
        lifecycle.open_passages(quire, "kb", _add(quire, PathInput(_folder(tmp_path)))[0], [new])
    make_base(quire, "other")
    with pytest.raises(NotFound):
        lifecycle.open_passages(quire, "other", item_id, [new])
    lifecycle.delete_items(quire, "kb", [item_id])
    with pytest.raises(NotFound, match="deleted"):  # being deleted: refused before the cleanup ran
        lifecycle.open_passages(quire, "kb", item_id, [new])
    drain(quire)
    with pytest.raises(NotFound, match="deleted"):
        lifecycle.open_passages(quire, "kb", item_id, [new])
