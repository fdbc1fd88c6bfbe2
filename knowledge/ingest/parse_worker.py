"""Parsing in a child process, so a hang or a crash costs one item and never the worker.

Each executor thread of a worker has one small, long-lived parse process (``multiprocessing`` with the
``spawn`` context: ``fork`` is unsafe beside torch's threads). A batch of items goes over in **one**
request; the child answers item by item, so the parent knows which item it is waiting on:

* each answer must come within its budget (wall clock): ``timeout_seconds`` plus ``seconds_per_mib`` for
  every MiB of the file, so a big file gets time in proportion and a small one that hangs is stopped soon;
  past it the child is killed, that item fails ``parse_timeout`` and a fresh child takes the rest of the batch;
* a caller may ask to hear about an answer that is slow (``waiting``: called once with the item's index
  when its answer has not come within :data:`SLOW_ANSWER_SECONDS`), so it can say durably which item it
  is waiting on without a write per item (folder runs mark that source in flight);
* a child that dies (a parser crash, a signal, the memory limit) fails the item it was on
  ``parser_crashed``, and likewise a fresh child takes the rest;
* the child runs under ``RLIMIT_AS = memory_bytes``, so a parser that tries to unpack a bomb gets a
  ``MemoryError`` (answered ``out_of_memory``: a failure, unlike the ``too_large`` skip of a file over the
  size limit) or dies, instead of taking the machine's memory;
* the child dies with its parent (``PR_SET_PDEATHSIG`` on Linux, and EOF on its pipe otherwise).

Measured overhead (tests/benchmarks/parse_worker_overhead.py): see docs/ARCHITECTURE.md "Poison isolation".
Settings: ``QUIRE_PARSE_TIMEOUT`` (seconds, default 120), ``QUIRE_PARSE_SECONDS_PER_MB`` (default 30: every
parser here reads a MiB in well under a second; a PDF that needs OCR, a few seconds a page), ``QUIRE_PARSE_MEMORY_MB``
(default 2048).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import multiprocessing
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from knowledge.sources import ParsedDocument, SourceRejected
from knowledge.sources.census import UndeclaredMetadata
from knowledge.sources.dispatch import extra_parsers

log = logging.getLogger(__name__)
# Parser libraries' warnings, forwarded from the parse process: a worker sends them to its log file only
# (app/cli/commands_core.py: keep_warnings_off_the_terminal).
PARSER_WARNINGS = "quire.parser_warnings"
parser_warnings = logging.getLogger(PARSER_WARNINGS)
WARNINGS = "warnings"
MAX_WARNINGS = 5  # distinct warnings reported per item

PARSE_TIMEOUT = "parse_timeout"
PARSER_CRASHED = "parser_crashed"
SLOW_ANSWER_SECONDS = 1.0  # a text file parses in about a millisecond; a second is a slow parse
_SPAWN = multiprocessing.get_context("spawn")


MIB = 1024 * 1024


@dataclass(frozen=True)
class ParseLimits:
    timeout_seconds: float = 120.0
    memory_bytes: int = 2048 * MIB
    seconds_per_mib: float = 30.0

    @classmethod
    def from_env(cls) -> ParseLimits:
        timeout = float(os.environ.get("QUIRE_PARSE_TIMEOUT", "120"))
        per_mib = float(os.environ.get("QUIRE_PARSE_SECONDS_PER_MB", "30"))
        memory_mb = int(os.environ.get("QUIRE_PARSE_MEMORY_MB", "2048"))
        return cls(timeout_seconds=timeout, memory_bytes=memory_mb * MIB, seconds_per_mib=per_mib)

    def timeout_for(self, size: int) -> float:
        """The wall-clock budget of one file's parse: the base limit plus a share per MiB of its bytes."""
        return self.timeout_seconds + self.seconds_per_mib * size / MIB


@dataclass(frozen=True)
class ParseFailed:
    """An item the parse process could not answer for: a code and a short message (no path)."""

    code: str
    message: str


ParseResult = ParsedDocument | ParseFailed
ParseRequest = tuple[str, bytes, int, str]  # (name, data, max_bytes, OCR language)


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _child_main(conn: Connection, memory_bytes: int, parent_pid: int, extra: dict[str, Any]) -> None:
    """The parse process: answer each request's items one by one, in order. ``extra`` are the parsers the
    parent registered (``sources.dispatch.register_parser``), handed over explicitly."""
    _die_with_parent()
    if os.getppid() != parent_pid:
        return
    if memory_bytes > 0:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    from jobs.sanitize import sanitize_error
    from knowledge.sources import parse_bytes
    from knowledge.sources.dispatch import register_parser

    for suffix, parse in extra.items():
        register_parser(suffix, parse)

    while True:
        try:
            request: list[ParseRequest] = conn.recv()
        except (EOFError, OSError):
            return
        for name, data, max_bytes, ocr_language in request:
            answer: Any
            # a parser library's warnings (markup it guessed at, a font it lacked) describe the file: they go
            # to the parent's log with the item's name, never to this process's stderr, a person's terminal
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")  # each distinct warning once per item: bounded
                try:
                    answer = ("ok", parse_bytes(data, name=name, max_bytes=max_bytes, ocr_language=ocr_language))
                except SourceRejected as rejected:
                    answer = ("rejected", rejected.code, rejected.reason)
                except MemoryError:
                    answer = ("rejected", "out_of_memory", "parsing it needed more memory than allowed")
                except UndeclaredMetadata as exc:  # a bug in Quire, not in the file: said out loud, in the parent
                    answer = ("census", str(exc))
                except Exception as exc:  # a parser bug: this item's failure, not the process's
                    answer = ("failed", "parse_error", sanitize_error(exc))
            del data
            if caught:
                conn.send((WARNINGS, name, described(caught)))
            conn.send(answer)


def described(caught: list[warnings.WarningMessage]) -> list[str]:
    """Each distinct warning once ("Category: first line", bounded), at most :data:`MAX_WARNINGS` of them."""
    seen: dict[str, None] = {}
    for w in caught:
        first = str(w.message).strip().split("\n", 1)[0][:200]
        seen.setdefault(f"{w.category.__name__}: {first}", None)
    return list(seen)[:MAX_WARNINGS]


def start_child(target: Callable[..., None], *args: Any, name: str) -> tuple[Any, Connection]:
    """A spawned daemon process running ``target(conn, *args)``, and this side of its pipe (``spawn``: ``fork``
    is unsafe beside threads; the child's end is closed here, so the pipe reads EOF when the child dies)."""
    parent, child = _SPAWN.Pipe()
    proc = _SPAWN.Process(target=target, args=(child, *args), name=name, daemon=True)
    proc.start()
    child.close()
    return proc, parent


def end_child(proc: Any, conn: Connection | None) -> None:
    """Close a child process's pipe and make sure the child is gone (killed if it still runs)."""
    if conn is not None:
        conn.close()
    if proc is not None:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5)


class ParseWorker:
    """One parse process, started on first use and replaced when it dies or times out. Not shared
    between threads (``ParseWorkers`` hands one to each thread)."""

    def __init__(self, limits: ParseLimits) -> None:
        self.limits = limits
        self._proc: Any = None
        self._conn: Connection | None = None
        self.started = 0  # how many processes this worker has started (tests and stats)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else int(self._proc.pid)

    def warm(self) -> None:
        """Start the parse process now (it imports the parsers while the caller goes on), not on first use."""
        self._ensure()

    def _ensure(self) -> Connection:
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            return self._conn
        self.close()
        extra = extra_parsers()
        proc, parent = start_child(_child_main, self.limits.memory_bytes, os.getpid(), extra, name="quire-parse")
        self._proc, self._conn = proc, parent
        self.started += 1
        return parent

    def close(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc, self._conn = None, None
        end_child(proc, conn)

    def parse_many(
        self, requests: list[ParseRequest], waiting: Callable[[int], None] | None = None
    ) -> list[ParseResult]:
        """Parse every request; a result per request, in order. Never raises for what a file does; a parser
        that yields metadata its census does not declare is a bug in Quire and raises
        :class:`~knowledge.sources.census.UndeclaredMetadata` (naming the parser and the fields).
        ``waiting(i)`` is called (in this thread) when request ``i``'s answer is slow, before waiting on."""
        results: list[ParseResult] = []
        pending = list(requests)
        while pending:
            conn = self._ensure()
            try:
                conn.send(pending)
            except (BrokenPipeError, OSError):
                self.close()
                results.append(ParseFailed(PARSER_CRASHED, "the parser process stopped while reading this file"))
                pending = pending[1:]
                continue
            answered = 0
            for request in pending:
                slow = None if waiting is None else functools.partial(waiting, len(results))
                try:
                    result = self._answer(conn, len(request[1]), slow)
                except BaseException:  # the rest of the batch's answers would be read by the next request
                    self.close()
                    raise
                results.append(result)
                answered += 1
                if isinstance(result, ParseFailed) and result.code in (PARSE_TIMEOUT, PARSER_CRASHED):
                    self.close()
                    break
            pending = pending[answered:]
        return results

    def _answer(self, conn: Connection, size: int, slow: Callable[[], None] | None = None) -> ParseResult:
        timeout = left = self.limits.timeout_for(size)
        try:
            if slow is not None and left > SLOW_ANSWER_SECONDS and not conn.poll(SLOW_ANSWER_SECONDS):
                slow()
                left -= SLOW_ANSWER_SECONDS
            if not conn.poll(left):
                log.warning("a parse took longer than %.0f s; replacing the parse process", timeout)
                return ParseFailed(PARSE_TIMEOUT, _timeout_reason(timeout, size))
            answer = conn.recv()
            while answer[0] == WARNINGS:  # the item's answer follows at once
                for line in answer[2]:
                    parser_warnings.warning("%s: %s", answer[1], line)
                answer = conn.recv()
        except (EOFError, OSError):
            log.warning("the parse process stopped; replacing it")
            return ParseFailed(PARSER_CRASHED, "the parser stopped (crashed or ran out of memory) on this file")
        if answer[0] == "ok":
            return answer[1]  # type: ignore[no-any-return]
        if answer[0] == "census":  # the rest of the batch's answers are dropped with the process
            self.close()
            raise UndeclaredMetadata(answer[1])
        return ParseFailed(answer[1], answer[2])


def _timeout_reason(timeout: float, size: int) -> str:
    budget = f"{timeout:.0f} s" if timeout >= 10 else f"{round(timeout, 1):g} s"
    if size >= MIB:
        return f"parsing took longer than {budget} (the budget for a {size / MIB:.1f} MB file) and was stopped"
    return f"parsing took longer than {budget} and was stopped"


class ParseWorkers:
    """One :class:`ParseWorker` per thread of a process (each executor thread parses on its own)."""

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits.from_env()
        self._local = threading.local()
        self._all: list[ParseWorker] = []
        self._lock = threading.Lock()

    def for_this_thread(self) -> ParseWorker:
        worker: ParseWorker | None = getattr(self._local, "worker", None)
        if worker is None:
            worker = ParseWorker(self.limits)
            self._local.worker = worker
            with self._lock:
                self._all.append(worker)
        return worker

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.close()
