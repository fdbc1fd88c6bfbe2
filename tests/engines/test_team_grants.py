"""``quire store grant ROLE reader|writer|admin``: rights on the tables a team store has now and on the ones a
base brings later (``vec_base_N``, ``fts_base_N`` and its term counts), through ``ALTER DEFAULT PRIVILEGES`` —
real login roles on the loopback PostgreSQL, granted before the base exists."""

from __future__ import annotations

import itertools
from pathlib import Path

import psycopg
import pytest

from tests.engines.test_team_cli import answered, run, secret_of
from tests.engines.test_team_people import as_role

pytestmark = pytest.mark.engines

_roles = itertools.count(1)


def login_role(owner_url: str, role: str, password: str) -> str:
    """A login role with no rights at all on Quire's tables."""
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    return as_role(owner_url, role, password)


def grant(owner_url: str, role: str, level: str, local: Path, *, code: int = 0) -> dict:  # type: ignore[type-arg]
    return answered(
        run("--store", owner_url, "store", "grant", role, level, data_dir=local), secret_of(owner_url), code=code
    )


def note(tmp_path: Path, name: str, words: str) -> str:
    path = tmp_path / name
    path.write_text(words + "\n")
    return str(path)


def test_roles_granted_before_a_base_exists_reach_it(postgres_url: str, tmp_path: Path) -> None:
    n, secret, local = next(_roles), secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    reader = login_role(postgres_url, f"gr_reader_{n}", "pw-reader-2")
    writer = login_role(postgres_url, f"gr_writer_{n}", "pw-writer-2")
    granted = grant(postgres_url, f"gr_reader_{n}", "reader", local)
    assert (granted["role"], granted["level"], granted["not_covered"]) == (f"gr_reader_{n}", "reader", [])
    grant(postgres_url, f"gr_writer_{n}", "writer", local)

    answered(run("--store", postgres_url, "base", "create", "kb", "--precision", "fp32", data_dir=local), secret)
    anvil = note(tmp_path, "anvil.md", "A blacksmith hammers hot iron into horseshoes on a heavy steel anvil.")
    answered(run("--store", writer, "add", "kb", anvil, data_dir=local), "pw-writer-2")
    answered(run("--store", writer, "worker", "--until-idle", data_dir=tmp_path / "worker"), "pw-writer-2")

    listed = answered(run("--store", reader, "items", "kb", data_dir=local), "pw-reader-2")
    assert [i["status"] for i in listed["items"] if i["name"] == "anvil.md"] == ["completed"], listed
    for mode in ("keyword", "vector", "hybrid"):
        hits = answered(
            run("--store", reader, "search", "kb", "horseshoes", "--mode", mode, data_dir=local), "pw-reader-2"
        )
        assert "anvil.md" in str(hits), (mode, hits)
    refused = answered(run("--store", reader, "add", "kb", anvil, data_dir=local), "pw-reader-2", code=5)
    assert refused["error"]["code"] == "forbidden"  # a reader still writes nothing


def test_an_admin_creates_bases_that_the_others_reach(postgres_url: str, tmp_path: Path) -> None:
    n, secret, local = next(_roles), secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    reader = login_role(postgres_url, f"gr_reader_{n}", "pw-reader-3")
    admin = login_role(postgres_url, f"gr_admin_{n}", "pw-admin-3")
    writer = login_role(postgres_url, f"gr_writer_{n}", "pw-writer-3")
    grant(postgres_url, f"gr_reader_{n}", "reader", local)  # before the admin: its defaults are copied to the admin
    grant(postgres_url, f"gr_admin_{n}", "admin", local)
    grant(postgres_url, f"gr_writer_{n}", "writer", local)  # after the admin: set for the admin's tables too

    answered(run("--store", postgres_url, "base", "create", "first", "--precision", "fp32", data_dir=local), secret)
    made = run("--store", admin, "base", "create", "kb", "--precision", "fp32", data_dir=local)
    answered(made, "pw-admin-3")
    tide = note(tmp_path, "tide.md", "The harbour master logs the spring tide against the old granite quay.")
    answered(run("--store", writer, "add", "kb", tide, data_dir=local), "pw-writer-3")
    answered(run("--store", writer, "worker", "--until-idle", data_dir=tmp_path / "worker"), "pw-writer-3")
    hits = answered(
        run("--store", reader, "search", "kb", "granite quay", "--mode", "keyword", data_dir=local), "pw-reader-3"
    )
    assert "tide.md" in str(hits), hits


def test_only_a_plain_existing_role_is_granted(postgres_url: str, tmp_path: Path) -> None:
    secret, local = secret_of(postgres_url), tmp_path / "local"
    answered(run("store", "init", postgres_url, data_dir=local), secret)
    for bad in ('bob"; DROP TABLE items; --', "Bob", "bob smith", "1bob", "x" * 64, ""):
        refused = grant(postgres_url, bad, "reader", local, code=2)
        assert "not a plain role name" in refused["error"]["message"], (bad, refused)
    missing = grant(postgres_url, "gr_nobody", "reader", local, code=3)
    assert "no role 'gr_nobody'" in missing["error"]["message"]
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT to_regclass('items') IS NOT NULL").fetchone() == (True,)
    data_dir = answered(run("store", "grant", "bob", "reader", data_dir=local), code=2)
    assert "team store" in data_dir["error"]["message"]
