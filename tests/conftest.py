"""Shared fixtures: a real data directory and database per test, real processes where it matters."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Every worker a test starts (the CLI's, the window's) runs at normal priority: niced, it starves beside the
# other test process while the test waits on it. tests/test_worker_nice.py checks the default without this.
os.environ.setdefault("QUIRE_WORKER_NICE", "0")

from knowledge.compose import open_quire
from knowledge.runtime import Quire

# the loopback PostgreSQL/Redis fixtures, for tests/engines and for files parametrized by engine
pytest_plugins = ["tests.support.engine_fixtures"]

# Converted models (the OpenVINO backend's IR) go to one cache per test session, shared by its subprocesses:
# converted once, never read from (or left in) the user's cache.
_SESSION_CACHE = None if "QUIRE_CACHE_DIR" in os.environ else tempfile.mkdtemp(prefix="quire-test-cache-")
os.environ.setdefault("QUIRE_CACHE_DIR", _SESSION_CACHE or "")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _SESSION_CACHE is not None:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def private_user_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the real per-user config file (the data-directory preference lives there);
    CLI subprocesses inherit the variable."""
    monkeypatch.setenv("QUIRE_CONFIG_DIR", str(tmp_path_factory.mktemp("user-config")))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def quire(data_dir: Path) -> Iterator[Quire]:
    q = open_quire(data_dir)
    yield q
    q.close()


def wait_until(
    predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.02, what: str | None = None
) -> Any:
    """Poll a condition with a deadline (never a bare sleep standing in for synchronisation); its first true
    answer comes back. ``what`` names the condition in the failure."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" if what else f"condition not met within {timeout}s")
        time.sleep(interval)


def python_proc(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen(
        [sys.executable, *args], cwd=REPO, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def quire_cli(
    *args: str, data_dir: Path, timeout: float = 300, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    # faulthandler: a child that dies of a signal prints every thread's Python stack on stderr
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1"}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


@pytest.fixture
def bad_parsers_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test parsers (tests/support/bad_parsers.py) registered in this process for one test; a parse
    process started meanwhile gets them from it."""
    from knowledge.sources import dispatch, formats
    from tests.support import bad_parsers

    monkeypatch.setattr(dispatch, "_PARSERS", dict(dispatch._PARSERS))
    monkeypatch.setattr(dispatch, "_EXTRA", {})
    monkeypatch.setattr(formats, "FORMATS", dict(formats.FORMATS))
    bad_parsers.register()
