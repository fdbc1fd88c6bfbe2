"""Hybrid search holds its own on a second judged set: Python standard-library documentation (not SciFact).

The corpus and questions are described in tests/knowledge/techdocs.py. This test reads only the ``held_out``
half of the questions; nothing (fusion, weights, chunking) was fitted or chosen on them. The ``tune`` half
and per-question numbers of both halves are in tests/benchmarks/bench_techdocs.py's results file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.ingest.models import chosen_encoder
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from tests.knowledge import techdocs
from tests.knowledge.helpers import drain, make_base


def test_the_set_is_what_its_readme_says() -> None:
    docs = techdocs.documents()
    assert 150 <= len(docs) <= 400
    chosen = techdocs.questions()
    assert len(chosen) >= 30 and len({q.id for q in chosen}) == len(chosen)
    halves = {half: techdocs.questions(half) for half in ("tune", "held_out")}
    assert len(halves["tune"]) + len(halves["held_out"]) == len(chosen)
    for half in halves.values():
        assert len(half) >= 15 and {q.kind for q in half} == {"identifier", "how-to", "paraphrase"}
    for q in chosen:
        assert q.relevant and set(q.relevant) <= set(docs) and max(q.relevant.values()) == 2, q


@pytest.mark.model
def test_hybrid_is_at_least_the_better_single_mode_on_held_out_questions(quire: Quire, tmp_path: Path) -> None:
    techdocs.write_folder(tmp_path / "stdlib")
    precision, backend = chosen_encoder()  # what a new base gets on this machine
    make_base(quire, precision=precision, backend=backend)
    operations.add_items(quire, "kb", [PathInput(tmp_path / "stdlib")])
    drain(quire, timeout=600)
    assert {i.status for i in operations.list_items(quire, "kb", flat=True)} == {"completed"}

    quality = techdocs.means(techdocs.per_query(quire, "kb", techdocs.questions("held_out")))
    # measured (OpenVINO fp32, a CPU without bf16): keyword 0.709, vector 0.823, hybrid 0.835. Not a margin to
    # lean on: on the tune half hybrid falls below vector (0.811 vs 0.863) — docs/BENCHMARKS.md, "A second
    # judged set", says which questions lose and why.
    assert quality["keyword"] >= 0.5 and quality["vector"] >= 0.5, quality
    assert quality["hybrid"] >= max(quality["keyword"], quality["vector"]) - 0.005, quality
