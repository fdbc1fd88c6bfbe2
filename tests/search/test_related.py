"""Related documents on a real corpus (tests/support/related_corpus.py: two documents on each of three subjects)
indexed with the real model, on both engines: the local vector index and pgvector on a team store."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.errors import GuardRejected, NotFound
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from knowledge.search import NotIndexed, related
from tests.support.engine_fixtures import ENGINES, engine_quire
from tests.support.files import write_tree
from tests.support.related_corpus import SUBJECT, indexed_related_base

pytestmark = pytest.mark.model
quire = pytest.fixture(engine_quire)


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_related_documents_by_subject_folders_scope_and_unindexed_items(quire: Quire, tmp_path: Path) -> None:
    base, ids = indexed_related_base(quire, tmp_path)
    by_id = {v: k for k, v in ids.items()}

    # every document's nearest is the other one on its subject; the item itself never comes back
    for path, subject in SUBJECT.items():
        found = related(quire, base, ids[path], limit=5)
        names = [by_id[r.item_id] for r in found]
        assert path not in names
        assert SUBJECT[names[0]] == subject, (path, names)
        assert len(names) == 5 and set(names) == set(SUBJECT) - {path}  # documents only: no folder
        assert [r.score for r in found] == sorted((r.score for r in found), reverse=True)

    pottery = related(quire, base, ids["desk/celadon.md"], limit=2)
    first = pottery[0]
    assert (first.name, first.path) == ("crawling.md", "library/shelf/crawling.md")
    assert first.score > pottery[1].score + 0.2
    # why: one passage of each document, as short snippets with their places
    assert first.mine.item_id == ids["desk/celadon.md"] and first.theirs.item_id == ids["shelf/crawling.md"]
    assert "celadon" in first.mine.snippet.casefold() and "crawl" in first.theirs.snippet.casefold()
    assert first.mine.line_start is not None and first.theirs.line_start is not None
    assert 0 < len(first.theirs.snippet) <= 240
    assert first.as_dict()["why"]["related"]["location"]["line_start"] == first.theirs.line_start

    # a folder: its documents together (a pottery and a packaging one), never anything inside it
    desk = related(quire, base, ids["desk"], limit=4)
    assert {by_id[r.item_id] for r in desk[:2]} == {"shelf/crawling.md", "shelf/pyproject.md"}
    assert not {by_id[r.item_id] for r in desk} & {"desk/celadon.md", "desk/wheels.md"}
    assert not related(quire, base, ids[""], limit=5)  # the whole tree: nothing is left outside it

    # narrowed to one folder, as a search's subtree: nothing outside it, whatever is nearer
    in_boat = related(quire, base, ids["desk/celadon.md"], limit=5, subtree=ids["boat"])
    assert {by_id[r.item_id] for r in in_boat} == {"boat/reefing.md", "boat/tides.md"}

    # an item with no passages yet (pending): a clear refusal, not an empty answer
    extra = write_tree(tmp_path / "later", {"glaze-notes.md": "Tenmoku glazes break brown on the rims of tea bowls.\n"})
    added = operations.add_items(quire, base, [operations.PathInput(extra / "glaze-notes.md")])
    pending = added.created[0]
    with pytest.raises(NotIndexed, match="no indexed passages") as refused:
        related(quire, base, pending)
    assert isinstance(refused.value, GuardRejected) and refused.value.code == "not_indexed"
    with pytest.raises(NotFound):
        related(quire, base, 999_999)
