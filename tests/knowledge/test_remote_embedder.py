"""The remote embedder (issue 10, item 8) against real HTTP servers on 127.0.0.1 started by the test.

The healthy server serves the packaged model's own embeddings (OpenAI ``/v1/embeddings`` shape), so a
remote base's results are comparable with a local base's. Other servers are slow, answer 429 with
``Retry-After``, drop connections, hang, or are down.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from knowledge.ingest import remote
from knowledge.ingest.embedding import Encoder, default_model_spec
from knowledge.ingest.remote import CallSettings, EmbedderUnavailable, RemoteConfig, RemoteEncoder
from knowledge.library import bases
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import quire_cli
from tests.knowledge.helpers import drain, make_base, statuses
from tests.support.files import write_tree

KEY = "sekret-key-value-0123456789"


@dataclass
class Behaviour:
    """What the server does; tests change it while it runs."""

    mode: str = "ok"  # ok | slow | ratelimit | drop | hang | down503
    failures_left: int = 0  # for slow / ratelimit / drop: how many requests misbehave first
    hold_until_in_flight: int = 0  # ok: hold each request until this many are in flight (or a short wait)
    require_key: str | None = None
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    in_flight: int = 0
    max_in_flight: int = 0
    requests: int = 0
    auth_seen: list[str | None] = field(default_factory=list)


class Server:
    def __init__(self, encoder: Encoder) -> None:
        self.behaviour = Behaviour()
        behaviour, enc = self.behaviour, encoder

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with behaviour.arrived:
                    behaviour.requests += 1
                    behaviour.in_flight += 1
                    behaviour.max_in_flight = max(behaviour.max_in_flight, behaviour.in_flight)
                    behaviour.auth_seen.append(self.headers.get("Authorization"))
                    behaviour.arrived.notify_all()
                self._counted = True
                try:
                    self._answer(body)
                finally:
                    self._leave()

            def _leave(self) -> None:
                """The request stops counting as in flight: before its answer is sent (the client may send its
                next request the moment it has the answer) or when it ends without one."""
                if self._counted:
                    self._counted = False
                    with behaviour.arrived:
                        behaviour.in_flight -= 1

            def _misbehaves(self) -> bool:
                with behaviour.lock:
                    if behaviour.failures_left > 0:
                        behaviour.failures_left -= 1
                        return True
                    return False

            def _answer(self, body: dict[str, Any]) -> None:
                mode = behaviour.mode
                if mode == "hang":
                    behaviour.release.wait(60)
                elif mode == "down503":
                    return self._status(503)
                elif mode == "slow" and self._misbehaves():
                    behaviour.release.wait(5)  # longer than the client's timeout
                elif mode == "ratelimit" and self._misbehaves():
                    return self._status(429, {"Retry-After": "1"})
                elif mode == "drop" and self._misbehaves():
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return None
                if behaviour.require_key and self.headers.get("Authorization") != f"Bearer {behaviour.require_key}":
                    return self._status(401)
                if behaviour.hold_until_in_flight:
                    with behaviour.arrived:  # hold so that a client allowing more would show it
                        behaviour.arrived.wait_for(lambda: behaviour.in_flight >= behaviour.hold_until_in_flight, 0.3)
                vectors = enc.encode_documents(list(body["input"]))
                data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
                payload = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
                self._leave()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return None

            def _status(self, code: int, headers: dict[str, str] | None = None) -> None:
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.behaviour.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


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
    defaults: dict[str, Any] = {"timeout": 0.5, "max_retries": 3, "backoff_base": 0.01, "backoff_max": 2.0}
    return RemoteConfig(url, "minilm", 384, None, CallSettings(**{**defaults, **settings}))


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def test_slow_server_times_out_then_succeeds(server: Server, sleeps: list[float]) -> None:
    server.behaviour.mode, server.behaviour.failures_left = "slow", 1
    got = RemoteEncoder(_config(server.url)).encode_documents(["slow then fine"])
    assert got.shape == (1, 384) and server.behaviour.requests == 2 and len(sleeps) == 1


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
    client = RemoteEncoder(_config(f"http://127.0.0.1:{_unused_port()}", max_retries=3, backoff_base=0.2))
    with pytest.raises(EmbedderUnavailable, match="after 4 tries") as raised:
        client.encode_documents(["nobody home"])
    assert raised.value.code == "embedder_unavailable"
    assert client.client.requests == 4 and len(sleeps) == 3
    assert all(0 <= s <= 0.2 * 2**n for n, s in enumerate(sleeps))  # full jitter under the exponential cap


def test_concurrent_requests_never_exceed_the_cap(server: Server) -> None:
    cap = 2
    server.behaviour.hold_until_in_flight = cap + 1  # a client allowing more than the cap would reach it
    encoder = RemoteEncoder(_config(server.url, max_concurrency=cap, batch_size=2, timeout=10))
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
    config = RemoteConfig(server.url, "minilm", 384, "QUIRE_TEST_KEY", CallSettings(timeout=10))
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
        "base", "create", "y", "--embedder", "http", "--endpoint", f"http://127.0.0.1:{_unused_port()}",
        "--model", "m", "--max-retries", "0", data_dir=data_dir,
    )  # fmt: skip
    assert (down.returncode == 1 and "dimension" in down.stderr) or "endpoint" in down.stderr
    listed = quire_cli("--json", "base", "list", data_dir=data_dir)
    assert [b["name"] for b in json.loads(listed.stdout)["bases"]] == ["r"]
