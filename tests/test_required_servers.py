"""The engine fixtures where a server cannot start: skipped on a developer's machine, failed under CI (or
``QUIRE_REQUIRE_SERVERS=1``, which ``make test-engines`` sets), so CI cannot go green with no engine test run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

# a test session whose PostgreSQL cannot start (the fixture's own start function made to fail)
NO_SERVER = '''
from tests.support import engine_fixtures
from tests.support.servers import ServerUnavailable


def no_server():
    raise ServerUnavailable("no server here (a test)")


engine_fixtures.start_postgres = no_server


def test_needs_postgres(postgres_server):
    assert postgres_server is not None
'''


def run_session(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_no_server.py"
    test.write_text(NO_SERVER)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "QUIRE_REQUIRE_SERVERS", "PYTEST_ADDOPTS")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.support.engine_fixtures", "-p", "no:cacheprovider",
         "-p", "no:xdist", "--rootdir", str(tmp_path), str(test)],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip


def test_a_missing_server_skips_on_a_developers_machine(tmp_path: Path) -> None:
    done = run_session(tmp_path)
    assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("required", [{"CI": "true"}, {"QUIRE_REQUIRE_SERVERS": "1"}])
def test_a_missing_server_fails_where_servers_are_required(tmp_path: Path, required: dict[str, str]) -> None:
    done = run_session(tmp_path, **required)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout and "servers are required here" in done.stdout, done.stdout
