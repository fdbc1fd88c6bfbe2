"""An OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 for tests: well-behaved, faulty or hostile.

``EmbeddingServer(vectors)`` answers with ``vectors.encode_documents(texts)`` (the packaged model, for
results comparable with a local base, or :class:`HashVectors` where the numbers do not matter). Its
:class:`Behaviour` is changed while it runs: slow, rate-limited, dropping, hanging, down, refusing one text,
redirecting, answering NaN, the wrong length or count, trickling, or oversized.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

MODES = (
    "ok",  # answer (after any refusal below)
    "slow",  # the first `failures_left` requests wait (until released, at most `slow_seconds`) then answer
    "ratelimit",  # the first `failures_left` requests get 429 with Retry-After: 1
    "drop",  # the first `failures_left` connections are shut without an answer
    "hang",  # every request waits until released
    "down503",  # every request gets 503
    "status",  # every request gets `status` with `status_body`
    "redirect",  # every request gets `status` (a 3xx) with Location: `redirect_to`
    "nan",  # the answer holds a NaN
    "wronglen",  # each vector is one number short
    "wrongcount",  # one vector fewer than texts
    "trickle",  # a whole valid answer, `trickle_bytes` every `trickle_interval` seconds (headers included)
    "oversize_declared",  # headers declare `oversize_bytes`, nothing follows
    "oversize_stream",  # no length: bytes until the client hangs up (at most `oversize_bytes`)
)


class Vectors(Protocol):
    def encode_documents(self, texts: list[str]) -> npt.NDArray[np.float32]: ...


class HashVectors:
    """Deterministic unit vectors from each text's hash: an endpoint whose numbers do not matter."""

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension

    def encode_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimension)


@dataclass
class Behaviour:
    """What the server does; tests change it while it runs, and read what it saw."""

    mode: str = "ok"
    failures_left: int = 0  # for slow / ratelimit / drop: how many requests misbehave first
    slow_seconds: float = 30.0
    hold_until_in_flight: int = 0  # ok: hold each request until this many are in flight (or a short wait)
    require_key: str | None = None
    refuse_marker: str | None = None  # a request with a text containing it gets `status` (400) + `status_body`
    status: int = 400
    status_body: bytes = b""
    redirect_to: str = ""
    trickle_bytes: int = 16
    trickle_interval: float = 0.05
    oversize_bytes: int = 64 * 1024 * 1024
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    in_flight: int = 0
    max_in_flight: int = 0
    requests: int = 0
    hung_up: int = 0  # answers the client stopped reading (trickle, oversize stream)
    auth_seen: list[str | None] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # time.monotonic() of each request's arrival
    inputs_seen: list[list[str]] = field(default_factory=list)


class EmbeddingServer:
    def __init__(self, vectors: Vectors) -> None:
        self.behaviour = Behaviour()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.behaviour, vectors))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.behaviour.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answer_json(vectors: npt.NDArray[np.float32], model: str) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
    return json.dumps({"object": "list", "data": data, "model": model}).encode()


def _handler(behaviour: Behaviour, vectors: Vectors) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return

        def do_GET(self) -> None:  # a redirected POST may arrive as a GET: it counts as a request
            self._arrive()
            self._leave()
            self._status(405)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else {"input": [], "model": ""}
            self._arrive(list(body.get("input", [])))
            try:
                self._answer(body)
            except (BrokenPipeError, ConnectionResetError):
                with behaviour.lock:
                    behaviour.hung_up += 1
            finally:
                self._leave()

        def _arrive(self, texts: list[str] | None = None) -> None:
            with behaviour.arrived:
                behaviour.requests += 1
                behaviour.in_flight += 1
                behaviour.max_in_flight = max(behaviour.max_in_flight, behaviour.in_flight)
                behaviour.auth_seen.append(self.headers.get("Authorization"))
                behaviour.arrivals.append(time.monotonic())
                behaviour.inputs_seen.append(texts or [])
                behaviour.arrived.notify_all()
            self._counted = True

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
            mode, texts = behaviour.mode, list(body["input"])
            if mode == "hang":
                behaviour.release.wait(60)
            elif mode == "down503":
                return self._status(503)
            elif mode == "status":
                return self._status(behaviour.status, body=behaviour.status_body)
            elif mode == "redirect":
                return self._status(behaviour.status, {"Location": behaviour.redirect_to})
            elif mode == "slow" and self._misbehaves():
                behaviour.release.wait(behaviour.slow_seconds)  # longer than the client's timeout
            elif mode == "ratelimit" and self._misbehaves():
                return self._status(429, {"Retry-After": "1"})
            elif mode == "drop" and self._misbehaves():
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return None
            elif mode == "oversize_declared":
                return self._status(200, {"Content-Type": "application/json"}, length=behaviour.oversize_bytes)
            elif mode == "oversize_stream":
                return self._stream_forever()
            if behaviour.require_key and self.headers.get("Authorization") != f"Bearer {behaviour.require_key}":
                return self._status(401)
            if behaviour.refuse_marker and any(behaviour.refuse_marker in t for t in texts):
                return self._status(behaviour.status, body=behaviour.status_body)
            if behaviour.hold_until_in_flight:
                with behaviour.arrived:  # hold so that a client allowing more would show it
                    behaviour.arrived.wait_for(lambda: behaviour.in_flight >= behaviour.hold_until_in_flight, 0.3)
            return self._send_vectors(body["model"], self._vectors(mode, texts))

        def _vectors(self, mode: str, texts: list[str]) -> npt.NDArray[np.float32]:
            got = vectors.encode_documents(texts)
            if mode == "nan":
                got[-1, 0] = np.nan
            elif mode == "wronglen":
                got = got[:, :-1]
            elif mode == "wrongcount":
                got = got[:-1]
            return got

        def _send_vectors(self, model: str, got: npt.NDArray[np.float32]) -> None:
            payload = answer_json(got, model)
            self._leave()
            if behaviour.mode == "trickle":
                return self._trickle(payload)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return None

        def _trickle(self, payload: bytes) -> None:
            """Status line, headers and body, a few bytes at a time: each read gets something, none times out."""
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
            raw = head.encode() + payload
            self.close_connection = True
            for at in range(0, len(raw), behaviour.trickle_bytes):
                if behaviour.release.wait(behaviour.trickle_interval):
                    return
                self.connection.sendall(raw[at : at + behaviour.trickle_bytes])

        def _stream_forever(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self.wfile.write(b'{"data": [{"index": 0, "embedding": [')
            sent, piece = 0, b"0.125, " * 1024
            while sent < behaviour.oversize_bytes and not behaviour.release.is_set():
                self.wfile.write(piece)
                sent += len(piece)

        def _status(
            self, code: int, headers: dict[str, str] | None = None, *, body: bytes = b"", length: int | None = None
        ) -> None:
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            self.wfile.write(body)

    return Handler


class RawTrickleServer:
    """A TCP server on 127.0.0.1 that sends ``payload`` to each connection a byte every ``interval`` seconds,
    whatever the client says (a TLS handshake that never ends); ``hung_up`` counts clients that left."""

    def __init__(self, payload: bytes, interval: float = 0.01) -> None:
        self.payload, self.interval = payload, interval
        self.hung_up = 0
        self.release = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.release.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            for at in range(len(self.payload)):
                if self.release.wait(self.interval):
                    return
                try:
                    conn.sendall(self.payload[at : at + 1])
                except OSError:
                    self.hung_up += 1
                    return

    def close(self) -> None:
        self.release.set()
        self.listener.close()
