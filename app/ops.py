"""The one bridge from background work to the Qt main thread (after Anki's ``CollectionOp``/``QueryOp``).

Usage::

    Op(lifecycle.add_items, quire, base_id, inputs).on_success(self._added).on_failure(self._failed).run()

Threading contract
------------------
* ``fn`` runs on a thread of one shared ``QThreadPool`` — never on the Qt main thread. Everything that
  touches the database (every write, and every read that may grow with a base), parses or embeds goes
  through an ``Op``; searches too (the first one loads the query encoder, i.e. imports torch).
* ``fn`` must not touch any widget, model or other ``QObject`` of the GUI. It gets its arguments and
  returns a value (typically a ``Changes``, a list of dataclasses, a report).
* Results come back through exactly one route: the ``delivered`` signal of a single ``_Bridge`` object
  that lives on the main thread, connected with ``Qt.QueuedConnection``. The success or failure
  callback therefore always runs on the main thread, from the event loop, after ``run()`` returned —
  never synchronously inside ``run()``, never on the worker thread.
* Exactly one of the callbacks runs per ``Op``. A failure with no ``on_failure`` goes to the handler
  installed with ``set_default_failure_handler`` (the main window shows it), else it is logged.
* ``bound_to(obj)``: when ``obj`` has been destroyed by the time the result arrives, no callback runs
  (a closed dialog never receives a late answer).
* ``Op`` never cancels a running ``fn``; long work belongs in the durable job queue, whose progress
  the GUI polls (STYLE.md #4), not in an ``Op``.
* ``wait_for_ops(ms)`` (shutdown, tests) waits for the pool to drain; it does not deliver callbacks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, QRunnable, Qt, QThread, QThreadPool, Signal

log = logging.getLogger(__name__)

T = TypeVar("T")
SuccessHandler = Callable[[T], None]
FailureHandler = Callable[[BaseException], None]

_default_failure: list[FailureHandler] = []
_pool: QThreadPool | None = None
_bridge: _Bridge | None = None
_in_flight = 0
_in_flight_lock = threading.Lock()


class _Bridge(QObject):
    """Lives on the main thread; its one queued signal carries a zero-argument callable to run there."""

    delivered = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.delivered.connect(self._run, Qt.ConnectionType.QueuedConnection)

    def _run(self, callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:  # a callback's bug must not take the event loop down
            log.exception("an operation's callback failed")


def _main_bridge() -> _Bridge:
    global _bridge
    if _bridge is None:
        app = QCoreApplication.instance()
        if app is None or QThread.currentThread() is not app.thread():
            raise RuntimeError("the first Op must be created on the Qt main thread, after the QApplication")
        _bridge = _Bridge()
    return _bridge


def thread_pool() -> QThreadPool:
    """The pool every ``Op`` runs on (a few threads: reads and searches must not queue behind a write)."""
    global _pool
    if _pool is None:
        _pool = QThreadPool()
        _pool.setMaxThreadCount(4)
        _pool.setExpiryTimeout(30_000)
    return _pool


def set_default_failure_handler(handler: FailureHandler | None) -> None:
    _default_failure.clear()
    if handler is not None:
        _default_failure.append(handler)


def in_flight() -> int:
    """How many Ops have been started and not yet delivered (for tests and the status bar)."""
    with _in_flight_lock:
        return _in_flight


def _count(delta: int) -> None:
    global _in_flight
    with _in_flight_lock:
        _in_flight += delta


def wait_for_ops(timeout_ms: int = 10_000) -> bool:
    """Wait for running Ops to finish their ``fn`` (callbacks are not delivered by this)."""
    return thread_pool().waitForDone(timeout_ms)


class _Task(QRunnable):
    def __init__(self, work: Callable[[], None]) -> None:
        super().__init__()
        self._work = work
        self.setAutoDelete(True)

    def run(self) -> None:
        self._work()


class Op(Generic[T]):
    """A background call with callbacks on the main thread. See the module docstring for the contract."""

    def __init__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> None:
        self._fn = fn
        self._args = args
        self._kwargs = kwargs
        self._success: SuccessHandler[T] | None = None
        self._failure: FailureHandler | None = None
        self._owner: QObject | None = None
        self._bridge = _main_bridge()

    def on_success(self, callback: SuccessHandler[T]) -> Op[T]:
        self._success = callback
        return self

    def on_failure(self, callback: FailureHandler) -> Op[T]:
        self._failure = callback
        return self

    def bound_to(self, owner: QObject) -> Op[T]:
        self._owner = owner
        return self

    def run(self) -> None:
        _count(+1)
        thread_pool().start(_Task(self._execute))

    # -- worker thread ----------------------------------------------------------------------------

    def _execute(self) -> None:
        try:
            result = self._fn(*self._args, **self._kwargs)
        except BaseException as exc:  # delivered to the main thread, never swallowed here
            error = exc
            self._bridge.delivered.emit(lambda: self._deliver_failure(error))
            return
        self._bridge.delivered.emit(lambda: self._deliver_success(result))

    # -- main thread ------------------------------------------------------------------------------

    def _owner_gone(self) -> bool:
        return self._owner is not None and not shiboken6.isValid(self._owner)

    def _deliver_success(self, result: T) -> None:
        _count(-1)
        if self._success is not None and not self._owner_gone():
            self._success(result)

    def _deliver_failure(self, exc: BaseException) -> None:
        _count(-1)
        if self._owner_gone():
            return
        if self._failure is not None:
            self._failure(exc)
        else:
            report_failure(exc)


def report_failure(exc: BaseException) -> None:
    """Hand a failure to the default handler (the window's message bar), else log it. Main thread only."""
    if _default_failure:
        _default_failure[0](exc)
    else:
        log.error("background operation failed: %s", exc, exc_info=exc)


def describe_error(exc: BaseException) -> str:
    """A message for people: the knowledge layer's messages as they are, anything else with its type."""
    from knowledge.errors import KnowledgeError

    if isinstance(exc, KnowledgeError):
        return str(exc)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
