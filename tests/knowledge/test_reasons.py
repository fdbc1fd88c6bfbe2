"""Reasons without paths: every stored reason is a code plus a short message with no absolute path, no
home directory and no user name, whatever the exception text held."""

from __future__ import annotations

import getpass
import importlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from jobs.registry import JobType
from jobs.runtime import JobContext
from jobs.sanitize import sanitize_error, sanitize_reason
from knowledge.ingest.embedding import Encoder
from knowledge.ingest.models import model_spec
from knowledge.library import audit
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree

HOME = os.path.expanduser("~")


def leaks(value: str | None, tmp_path: Path) -> list[str]:
    """What of a private place shows in a stored value."""
    text_ = value or ""
    found = [s for s in (str(tmp_path), HOME + "/", "/tmp/", "/home/") if s in text_]
    user = getpass.getuser()
    if f"/{user}/" in text_:
        found.append("user name")
    return found


def test_the_sanitizer_strips_paths_home_and_user() -> None:
    assert sanitize_error(PermissionError(13, "Permission denied", "/home/ann/My Notes/a.pdf")) == (
        "PermissionError: Permission denied"
    )
    assert sanitize_reason("cannot parse '/srv/data/x y/report.docx' at byte 7") == (
        "cannot parse 'report.docx' at byte 7"
    )
    assert sanitize_reason(f"bad header in {HOME}/papers/p.pdf\nTraceback ...") == "bad header in p.pdf"
    assert sanitize_reason("file:///home/ann/a.txt is gone") == "a.txt is gone"
    assert sanitize_reason("ratio 3:1, see docs/ARCHITECTURE.md") == "ratio 3:1, see docs/ARCHITECTURE.md"
    assert len(sanitize_reason("x" * 2000)) == 500


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("open failed:/srv/private/notes.txt", "open failed:notes.txt"),  # after a colon, no space
        ("open failed: /srv/private/notes.txt", "open failed: notes.txt"),
        ("cannot read /home/ann smith/My Documents/plan.txt: denied", "cannot read plan.txt: denied"),
        ("cannot read '/home/ann smith/My Documents/plan b.txt'", "cannot read 'plan b.txt'"),
        ('cannot read "/home/ann smith/My Documents/plan.txt"', 'cannot read "plan.txt"'),
        ("see ~/private notes/x/plan.txt", "see plan.txt"),
        (r"open failed:C:\Users\Ann Smith\Documents\plan.txt", "open failed:plan.txt"),
        ("at (/opt/app/lib/mod.py, line 3)", "at (mod.py, line 3)"),
        ("https://example.org/docs/page stays", "https://example.org/docs/page stays"),
        ("ratio 3:1 in docs/ARCHITECTURE.md", "ratio 3:1 in docs/ARCHITECTURE.md"),
    ],
)
def test_the_sanitizer_cuts_every_absolute_path(raw: str, stored: str) -> None:
    assert sanitize_reason(raw) == stored


class LeakyEncoder(Encoder):
    """The real encoder, failing with the file's full path in the exception text for one file."""

    def __init__(self, leak: str) -> None:
        super().__init__(model_spec("all-MiniLM-L6-v2"), precision="fp32")
        self.leak = leak

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        if any("hemlock" in t for t in texts):
            raise OSError(5, "Input/output error", self.leak)
        if any("nightshade" in t for t in texts):
            raise ValueError(f"cannot embed {self.leak}: token 7 out of range")
        return super().encode_documents(texts)


def test_every_stored_reason_is_free_of_paths(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = write_tree(
        tmp_path / "private docs",
        {"good.txt": "Plain text about ferns.", "io.txt": "Text about hemlock.", "value.txt": "About nightshade."},
    )
    leak = str(folder / "value.txt")
    quire.encoder_factory = lambda _choice, query: (
        Encoder(model_spec("all-MiniLM-L6-v2"), precision="fp32") if query else LeakyEncoder(leak)
    )

    def leaky_handler(ctx: JobContext) -> None:
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{leak}'")

    quire.registry.register(JobType("test.leaky", leaky_handler, "abandon"))
    with quire.db.write() as conn:
        quire.queue.enqueue(conn, "test.leaky", {})
        audit.append(conn, audit.RUN_FAILED, audit.SYSTEM_ACTOR, payload={"error": f"OSError: cannot read {leak}"})
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)

    items = {i.name: i for i in operations.list_items(quire, "kb", flat=True)}
    assert (items["io.txt"].error_code, items["io.txt"].error_message) == (
        "embedding_error",
        "OSError: Input/output error",
    )
    assert items["value.txt"].error_code == "embedding_error"
    # an unquoted path with a space loses its absolute part (what follows the space is all that is left)
    assert (items["value.txt"].error_message or "").startswith("ValueError: cannot embed ")
    assert (items["value.txt"].error_message or "").endswith("value.txt: token 7 out of range")
    with quire.db.read() as conn:
        stored = [r[0] for r in conn.execute(text("SELECT error_message FROM items")).all()]
        stored += [r[0] for r in conn.execute(text("SELECT last_error FROM jobs")).all()]
        stored += [r[0] for r in conn.execute(text("SELECT payload FROM audit_log")).all()]
        last_error = conn.execute(text("SELECT last_error FROM jobs WHERE type = 'test.leaky'")).scalar_one()
    assert last_error == "FileNotFoundError: [Errno 2] No such file or directory: 'value.txt'"
    assert [s for s in stored if leaks(s, tmp_path)] == []


# Every column that stores a reason or an error, by table; the schema scan below must find exactly these, so a
# new such column has to be added here (and provoked) before the suite passes.
REASON_COLUMNS = {
    ("audit_log", "payload"),
    ("bases", "status_reason"),
    ("folder_run_outcomes", "reason"),
    ("folder_runs", "error"),
    ("items", "error_code"),
    ("items", "error_message"),
    ("jobs", "last_error"),
    ("jobs", "payload"),  # ids only, read all the same
    ("sync_roots", "last_error"),
    ("sync_roots", "watcher_reason"),
}
_REASON_WORDS = ("error", "reason", "message", "payload")


def reason_columns(quire: Quire) -> set[tuple[str, str]]:
    with quire.db.read() as conn:
        tables = [
            r[0]
            for r in conn.execute(
                text("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'")
            ).all()
        ]
        found = set()
        for table in tables:
            for column in conn.execute(text(f'PRAGMA table_info("{table}")')).all():
                if any(word in str(column[1]) for word in _REASON_WORDS):
                    found.add((table, str(column[1])))
    return found


def test_no_stored_reason_in_any_table_holds_an_absolute_path(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge import folder_runs, sync
    from knowledge.folder_runs import execute
    from knowledge.library import bases
    from knowledge.principal import Principal

    home = tmp_path / "home dir" / "ann smith"
    monkeypatch.setenv("HOME", str(home))
    folder = write_tree(
        home / "My Documents" / "private notes",
        {"good.txt": "Plain text about ferns.", "io.txt": "Text about hemlock.", "value.txt": "About nightshade."},
    )
    leak = str(folder / "value.txt")
    base = make_base(quire)
    quire.encoder_factory = lambda _choice, query: (
        Encoder(model_spec("all-MiniLM-L6-v2"), precision="fp32") if query else LeakyEncoder(leak)
    )

    def leaky_handler(ctx: JobContext) -> None:
        raise RuntimeError(f"open failed:{leak}")

    quire.registry.register(JobType("test.leaky", leaky_handler, "abandon"))
    with quire.db.write() as conn:
        quire.queue.enqueue(conn, "test.leaky", {})
    # items fail (embedding errors carrying the path), then a sync reconcile of their folder fails
    added = operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    sync.enable_sync(quire, "kb", added.created[0])

    def scan_fails(*_a: object, **_k: object) -> None:
        raise RuntimeError(f"cannot list '{folder}' nor {folder}/sub dir/x: gone")

    monkeypatch.setattr(importlib.import_module("knowledge.sync.reconcile"), "scan", scan_fails)
    root_id = sync.list_roots(quire.db)[0].id
    with pytest.raises(RuntimeError):
        sync.reconcile(quire, root_id, quire.db.write)  # type: ignore[arg-type]
    # a folder run rejects the sources the encoder refuses (reasons with the path), a second one faults
    person = Principal.person("ann")
    folder_runs.start_run(quire, person, "kb", folder, key="rejecting")
    drain(quire)
    other = write_tree(home / "My Documents" / "more notes", {"a.txt": "Alpha about birch."})

    def faulty(*_a: object, **_k: object) -> None:
        raise RuntimeError(f"open failed:{other}/a.txt (in {home})")

    monkeypatch.setattr(execute, "_process", faulty)
    faulted = folder_runs.start_run(quire, person, "kb", other, key="faulting")
    drain(quire)
    bases.mark_base_failed(quire.db, base.id, f"cannot open the index under {home}/.quire data/kb: damaged")

    assert reason_columns(quire) == REASON_COLUMNS
    stored: dict[tuple[str, str], list[str]] = {}
    with quire.db.read() as conn:
        for table, column in sorted(REASON_COLUMNS):
            values = conn.execute(text(f'SELECT "{column}" FROM "{table}" WHERE "{column}" IS NOT NULL')).all()
            stored[(table, column)] = [str(v[0]) for v in values]
    # the failures really reached the columns they are meant to test
    for provoked in (
        ("items", "error_message"),
        ("jobs", "last_error"),
        ("folder_run_outcomes", "reason"),
        ("folder_runs", "error"),
        ("sync_roots", "last_error"),
        ("bases", "status_reason"),
    ):
        assert stored[provoked], provoked
    assert folder_runs.show_run(quire, faulted.run_id).summary.run.status == "failed"
    # a reason may name the file or folder it is about (a path's last part), never the folders above it
    private = ("home dir", "ann smith", "My Documents", str(tmp_path), "/tmp")
    leaked = {
        (where, value) for where, values in stored.items() for value in values if any(p in value for p in private)
    }
    assert leaked == set()
