"""People, not just processes: each person connects to a team store as their own database role; what they do is
filed under that role's name, and a role without write rights is refused (exit 5) with nothing written.

Two real roles on the loopback server: ``alice`` may read and write Quire's tables, ``reader`` may only read.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.engines.test_team_cli import answered, run, secret_of
from tests.support.servers import PostgresServer

pytestmark = pytest.mark.engines

_roles = itertools.count(1)
WRITTEN = ("items", "jobs", "worker_sessions", "blobs", "blob_contents", "folder_runs", "audit_log", "settings")


def as_role(url: str, role: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{role}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def make_role(owner_url: str, role: str, password: str, *, writes: bool) -> str:
    """A login role with rights on every table the store has now (as a store's owner grants them)."""
    rights = "SELECT, INSERT, UPDATE, DELETE" if writes else "SELECT"
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        conn.execute(f"GRANT {rights} ON ALL TABLES IN SCHEMA public TO {role}")
        conn.execute(
            f"GRANT {'USAGE, SELECT, UPDATE' if writes else 'SELECT'} ON ALL SEQUENCES IN SCHEMA public TO {role}"
        )
    return as_role(owner_url, role, password)


def counts(owner_url: str) -> dict[str, int]:
    with psycopg.connect(owner_url) as conn:
        return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in WRITTEN}  # type: ignore[index]


def rows(owner_url: str, sql: str) -> list[Any]:
    with psycopg.connect(owner_url) as conn:
        return list(conn.execute(sql).fetchall())


def test_each_person_is_their_role_and_a_reader_writes_nothing(
    postgres_url: str, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    n = next(_roles)
    secret, local = secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    answered(run("--store", postgres_url, "base", "create", "kb", "--precision", "fp32", data_dir=local), secret)
    alice_url = make_role(postgres_url, f"alice_{n}", "pw-alice-1", writes=True)
    reader_url = make_role(postgres_url, f"reader_{n}", "pw-reader-1", writes=False)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "anvil.md").write_text("A blacksmith hammers hot iron into horseshoes on a heavy steel anvil.\n")
    (tmp_path / "lone.md").write_text("A lighthouse keeper trims the wick before the fog rolls in.\n")

    answered(run("--store", alice_url, "add", "kb", str(tmp_path / "lone.md"), data_dir=local), "pw-alice-1")
    started = answered(run("--store", alice_url, "run", "start", "kb", str(folder), data_dir=local), "pw-alice-1")
    (run_row,) = rows(postgres_url, "SELECT id, approved_by FROM folder_runs")
    assert run_row[1] == f"person:alice_{n}", (run_row, started)  # the run is approved by the role that started it
    (owner,) = rows(postgres_url, "SELECT owner FROM items WHERE name = 'lone.md'")
    assert owner == (f"person:alice_{n}",)  # the role that connected, not this machine's user
    created = rows(postgres_url, "SELECT actor FROM audit_log WHERE action = 'ingest.folder_run.created'")
    assert created == [(f"person:alice_{n}",)]

    before = counts(postgres_url)
    (tmp_path / "second.md").write_text("Barnacles cling to the pier.\n")
    for command in (("add", "kb", str(tmp_path / "second.md")), ("run", "start", "kb", str(folder), "--key", "k2")):
        refused = answered(run("--store", reader_url, *command, data_dir=local), "pw-reader-1", code=5)
        assert refused["error"]["code"] == "forbidden", refused
        message = refused["error"]["message"]
        assert "refused this to your database role" in message and "nothing was changed" in message, message
    assert counts(postgres_url) == before  # not a half write: no item, job, session, copy or entry
    listed = answered(run("--store", reader_url, "items", "kb", data_dir=local), "pw-reader-1")
    assert "lone.md" in {i["name"] for i in listed["items"]}  # reading is the reader's right
