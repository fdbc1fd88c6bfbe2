"""A big file can neither stall a run nor be started over: its passages are embedded in slices, each kept in
the base's vector cache as it is made, under a budget that grows with its text (knowledge/ingest/slices.py);
its parse has a time budget that grows with its bytes (knowledge/ingest/parse_worker.py).

* past the embedding budget the file fails ``index_timeout`` with a clear reason, its neighbour is indexed,
  and a retry embeds only the passages not yet kept;
* a real ``quire worker`` killed with SIGKILL mid-file: the next worker embeds only what the cache lacks;
* a hanging parse is stopped after the base limit plus a share per MiB of the file.
"""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.ingest.embedding import Encoder
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.lifecycle.retry_failed import reindex_failed
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import python_proc, quire_cli, wait_until
from tests.knowledge.helpers import drain, make_base
from tests.support.engine_fixtures import ENGINES, engine_quire
from tests.support.files import write_tree

# the data directory, or a team store for the test parametrized over ENGINES
quire = pytest.fixture(engine_quire)

WORDS = ["river", "stone", "lantern", "copper", "meadow", "falcon", "harbor", "quartz", "willow", "ember", "saddle"]
WORDS += ["thistle", "orchard", "pewter", "glacier", "bramble", "cinder", "tundra", "marble", "hollow", "spindle"]


def long_text(rng: random.Random, paragraphs: int) -> str:
    """Distinct paragraphs (each a passage of its own or more), the last holding the word ``zanzibarite``."""
    body = [" ".join(rng.choice(WORDS) for _ in range(220)) + f" marker{n}." for n in range(paragraphs)]
    body[-1] += " The last page mentions zanzibarite."
    return "\n\n".join(body)


def cached_rows(quire: Quire, base_id: int) -> int:
    with quire.db.read() as conn:
        count = conn.execute(text("SELECT count(*) FROM vector_cache WHERE base_id = :b"), {"b": base_id})
        return int(count.scalar_one())


def item_state(quire: Quire, name: str) -> tuple[str, str | None, str | None, int]:
    with quire.db.read() as conn:
        row = conn.execute(
            text("SELECT status, error_code, error_message, coalesce(chunk_count, 0) FROM items WHERE name = :n"),
            {"n": name},
        ).one()
    return str(row[0]), row[1], row[2], int(row[3])


def texts_counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many texts each call of the real encoder was given (the model still does the work)."""
    sizes: list[int] = []
    original = Encoder.encode_documents

    def counting(self: Encoder, texts: list[str]):  # type: ignore[no-untyped-def]
        sizes.append(len(texts))
        return original(self, texts)

    monkeypatch.setattr(Encoder, "encode_documents", counting)
    return sizes


@pytest.mark.parametrize("quire", ENGINES, indirect=True)
def test_a_file_past_its_budget_fails_alone_and_a_retry_embeds_only_what_is_left(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUIRE_EMBED_SLICE_TEXTS", "4")
    monkeypatch.setenv("QUIRE_EMBED_BUDGET_SECONDS", "0")  # spent by the first slice
    monkeypatch.setenv("QUIRE_EMBED_SECONDS_PER_MB", "0")
    sizes = texts_counted(monkeypatch)
    base = make_base(quire)
    write_tree(tmp_path / "docs", {"big.txt": long_text(random.Random(3), 14), "small.txt": "a short note on kilns"})
    operations.add_items(quire, "kb", [PathInput(tmp_path / "docs")])
    drain(quire)

    status, code, message, _chunks = item_state(quire, "big.txt")
    assert (status, code) == ("failed", "index_timeout")
    assert message is not None and "budget" in message and "retry goes on from there" in message
    assert item_state(quire, "small.txt")[0] == "completed"  # its neighbour went on
    kept = cached_rows(quire, base.id)
    assert kept == 4  # the one slice embedded before the budget ran out

    monkeypatch.delenv("QUIRE_EMBED_BUDGET_SECONDS")
    monkeypatch.delenv("QUIRE_EMBED_SECONDS_PER_MB")
    sizes.clear()
    assert reindex_failed(quire, "kb").item_ids
    drain(quire)

    status, code, _message, chunks = item_state(quire, "big.txt")
    assert (status, code) == ("completed", None)
    assert sum(sizes) == chunks - kept  # the kept slice was not embedded again
    assert cached_rows(quire, base.id) == 0  # written as chunks, the cache rows went
    hits = search(quire, "kb", "zanzibarite", mode="keyword")
    assert hits and hits[0].item_name == "big.txt"


def test_a_worker_killed_mid_file_is_followed_by_one_that_embeds_only_the_rest(
    quire: Quire, data_dir: Path, tmp_path: Path
) -> None:
    base = make_base(quire)
    write_tree(tmp_path / "docs", {"manual.txt": long_text(random.Random(5), 24)})
    operations.add_items(quire, "kb", [PathInput(tmp_path / "docs")])
    env = {"QUIRE_EMBED_SLICE_TEXTS": "3", "PYTHONFAULTHANDLER": "1"}

    worker = python_proc("-m", "app.cli", "--data-dir", str(data_dir), "worker", "--nice", "0", env=env)
    try:  # two slices kept: the file is well under way
        wait_until(lambda: cached_rows(quire, base.id) >= 6, timeout=600, interval=0.05, what="two slices kept")
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.communicate(timeout=60)
    kept = cached_rows(quire, base.id)
    assert item_state(quire, "manual.txt")[0] != "completed"

    restart = quire_cli("worker", "--until-idle", "--nice", "0", data_dir=data_dir, timeout=900)
    assert restart.returncode == 0, restart.stderr

    status, code, _message, chunks = item_state(quire, "manual.txt")
    assert (status, code) == ("completed", None)
    with quire.db.read() as conn:
        results = (
            conn.execute(
                text("SELECT result FROM jobs WHERE type = 'knowledge.index-documents' AND status = 'completed'")
            )
            .scalars()
            .all()
        )
    embedded = sum(json.loads(r).get("embedded", 0) for r in results if r)
    assert kept >= 6 and embedded == chunks - kept  # the second worker went on where the kept slices end
    assert cached_rows(quire, base.id) == 0


def test_a_parse_is_given_time_in_proportion_to_the_file(
    monkeypatch: pytest.MonkeyPatch, bad_parsers_here: None
) -> None:
    from knowledge.ingest import parse_worker

    limits = parse_worker.ParseLimits(timeout_seconds=1.0, memory_bytes=1024 * 1024 * 1024, seconds_per_mib=2.0)
    worker = parse_worker.ParseWorker(limits)
    try:
        assert [r.text for r in worker.parse_many([("w.txt", b"warm", 1 << 20, "eng")])] == ["warm"]  # type: ignore[union-attr]
        started = time.monotonic()
        small = worker.parse_many([("a.hang", b"hang", 1 << 20, "eng")])[0]
        small_waited = time.monotonic() - started
        started = time.monotonic()
        big = worker.parse_many([("b.hang", b"h" * (2 * 1024 * 1024), 4 << 20, "eng")])[0]
        big_waited = time.monotonic() - started
    finally:
        worker.close()
    assert isinstance(small, parse_worker.ParseFailed) and isinstance(big, parse_worker.ParseFailed)
    assert small.code == big.code == "parse_timeout"
    assert small.message == "parsing took longer than 1 s and was stopped"
    assert big.message == "parsing took longer than 5 s (the budget for a 2.0 MB file) and was stopped"
    assert small_waited >= 1.0 and big_waited >= 5.0  # 1 s + 2 s for each of its 2 MiB


def test_a_folder_run_moves_on_past_a_file_over_its_budget(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge import folder_runs
    from tests.folder_runs.helpers import PERSON, rows

    monkeypatch.setenv("QUIRE_EMBED_SLICE_TEXTS", "4")
    monkeypatch.setenv("QUIRE_EMBED_BUDGET_SECONDS", "0")
    monkeypatch.setenv("QUIRE_EMBED_SECONDS_PER_MB", "0")
    make_base(quire)
    folder = write_tree(
        tmp_path / "f",
        {"a.txt": "a note on glazes", "big.txt": long_text(random.Random(7), 10), "c.txt": "a note on kilns"},
    )
    run = folder_runs.start_run(quire, PERSON, "kb", folder, key="k")
    drain(quire)

    status = rows(quire, "SELECT status FROM folder_runs WHERE id = :r", r=run.run_id)
    assert status == [("completed",)]
    settled = rows(
        quire,
        "SELECT s.relative_path, o.disposition, o.reason FROM folder_run_outcomes o "
        "JOIN folder_run_sources s ON s.id = o.source_id WHERE o.run_id = :r ORDER BY s.relative_path",
        r=run.run_id,
    )
    by_path = {path: (disposition, reason) for path, disposition, reason in settled}
    assert by_path["a.txt"][0] == by_path["c.txt"][0] == "committed"
    assert by_path["big.txt"][0] == "rejected" and str(by_path["big.txt"][1]).startswith("index_timeout: ")
