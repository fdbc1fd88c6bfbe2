"""The one bridge from background work to the main thread: app.ops.Op."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject
from pytestqt.qtbot import QtBot

from app import ops
from app.ops import Op


def test_fn_runs_off_the_main_thread_and_the_callback_on_it(qtbot: QtBot) -> None:
    main = threading.get_ident()
    seen: dict[str, int] = {}

    def work(x: int) -> int:
        seen["fn"] = threading.get_ident()
        return x * 2

    def done(value: int) -> None:
        seen["cb"] = threading.get_ident()
        seen["value"] = value

    Op(work, 21).on_success(done).run()
    assert "cb" not in seen  # never delivered synchronously inside run()
    qtbot.waitUntil(lambda: "cb" in seen, timeout=5000)
    assert seen["fn"] != main
    assert seen["cb"] == main
    assert seen["value"] == 42


def test_a_failure_reaches_on_failure_or_the_default_handler(qtbot: QtBot) -> None:
    def boom() -> None:
        raise ValueError("no good")

    failures: list[BaseException] = []
    Op(boom).on_failure(failures.append).run()
    qtbot.waitUntil(lambda: len(failures) == 1, timeout=5000)
    assert str(failures[0]) == "no good"

    defaults: list[BaseException] = []
    ops.set_default_failure_handler(defaults.append)
    try:
        Op(boom).run()
        qtbot.waitUntil(lambda: len(defaults) == 1, timeout=5000)
    finally:
        ops.set_default_failure_handler(None)
    assert ops.describe_error(defaults[0]) == "ValueError: no good"


def test_no_callback_for_an_owner_that_is_gone(qtbot: QtBot) -> None:
    owner = QObject()
    gate = threading.Event()
    called: list[int] = []
    Op(lambda: gate.wait(5) and 1).bound_to(owner).on_success(called.append).run()
    owner.deleteLater()
    qtbot.waitUntil(lambda: not _valid(owner), timeout=5000)
    gate.set()
    qtbot.waitUntil(lambda: ops.in_flight() == 0, timeout=5000)
    assert called == []


def _valid(obj: QObject) -> bool:
    import shiboken6

    return bool(shiboken6.isValid(obj))
