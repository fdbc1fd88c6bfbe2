"""No innocent failures: a failure inside an index batch is narrowed to its culprit; transient faults are
retried with bounded, jittered backoff."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from jobs.backoff import is_transient, retry_transient
from knowledge.ingest.embedding import Encoder
from knowledge.ingest.models import model_spec
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import INDEX_BATCH, INDEX_DOCUMENTS, PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree


class PoisonedEncoder(Encoder):
    """The real encoder, except that any call holding the one poisoned text raises."""

    def __init__(self) -> None:
        super().__init__(model_spec("all-MiniLM-L6-v2"), precision="fp32")
        self.calls = 0

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if any("belladonna" in t for t in texts):
            raise RuntimeError("the model cannot embed this text")
        return super().encode_documents(texts)


def test_an_embedding_failure_in_a_full_batch_fails_only_its_item(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    encoder = PoisonedEncoder()
    quire.encoder_factory = lambda _choice, query: (
        Encoder(model_spec("all-MiniLM-L6-v2"), precision="fp32") if query else encoder
    )
    files = {f"f{n:03}.txt": f"Item {n} tells of the orchid species number {n}." for n in range(INDEX_BATCH)}
    files["f077.txt"] = "This one mentions belladonna, which the encoder refuses."
    folder = write_tree(tmp_path / "garden", files)
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)

    with quire.db.read() as conn:
        batches = conn.execute(text("SELECT count(*) FROM jobs WHERE type = :t"), {"t": INDEX_DOCUMENTS}).scalar()
    assert batches == 1  # all 128 leaves were in one index-documents batch
    leaves = {i.name: i for i in operations.list_items(quire, "kb", flat=True) if i.type == "file"}
    bad = leaves.pop("f077.txt")
    assert (bad.status, bad.error_code) == ("failed", "embedding_error")
    assert bad.error_message == "RuntimeError: the model cannot embed this text"
    assert {i.status for i in leaves.values()} == {"completed"} and len(leaves) == INDEX_BATCH - 1
    assert encoder.calls < 32  # bisection (a few calls per level), never one call per item
    assert len({h.item_id for h in search(quire, "kb", "orchid species", mode="keyword", limit=200)}) >= 100


def test_transient_faults_are_retried_with_bounded_jittered_backoff() -> None:
    delays: list[float] = []
    faults = iter([sa_exc.OperationalError("UPDATE", {}, Exception("database is locked"))] * 3)

    def flaky() -> str:
        fault = next(faults, None)
        if fault is not None:
            raise fault
        return "done"

    assert retry_transient(flaky, attempts=5, base_delay=0.1, sleep=delays.append, rng=random.Random(1)) == "done"
    assert len(delays) == 3
    assert all(0 <= d <= 0.1 * 2**n for n, d in enumerate(delays))  # full jitter under the exponential cap
    assert len(set(delays)) == 3  # jittered, not a fixed schedule

    def always_locked() -> None:
        raise sa_exc.OperationalError("UPDATE", {}, Exception("database is locked"))

    delays.clear()
    with pytest.raises(sa_exc.OperationalError):
        retry_transient(always_locked, attempts=4, sleep=delays.append)
    assert len(delays) == 3  # bounded: four attempts, three waits

    def real_error() -> None:
        raise ValueError("not transient")

    delays.clear()
    with pytest.raises(ValueError):
        retry_transient(real_error, sleep=delays.append)
    assert delays == [] and not is_transient(ValueError("x"))
