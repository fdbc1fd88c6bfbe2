"""Issue 46 item 3: a restore applies everything an import applies. Each case starts from a real backup made
by ``quire backup``, edits its database with apsw as an attacker would, and restores it through the CLI: a
view, a trigger, an index, a huge id or counter, a NaN vector, an endpoint with a secret or a migration from
the future refuses the whole backup (exit 5, its code, nothing restored); what the database says about the
world outside is held back (originals unverified, a remote endpoint waiting for a person), queued jobs are
cancelled and huey's messages emptied, so a pickled message in the backup never runs, even after a worker."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import numpy as np
import pytest

from knowledge.ingest.remote import RemoteConfig
from knowledge.runtime import Quire
from knowledge.store.database import DB_FILENAME
from tests.conftest import quire_cli
from tests.portable.helpers import synthetic_base
from tests.support.embedding_server import EmbeddingServer, HashVectors
from tests.support.pickles import shell_pickle, touching_pickle

EXIT_REFUSED = 5
HUGE = 2**62 + 5
KEY_VARIABLE = "QUIRE_TEST_RESTORE_KEY"


def made_backup(quire: Quire, tmp_path: Path) -> Path:
    synthetic_base(quire, "kb", files=3, chunks_per_file=2, dimension=384)
    done = quire_cli("--json", "backup", str(tmp_path / "backups"), data_dir=quire.data_dir)
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["path"])


def edit(db_path: Path, *statements: str, params: tuple[object, ...] = ()) -> None:
    conn = apsw.Connection(str(db_path))
    try:
        for sql in statements:
            conn.execute(sql, params)
    finally:
        conn.close()


def nan_copy(db: Path) -> None:
    edit(db, "UPDATE chunks SET vector_f16 = ? WHERE id = (SELECT min(id) FROM chunks)",
         params=(np.full(384, np.nan, dtype=np.float16).tobytes(),))  # fmt: skip


def nan_page(db: Path) -> None:
    edit(
        db, "UPDATE vec_base_1_vector_chunks00 SET vectors = ?", params=(np.full(1024 * 384, np.nan, "<f4").tobytes(),)
    )


def secret_endpoint(db: Path) -> None:
    config = {**RemoteConfig("http://127.0.0.1:9/v1", "m", 384).as_json(), "endpoint": "http://u:pw@127.0.0.1:9/v1"}
    edit(db, "UPDATE bases SET embedder = ?", params=(json.dumps(config),))


CRAFTED: dict[str, tuple[Callable[[Path], None], str]] = {
    "a view": (lambda db: edit(db, "CREATE VIEW spy AS SELECT * FROM settings"), "unexpected_schema"),
    "a trigger": (
        lambda db: edit(db, "CREATE TRIGGER t AFTER UPDATE ON jobs BEGIN DELETE FROM items; END"),
        "unexpected_schema",
    ),
    "an index": (lambda db: edit(db, "CREATE INDEX extra ON items(name)"), "unexpected_schema"),
    "a changed table": (lambda db: edit(db, "ALTER TABLE items ADD COLUMN evil TEXT"), "unexpected_schema"),
    "a huge chunk id": (
        lambda db: edit(db, f"UPDATE chunks SET id = {HUGE} WHERE id = (SELECT max(id) FROM chunks)"),
        "invalid_ids",
    ),
    "a huge item id": (
        lambda db: edit(db, f"UPDATE items SET id = {HUGE} WHERE id = (SELECT max(id) FROM items)"),
        "invalid_ids",
    ),
    "a huge counter": (
        lambda db: edit(db, f"INSERT OR REPLACE INTO settings (key, value) VALUES ('chunks.next_id', '{HUGE}')"),
        "invalid_ids",
    ),
    "a NaN float16 copy": (nan_copy, "invalid_vector"),
    "a NaN vec0 page": (nan_page, "invalid_vector"),
    "an endpoint with a secret": (secret_endpoint, "endpoint_refused"),
    "a future migration": (
        lambda db: edit(db, "INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_future', 0)"),
        "newer_format",
    ),
}


READ_ON_THE_COPY = {"a huge counter"}  # a setting: read through its door, on the copy only


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_backup_is_refused_whole(quire: Quire, tmp_path: Path, case: str) -> None:
    craft, code = CRAFTED[case]
    backup = made_backup(quire, tmp_path)
    craft(backup / DB_FILENAME)
    target = tmp_path / "restored"
    checks = [("restore", str(backup))] + (
        [] if case in READ_ON_THE_COPY else [("restore", str(backup), "--check-only")]
    )
    for args in checks:
        done = quire_cli("--json", *args, data_dir=target)
        assert done.returncode == EXIT_REFUSED, (case, done.stdout, done.stderr)
        assert json.loads(done.stdout)["error"]["code"] == code
    assert not (target / DB_FILENAME).exists()
    plain = quire_cli("restore", str(backup), data_dir=target)
    assert plain.returncode == EXIT_REFUSED and "nothing was restored" in plain.stderr


@pytest.fixture
def endpoint() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer(HashVectors(384))
    yield server
    server.close()


def test_a_restored_endpoint_and_key_variable_wait_for_a_person(
    quire: Quire, tmp_path: Path, endpoint: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = made_backup(quire, tmp_path)
    config = RemoteConfig(endpoint.url, "remote-model", 384, api_key_env=KEY_VARIABLE).as_json()
    edit(backup / DB_FILENAME, "UPDATE bases SET embedder = ?", params=(json.dumps(config),))
    monkeypatch.setenv(KEY_VARIABLE, "sk-a-key-for-a-stranger")
    target = tmp_path / "restored"
    done = quire_cli("restore", str(backup), data_dir=target)
    assert done.returncode == 0, done.stderr
    assert "the endpoint of 'kb' waits for `quire base confirm-endpoint kb`" in done.stdout
    assert "original(s) not verified" in done.stdout
    shown = json.loads(quire_cli("--json", "base", "show", "kb", data_dir=target).stdout)
    assert shown["embedder"]["needs_confirming"] is True and shown["embedder"]["api_key_env"] == KEY_VARIABLE
    for args in (("search", "kb", "protein cell"), ("add", "kb", "--note", "hello")):
        refused = quire_cli("--json", *args, data_dir=target)
        assert refused.returncode == EXIT_REFUSED, refused.stdout + refused.stderr
        assert json.loads(refused.stdout)["error"]["code"] == "endpoint_needs_confirming"
    assert endpoint.behaviour.requests == 0  # the key never left for the backup's endpoint
    assert quire_cli("--json", "base", "confirm-endpoint", "kb", data_dir=target).returncode == 0
    assert quire_cli("--json", "search", "kb", "protein cell", data_dir=target).returncode == 0
    assert endpoint.behaviour.requests >= 1


def test_restored_originals_are_unverified(quire: Quire, tmp_path: Path) -> None:
    backup = made_backup(quire, tmp_path)
    target = tmp_path / "restored"
    done = quire_cli("--json", "restore", str(backup), data_dir=target)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    conn = apsw.Connection(str(target / DB_FILENAME), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        paths, unverified = conn.execute(
            "SELECT count(*), sum(source_unverified) FROM items WHERE source_path IS NOT NULL"
        ).fetchall()[0]
    finally:
        conn.close()
    assert paths >= 1 and unverified == paths == report["originals_unverified"]


def test_a_pickled_message_in_a_backup_never_runs_even_after_a_worker(quire: Quire, tmp_path: Path) -> None:
    synthetic_base(quire, "kb", files=2, chunks_per_file=1, dimension=384)
    added = quire_cli("--json", "add", "kb", "--note", "queued when the backup was taken", data_dir=quire.data_dir)
    assert added.returncode == 0, added.stderr
    done = quire_cli("--json", "backup", str(tmp_path / "backups"), data_dir=quire.data_dir)
    backup = Path(json.loads(done.stdout)["path"])
    touched, shelled = tmp_path / "touched-by-pickle", tmp_path / "shell-ran"
    edit(backup / DB_FILENAME, "INSERT INTO task (queue, data, priority) VALUES ('quire', ?, 9)",
         params=(touching_pickle(touched),))  # fmt: skip
    edit(backup / DB_FILENAME, "INSERT INTO task (queue, data, priority) VALUES ('other', ?, 9)",
         params=(shell_pickle(shelled),))  # fmt: skip
    target = tmp_path / "restored"
    restored = quire_cli("restore", str(backup), data_dir=target)
    assert restored.returncode == 0, restored.stderr
    assert "1 queued job(s) cancelled and 3 queue message(s) discarded" in restored.stdout
    report = json.loads(quire_cli("--json", "jobs", data_dir=target).stdout)
    assert {j["status"] for j in report["jobs"]} == {"cancelled"}
    worker = quire_cli("--json", "worker", "--until-idle", "--threads", "1", data_dir=target)
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert not touched.exists() and not shelled.exists()
    assert "not a Quire wake-up" not in worker.stderr  # the backup's queue was emptied, never read
    note = next(i for i in json.loads(quire_cli("--json", "items", "kb", data_dir=target).stdout)["items"]
                if i["type"] == "note")  # fmt: skip
    assert note["status"] != "completed"  # nothing the backup queued ran; a reindex would
    assert os.listdir(target / "blobs")
