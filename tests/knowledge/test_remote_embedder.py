"""The remote embedder (issue 10, item 8) against real HTTP servers on 127.0.0.1 started by the test.

The healthy server serves the packaged model's own embeddings (OpenAI ``/v1/embeddings`` shape), so a
remote base's results are comparable with a local base's. Other servers are slow, answer 429 with
``Retry-After``, drop connections, hang, or are down.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from sqlalchemy import text

from knowledge.ingest import remote, remote_turns
from knowledge.ingest.embedding import Encoder, default_model_spec
from knowledge.ingest.remote import CallSettings, EmbedderUnavailable, RemoteConfig, RemoteEncoder
from knowledge.library import bases
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import quire_cli
from tests.knowledge.helpers import drain, make_base, statuses
from tests.support.embedding_server import EmbeddingServer as Server
from tests.support.embedding_server import unused_port
from tests.support.files import write_tree

KEY = "sekret-key-value-0123456789"


@pytest.fixture(scope="module")
def model() -> Encoder:
    encoder = Encoder(default_model_spec(), precision="fp32")
    encoder.encode_documents(["warm up"])  # loaded before any client timeout starts counting
    return encoder


@pytest.fixture
def server(model: Encoder) -> Iterator[Server]:
    s = Server(model)
    yield s
    s.close()


def _config(url: str, **settings: Any) -> RemoteConfig:
    """Generous timeouts (a loaded machine must not turn an answer into a retry); a test about timeouts
    sets its own short one and never counts requests exactly."""
    defaults: dict[str, Any] = {"timeout": 60, "max_retries": 3, "backoff_base": 0.01, "backoff_max": 2.0}
    return RemoteConfig(url, "minilm", 384, None, CallSettings(**{**defaults, **settings}))


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The client's waits, recorded (and kept short) instead of slept in full."""
    seen: list[float] = []
    real = remote.time.sleep

    def record(seconds: float) -> None:
        seen.append(seconds)
        real(min(seconds, 0.01))

    monkeypatch.setattr(remote.time, "sleep", record)
    return seen


# -- the client's bounds -----------------------------------------------------------------------


def test_the_served_vectors_equal_the_packaged_model(server: Server, model: Encoder) -> None:
    texts = ["the harbor at dawn", "a quartz ridge", "violet willow"]
    got = RemoteEncoder(_config(server.url)).encode_documents(texts)
    assert np.allclose(got, model.encode_documents(texts), atol=1e-5)


def test_slow_server_times_out_then_succeeds(server: Server, sleeps: list[float], model: Encoder) -> None:
    server.behaviour.mode, server.behaviour.failures_left = "slow", 1  # held 30 s: only a timeout ends it
    client = RemoteEncoder(_config(server.url, timeout=1.0, max_retries=10))
    got = client.encode_documents(["slow then fine"])
    assert np.allclose(got, model.encode_documents(["slow then fine"]), atol=1e-5)
    # the first request timed out and was retried; on a loaded machine a healthy answer may time out too
    assert server.behaviour.requests >= 2 and len(sleeps) == client.client.requests - 1


def test_429_with_retry_after_is_honoured(server: Server, sleeps: list[float]) -> None:
    server.behaviour.mode, server.behaviour.failures_left = "ratelimit", 2
    got = RemoteEncoder(_config(server.url)).encode_documents(["rate limited"])
    assert got.shape == (1, 384) and server.behaviour.requests == 3
    assert sleeps == [1.0, 1.0]  # the server's Retry-After, not the (tiny) jittered backoff


def test_dropped_connections_are_retried(server: Server, sleeps: list[float]) -> None:
    server.behaviour.mode, server.behaviour.failures_left = "drop", 2
    got = RemoteEncoder(_config(server.url)).encode_documents(["dropped twice"])
    assert got.shape == (1, 384) and server.behaviour.requests == 3


def test_a_down_endpoint_fails_after_the_bounded_retries_with_jitter(sleeps: list[float]) -> None:
    client = RemoteEncoder(_config(f"http://127.0.0.1:{unused_port()}", max_retries=3, backoff_base=0.2))
    with pytest.raises(EmbedderUnavailable, match="after 4 tries") as raised:
        client.encode_documents(["nobody home"])
    assert raised.value.code == "embedder_unavailable"
    assert client.client.requests == 4 and len(sleeps) == 3
    assert all(0 <= s <= 0.2 * 2**n for n, s in enumerate(sleeps))  # full jitter under the exponential cap


def test_concurrent_requests_never_exceed_the_cap(server: Server) -> None:
    cap = 2
    server.behaviour.hold_until_in_flight = cap + 1  # a client allowing more than the cap would reach it
    encoder = RemoteEncoder(_config(server.url, max_concurrency=cap, batch_size=2))
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            encoder.encode_documents([f"text {n} {k}" for k in range(6)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert server.behaviour.requests == 6 * 3
    assert server.behaviour.max_in_flight == cap  # reached, never exceeded


@pytest.mark.parametrize("threads", [1, 3])
def test_the_token_bucket_keeps_to_its_rate(threads: int) -> None:
    """After its burst the bucket hands out at most ``rate`` tokens a second: the k-th token (counting
    from 1) is never taken sooner than ``(k - burst) / rate`` after the first. A lower bound only, so a
    loaded machine cannot fail it; a bucket that stops pacing does."""
    rate, burst, per_thread = 50.0, 5, 10
    bucket = remote_turns.TokenBucket(rate, burst)
    taken: list[float] = []
    lock = threading.Lock()

    def take(n: int) -> None:
        for _ in range(n):
            bucket.take()
            with lock:
                taken.append(time.monotonic())

    start = time.monotonic()
    workers = [threading.Thread(target=take, args=(per_thread,)) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    taken.sort()
    assert len(taken) == threads * per_thread
    for k, at in enumerate(taken, start=1):
        assert at - start >= (k - burst) / rate - 1e-3, (k, at - start)
    assert taken[-1] - start >= (threads * per_thread - burst) / rate - 1e-3


def test_a_refusal_of_the_text_is_not_retried_and_says_why(server: Server, sleeps: list[float]) -> None:
    server.behaviour.refuse_marker, server.behaviour.status = "FORBIDDEN", 400
    server.behaviour.status_body = json.dumps({"error": {"message": "input 0 has FORBIDDEN\x07 words\n" * 30}}).encode()
    client = RemoteEncoder(_config(server.url))
    with pytest.raises(remote.EmbeddingRejected) as raised:
        client.encode_documents(["fine", "a FORBIDDEN text"])
    assert raised.value.code == "embedding_rejected" and raised.value.status == 400
    message = str(raised.value)
    assert message.startswith("the embedding endpoint refused the text (HTTP 400: input 0 has FORBIDDEN words")
    assert message.isprintable() and len(message) < 250  # the server's words, cleaned and cut short
    assert server.behaviour.requests == 1 and sleeps == []


@pytest.mark.parametrize(
    ("mode", "status", "expected"),
    [
        ("wronglen", 0, "1x383 numbers for 1 texts of dimension 384"),
        ("wrongcount", 0, "0x0 numbers for 1 texts"),
        ("nan", 0, "NaN or Inf"),
        ("status", 401, "refused the key (HTTP 401)"),
        ("status", 404, "refused the request (HTTP 404)"),
    ],
)
def test_an_unusable_answer_fails_the_request_at_once(
    server: Server, sleeps: list[float], mode: str, status: int, expected: str
) -> None:
    server.behaviour.mode, server.behaviour.status = mode, status
    client = RemoteEncoder(_config(server.url))
    with pytest.raises(EmbedderUnavailable, match=re.escape(expected)):
        client.encode_documents(["one text"])
    assert server.behaviour.requests == 1 and sleeps == []  # a deterministic answer is not asked again


def test_a_call_inside_a_write_transaction_is_refused(quire: Quire, server: Server) -> None:
    base = _remote_base(quire, server)
    encoder = quire.document_encoder(base)
    with pytest.raises(remote.CallInsideTransaction), quire.db.write():
        encoder.encode_documents(["inside"])
    assert server.behaviour.requests == 0


# -- a remote base end to end ------------------------------------------------------------------


def _remote_base(quire: Quire, server: Server, name: str = "remote", **settings: Any) -> bases.Base:
    config = _config(server.url, **settings)
    return bases.create_base(
        quire.db, name, model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32", embedder=config.as_json()
    )


def _docs(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "docs",
        {
            "astronomy.txt": "The telescope mount needs a counterweight to track the stars at night.\n",
            "cooking.txt": "Knead the bread dough for ten minutes, then let it rise in a warm kitchen.\n",
            "sailing.txt": "Reef the mainsail before the squall reaches the harbor entrance.\n",
        },
    )


def test_a_remote_base_ingests_and_searches_like_the_local_model(
    quire: Quire, server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUIRE_TEST_KEY", KEY)
    server.behaviour.require_key = KEY
    config = RemoteConfig(server.url, "minilm", 384, "QUIRE_TEST_KEY", CallSettings(timeout=60))
    remote_base = bases.create_base(
        quire.db, "remote", model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32", embedder=config.as_json()
    )
    local_base = make_base(quire, "local", precision="fp32")
    folder = _docs(tmp_path)
    for base in (remote_base, local_base):
        operations.add_items(quire, base.id, [operations.PathInput(folder)])
    drain(quire)
    assert set(statuses(quire, remote_base.id).values()) == {"completed"}
    assert server.behaviour.requests >= 1 and set(server.behaviour.auth_seen) == {f"Bearer {KEY}"}
    before = server.behaviour.requests
    for query in ("stars through a telescope", "baking bread", "storm at sea"):
        remote_hits = search(quire, remote_base.id, query, mode="vector", limit=3)
        local_hits = search(quire, local_base.id, query, mode="vector", limit=3)
        assert [h.item_name for h in remote_hits] == [h.item_name for h in local_hits]
        assert remote_hits[0].score == pytest.approx(local_hits[0].score, abs=1e-4)
    assert server.behaviour.requests == before + 3  # queries embed through the same client
    # the key is never stored: not in the database file, not in what `base show` prints
    with quire.db.read() as conn:
        stored = conn.execute(text("SELECT embedder FROM bases WHERE id = :b"), {"b": remote_base.id}).scalar_one()
    assert KEY not in stored and "QUIRE_TEST_KEY" in stored
    assert KEY.encode() not in (quire.data_dir / "quire.sqlite3").read_bytes()


def test_a_down_endpoint_fails_items_with_embedder_unavailable_and_reindex_retries(
    quire: Quire, server: Server, tmp_path: Path
) -> None:
    base = _remote_base(quire, server, max_retries=2, backoff_base=0.01, backoff_max=0.05)
    server.behaviour.mode = "down503"
    operations.add_items(quire, base.id, [operations.PathInput(_docs(tmp_path))])
    drain(quire)
    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT status, error_code FROM items WHERE base_id = :b AND type = 'file'"), {"b": base.id}
        ).all()
    assert {tuple(r) for r in rows} == {("failed", "embedder_unavailable")}
    server.behaviour.mode = "ok"
    roots = [i.id for i in operations.list_items(quire, base.id) if i.parent_id is None]
    operations.reindex_items(quire, base.id, roots)
    drain(quire)
    assert set(statuses(quire, base.id).values()) == {"completed"}


def _item_outcomes(quire: Quire, base_id: int) -> dict[str, tuple[str, str | None, str | None]]:
    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT name, status, error_code, error_message FROM items WHERE base_id = :b AND type = 'file'"),
            {"b": base_id},
        ).all()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def test_a_refused_text_fails_only_its_item(quire: Quire, server: Server, tmp_path: Path) -> None:
    server.behaviour.refuse_marker, server.behaviour.status = "counterweight", 400
    server.behaviour.status_body = b'{"error": {"message": "this input is not accepted"}}'
    base = _remote_base(quire, server)
    operations.add_items(quire, base.id, [operations.PathInput(_docs(tmp_path))])
    drain(quire)
    got = _item_outcomes(quire, base.id)
    assert got.pop("astronomy.txt") == (
        "failed",
        "embedding_rejected",
        "the embedding endpoint refused the text (HTTP 400: this input is not accepted)",
    )
    assert set(got.values()) == {("completed", None, None)}  # its batch neighbours are embedded
    # one batch request, then bisection: each level asks about both halves of the refused part
    assert 3 <= server.behaviour.requests <= 1 + 2 * 2
    hits = search(quire, base.id, "baking bread", mode="vector", limit=3)
    assert hits and hits[0].item_name == "cooking.txt"


@pytest.mark.parametrize(
    ("mode", "status", "requests"),
    [("down503", 0, 3), ("status", 401, 1), ("wronglen", 0, 1), ("nan", 0, 1), ("refused", 0, 3)],
)
def test_an_unavailable_endpoint_is_never_bisected(
    quire: Quire, server: Server, tmp_path: Path, sleeps: list[float], mode: str, status: int, requests: int
) -> None:
    """Narrowing asks about halves of a batch; for an endpoint that is down that would only multiply the
    calls. Every item fails ``embedder_unavailable`` after the one batch's bounded tries (2 retries)."""
    folder = write_tree(tmp_path / "many", {f"note{n:02}.txt": f"Note number {n} about rivers.\n" for n in range(8)})
    if mode == "refused":
        config = _config(f"http://127.0.0.1:{unused_port()}", max_retries=2)
        base = bases.create_base(
            quire.db, "down", model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32", embedder=config.as_json()
        )
    else:
        server.behaviour.mode, server.behaviour.status = mode, status
        base = _remote_base(quire, server, max_retries=2)
    operations.add_items(quire, base.id, [operations.PathInput(folder)])
    drain(quire)
    got = _item_outcomes(quire, base.id)
    assert len(got) == 8 and {(s, c) for s, c, _ in got.values()} == {("failed", "embedder_unavailable")}
    sent = cast(RemoteEncoder, quire.document_encoder(base)).client.requests
    assert sent == requests
    if mode != "refused":
        assert server.behaviour.requests == requests


def test_another_process_writes_while_a_request_hangs(
    quire: Quire, server: Server, tmp_path: Path, data_dir: Path
) -> None:
    base = _remote_base(quire, server, timeout=30, max_retries=0)
    server.behaviour.mode = "hang"
    operations.add_items(quire, base.id, [operations.PathInput(_docs(tmp_path))])
    worker = threading.Thread(target=drain, args=(quire,), daemon=True)
    worker.start()
    with server.behaviour.arrived:
        assert server.behaviour.arrived.wait_for(lambda: server.behaviour.in_flight == 1, 120)
    # the index job is waiting on the network: no transaction may be open meanwhile
    other = quire_cli("base", "create", "written-meanwhile", "--precision", "fp32", data_dir=data_dir, timeout=60)
    assert other.returncode == 0, other.stderr
    assert server.behaviour.in_flight == 1  # still hanging while the other process wrote
    server.behaviour.mode = "ok"
    server.behaviour.release.set()
    worker.join(timeout=120)
    assert not worker.is_alive()
    assert set(statuses(quire, base.id).values()) == {"completed"}
    assert {b.name for b in bases.list_bases(quire.db)} >= {"remote", "written-meanwhile"}


def test_cli_base_create_http_probes_and_shows_the_settings(
    server: Server, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_VAR", KEY)  # the subprocess reads it at call time
    made = quire_cli(
        "--json", "base", "create", "r", "--embedder", "http", "--endpoint", server.url, "--model", "minilm",
        "--api-key-env", "SOME_VAR", "--concurrency", "3", data_dir=data_dir,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["dimension"] == 384 and server.behaviour.requests == 1  # asked once, before the write
    assert server.behaviour.auth_seen == [f"Bearer {KEY}"] and KEY not in made.stdout + made.stderr
    assert created["embedder"]["api_key_env"] == "SOME_VAR" and created["embedder"]["settings"]["max_concurrency"] == 3
    shown = quire_cli("base", "show", "r", data_dir=data_dir)
    assert shown.returncode == 0, shown.stderr
    assert "3 in flight" in shown.stdout and "timeout 30.0s" in shown.stdout and "$SOME_VAR" in shown.stdout
    usage = quire_cli("base", "create", "x", "--embedder", "http", "--model", "m", data_dir=data_dir)
    assert usage.returncode == 2
    down = quire_cli(
        "--json", "base", "create", "y", "--embedder", "http", "--endpoint", f"http://127.0.0.1:{unused_port()}",
        "--model", "m", "--max-retries", "0", data_dir=data_dir,
    )  # fmt: skip
    error = json.loads(down.stdout)["error"]
    assert down.returncode == 1 and error["exit_code"] == 1 and error["code"] == "embedder_unavailable"
    assert "did not answer after 1 tries (connection failed" in error["message"], error
    listed = quire_cli("--json", "base", "list", data_dir=data_dir)
    assert [b["name"] for b in json.loads(listed.stdout)["bases"]] == ["r"]
