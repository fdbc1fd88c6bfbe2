"""The person chooses the store: ``quire --store URL`` / ``QUIRE_STORE`` on every command, ``quire store init``,
the worker's wake-ups over ``--queue redis://…`` — the real CLI in subprocesses against the loopback servers.

A password given in a URL is never printed: every output checked here is searched for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.conftest import REPO
from tests.support.servers import PostgresServer, RedisServer

pytestmark = pytest.mark.engines


def run(*args: str, data_dir: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if k not in ("QUIRE_STORE", "QUIRE_QUEUE")}
    environment = {**inherited, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), "--json", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def secret_of(url: str) -> str:
    password = urlsplit(url).password
    assert password
    return unquote(password)


def answered(result: subprocess.CompletedProcess[str], *secrets: str, code: int = 0) -> dict:  # type: ignore[type-arg]
    for secret in secrets:
        assert secret not in result.stdout and secret not in result.stderr, "a password was printed"
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout) if result.stdout.strip() else {}  # type: ignore[no-any-return]


def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    return url.replace(f":{parts.password}@", f":{password}@", 1)


def test_store_init_creates_the_schema_once(postgres_url: str, tmp_path: Path) -> None:
    secret, local = secret_of(postgres_url), tmp_path / "local"
    refused = answered(run("--store", postgres_url, "base", "list", data_dir=local), secret, code=3)
    assert "quire store init" in refused["error"]["message"]  # an empty database is not given a schema

    created = answered(run("store", "init", postgres_url, data_dir=local), secret)
    assert created["created"] is True and created["schema"] and created["applied"]
    assert created["store"].startswith("postgresql://postgres:***@127.0.0.1:")
    again = answered(run("store", "init", postgres_url, data_dir=local), secret)
    assert (again["created"], again["applied"], again["schema"]) == (False, [], created["schema"])

    assert answered(run("--store", postgres_url, "base", "list", data_dir=local), secret)["bases"] == []
    doctor = answered(run("--store", postgres_url, "doctor", data_dir=local), secret)
    assert doctor["store"] == created["store"] and doctor["migrations"][-1] == created["schema"]
    assert not (local / "quire.sqlite3").exists()  # the team store was used, not a local file


def test_refusals_and_usage_errors_never_print_the_password(postgres_url: str, tmp_path: Path) -> None:
    secret, local = secret_of(postgres_url), tmp_path / "local"
    wrong = with_password(postgres_url, "not-the-password-4711")
    refused = answered(run("store", "init", wrong, data_dir=local), secret, "not-the-password-4711", code=5)
    assert "password authentication failed" in refused["error"]["message"]
    assert "***" in refused["error"]["message"]

    missing = postgres_url.rsplit("/", 1)[0] + "/no_such_database"
    assert answered(run("--store", missing, "jobs", data_dir=local), secret, code=3)["error"]["code"] == "not_found"
    unreachable = answered(run("store", "init", "postgresql://u:pw-9@127.0.0.1:1/x", data_dir=local), "pw-9", code=1)
    assert "cannot reach" in unreachable["error"]["message"]

    not_a_url = answered(run("--store", str(tmp_path), "base", "list", data_dir=local), code=2)
    assert "--data-dir" in not_a_url["error"]["message"]
    alone = answered(run("--queue", "redis://127.0.0.1:1/0", "jobs", data_dir=local), code=2)
    assert "--store" in alone["error"]["message"]
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    for command in (("backup", str(tmp_path / "b")), ("salvage", "--to", str(tmp_path / "s"))):
        answered(run("--store", postgres_url, *command, data_dir=local), secret, code=2)


@pytest.mark.model
def test_a_person_adds_a_folder_and_a_worker_indexes_it_through_redis(
    postgres_url: str, redis_server: RedisServer, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    secret, redis_secret = secret_of(postgres_url), secret_of(redis_server.url)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "anvil.md").write_text("A blacksmith hammers hot iron into horseshoes on a heavy steel anvil.\n")
    (folder / "saffron.md").write_text("Saffron is the dried stigma of the crocus flower, used in paella.\n")
    env = {"QUIRE_STORE": postgres_url, "QUIRE_QUEUE": redis_server.url}
    person, worker = tmp_path / "person", tmp_path / "worker"  # two machines' own directories

    answered(run("store", "init", data_dir=person, env=env), secret)  # the URL from QUIRE_STORE
    answered(run("base", "create", "kb", "--precision", "fp32", data_dir=person, env=env), secret)
    added = answered(run("add", "kb", str(folder), data_dir=person, env=env), secret, redis_secret)
    assert [i["type"] for i in added["items"]] == ["directory"]

    bad_queue = with_password(redis_server.url, "wrong-redis-pw")
    refused = run("--store", postgres_url, "--queue", bad_queue, "worker", "--until-idle", data_dir=worker)
    assert answered(refused, secret, "wrong-redis-pw", redis_secret, code=5)["error"]["code"] == "forbidden"

    done = run("--store", postgres_url, "--queue", redis_server.url, "worker", "--until-idle", data_dir=worker)
    assert answered(done, secret, redis_secret)["jobs_finished"] >= 1
    items = answered(run("items", "kb", data_dir=person, env=env), secret)["items"]
    assert {i["name"]: i["status"] for i in items if i["type"] == "file"} == {
        "anvil.md": "completed",
        "saffron.md": "completed",
    }
    hits = answered(run("search", "kb", "horseshoes", "--mode", "keyword", data_dir=person, env=env), secret)
    assert [h["text"].split()[1] for h in hits["hits"]] == ["blacksmith"]
    assert not (person / "quire.sqlite3").exists() and not (worker / "quire.sqlite3").exists()
