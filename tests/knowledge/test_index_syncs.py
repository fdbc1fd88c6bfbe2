"""Gathered syncs of the derived files (``knowledge.library.index_syncs``): inside ``gathered`` a thread's
commits queue their bases' syncs instead of running them, one per base and kind carries every commit's
deletes, and they run at the interval and at the block's end, however it ends; the files then hold exactly
the live rows. A search in the meantime still answers from its snapshot (it catches the files up itself).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import pytest

from knowledge.library import index
from knowledge.library.index_syncs import gathered
from knowledge.library.keyword_file import KeywordFiles
from knowledge.library.vector_file import VectorFiles
from knowledge.runtime import Quire
from tests.knowledge.helpers import make_base
from tests.knowledge.test_keyword_file import TEXTS, held, key_of, live_chunks, ranked, write


def _counting(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], list[set[int]]]:
    """Count the syncs that run (and record the deletes each keyword sync carried)."""
    runs: Counter[str] = Counter()
    carried: list[set[int]] = []
    keyword_sync = KeywordFiles.sync
    vector_sync = VectorFiles.sync

    def keywords(self: KeywordFiles, base_id: int, cleared: Iterable[int] = (), **kw: Any) -> Any:
        runs["keywords"] += 1
        carried.append(set(cleared))
        return keyword_sync(self, base_id, cleared, **kw)

    def vectors(self: VectorFiles, base_id: int, **kw: Any) -> Any:
        runs["vectors"] += 1
        return vector_sync(self, base_id, **kw)

    monkeypatch.setattr(KeywordFiles, "sync", keywords)
    monkeypatch.setattr(VectorFiles, "sync", vectors)
    return runs, carried


def test_commits_inside_a_gathering_sync_once_at_its_end_with_every_delete(
    quire: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(quire)
    write(quire, base.id, TEXTS[:2], name="seed")  # the files exist before the gathering
    assert held(quire, base) == set(live_chunks(quire, base.id))
    runs, carried = _counting(monkeypatch)
    with gathered(quire.db, every=3600.0):
        first = write(quire, base.id, TEXTS[2:5], name="a")  # four commits: two writes, two clears
        second = write(quire, base.id, TEXTS[5:], name="b")
        doomed = {c for c, (item, _t) in live_chunks(quire, base.id).items() if item in (first[0], second[0])}
        with quire.db.write() as conn:
            index.clear_items_material(conn, base.id, [first[0]])
        with quire.db.write() as conn:
            index.clear_items_material(conn, base.id, [second[0]])
        assert runs == Counter()  # nothing ran yet: every commit only queued its base
    assert runs == Counter({"keywords": 1, "vectors": 1})  # one of each, at the end
    assert carried == [doomed]  # the one keyword sync carried both transactions' deletes
    live = set(live_chunks(quire, base.id))
    assert held(quire, base) == live
    mapped = VectorFiles(quire.db).peek(key_of(base))
    assert mapped is not None and {int(i) for i in mapped.ids} == live


def test_the_gathering_syncs_at_its_interval_and_when_its_block_fails(
    quire: Quire, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(quire)
    write(quire, base.id, TEXTS[:1], name="seed")
    runs, _carried = _counting(monkeypatch)
    with gathered(quire.db, every=0.0):  # every commit is past the interval: each one syncs at once
        write(quire, base.id, TEXTS[1:2], name="a")
        assert runs == Counter({"keywords": 1, "vectors": 1})
    runs.clear()
    with pytest.raises(RuntimeError), gathered(quire.db, every=3600.0):
        write(quire, base.id, TEXTS[2:3], name="b")
        raise RuntimeError("the job failed after its commit")
    assert runs == Counter({"keywords": 1, "vectors": 1})  # the committed rows were still synced
    assert held(quire, base) == set(live_chunks(quire, base.id))


def test_a_search_inside_a_gathering_answers_from_its_snapshot(quire: Quire) -> None:
    base = make_base(quire)
    items = write(quire, base.id, TEXTS, name="seed")
    with gathered(quire.db, every=3600.0):
        added = write(quire, base.id, ["Glaciers calve icebergs into the fjord."], name="new")
        with quire.db.write() as conn:
            index.clear_items_material(conn, base.id, [items[2]])  # the Müllabfuhr note
        found = {c for c, _s in ranked(quire, base, "glacier iceberg", with_index=True)}
        assert found and {live_chunks(quire, base.id)[c][0] for c in found} == set(added)
        assert ranked(quire, base, "mullabfuhr", with_index=True) == []  # its delete was not synced yet
        assert ranked(quire, base, "protein", with_index=True) == ranked(quire, base, "protein", with_index=False)
