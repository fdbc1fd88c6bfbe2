"""The same operations on both engines: a base created, a small folder added and indexed by a real worker,
found by keyword and by vector search — on SQLite (in ``make test``) and on a team store (PostgreSQL with
pgvector, ``make test-engines``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from knowledge.compose import open_quire, open_team_quire
from knowledge.library.index import fts_table, vec_table
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.knowledge.helpers import drain, make_base, material_counts, statuses

FILES = {
    "spices/saffron.md": "Saffron is the dried stigma of the crocus flower, prized for its colour in paella.",
    "spices/cardamom.md": "Cardamom pods flavour chai and Scandinavian sweet buns with a warm resinous aroma.",
    "tools/anvil.md": "A blacksmith hammers hot iron into horseshoes on a heavy steel anvil.",
}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.engines)])
def engine_quire(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Quire]:
    if request.param == "sqlite":
        quire = open_quire(tmp_path / "data")
    else:
        url = request.getfixturevalue("postgres_url")
        quire = open_team_quire(url, data_dir=tmp_path / "local")
    yield quire
    quire.close()


def _indexed_folder(quire: Quire, tmp_path: Path) -> int:
    folder = tmp_path / "notes"
    for relative, body in FILES.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(body)
    base = make_base(quire)
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    return base.id


@pytest.mark.model
def test_a_folder_is_indexed_and_found_on_either_engine(engine_quire: Quire, tmp_path: Path) -> None:
    base_id = _indexed_folder(engine_quire, tmp_path)
    done = statuses(engine_quire, base_id)
    assert {done[r] for r in FILES} == {"completed"}, done
    counts = material_counts(engine_quire, base_id)
    assert counts["chunks"] == counts["vectors"] == counts["keywords"] == counts["chunk_count_sum"] >= len(FILES)

    by_word = search(engine_quire, "kb", "horseshoes", mode="keyword")
    assert [h.item_name for h in by_word] == ["anvil.md"]
    stemmed = search(engine_quire, "kb", "pod", mode="keyword")  # "pods" in the text: stemming on both engines
    assert [h.item_name for h in stemmed] == ["cardamom.md"]
    by_meaning = search(engine_quire, "kb", "metalworking forge", mode="vector", limit=3)
    assert by_meaning[0].item_name == "anvil.md"
    hybrid = search(engine_quire, "kb", "saffron rice dish", mode="hybrid", limit=3)
    assert hybrid[0].item_name == "saffron.md"
    assert search(engine_quire, "kb", "the of and", mode="keyword") == []  # only stopwords: no match, no error


@pytest.mark.model
@pytest.mark.engines
def test_the_vectors_live_in_pgvector(postgres_url: str, tmp_path: Path) -> None:
    """On a team store the float vectors are a pgvector column: PostgreSQL's own cosine ranking agrees
    with the in-memory search over the float16 copies."""
    quire = open_team_quire(postgres_url, data_dir=tmp_path / "local")
    try:
        base_id = _indexed_folder(quire, tmp_path)
        query = quire.query_encoder(make_base_ref(quire)).encode_query("metalworking forge")
        literal = "[" + ",".join(f"{x:.7f}" for x in np.asarray(query, dtype=np.float32)) + "]"
        with quire.db.read() as conn:
            kind = conn.execute(
                text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) "
                    "AND attname = 'embedding'"
                ),
                {"t": vec_table(base_id)},
            ).scalar_one()
            nearest = conn.execute(
                text(
                    f"SELECT i.name FROM {vec_table(base_id)} v JOIN chunks c ON c.id = v.rowid "
                    f"JOIN items i ON i.id = c.item_id ORDER BY v.embedding <=> CAST(:q AS vector) LIMIT 1"
                ),
                {"q": literal},
            ).scalar_one()
            tsv = conn.execute(text(f"SELECT count(*) FROM {fts_table(base_id)} WHERE tsv IS NOT NULL")).scalar_one()
        assert kind == "vector(384)"
        assert nearest == "anvil.md" == search(quire, "kb", "metalworking forge", mode="vector")[0].item_name
        assert tsv >= len(FILES)
    finally:
        quire.close()


def make_base_ref(quire: Quire):  # type: ignore[no-untyped-def]
    from knowledge.library.bases import resolve_base

    with quire.db.read() as conn:
        return resolve_base(conn, "kb")
