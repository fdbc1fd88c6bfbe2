"""Poison isolation with a real worker process: bombs, a parse that hangs, one that kills its process and
one that asks for too much memory each fail on their own; every good file completes; the worker lives."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.compose import open_quire
from knowledge.lifecycle import QUARANTINED, operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import REPO, python_proc, quire_cli, wait_until
from tests.knowledge.helpers import integrity_ok, make_base
from tests.sources.builders import make_pdf
from tests.support.files import write_tree

# ``quire`` with the test parsers (.hang, .crash, .balloon, .census) registered: tests/support/bad_parsers.py
BAD_CLI = "tests.support.cli_with_bad_parsers"


def bad_cli(*args: str, data_dir: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **poison_env(3), "PYTHONFAULTHANDLER": "1"}
    return subprocess.run(
        [sys.executable, "-m", BAD_CLI, "--data-dir", str(data_dir), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def bomb(kind: str) -> bytes:
    """A small ZIP package with one member that expands ~1000 times (50 MB of zeros)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        if kind == "epub":
            zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
            zf.writestr("OEBPS/chapter.xhtml", b"\0" * (50 * 1024 * 1024))
        else:
            zf.writestr("[Content_Types].xml", "<Types/>")
            zf.writestr("word/document.xml", b"\0" * (50 * 1024 * 1024))
    return buffer.getvalue()


def poison_env(timeout: float) -> dict[str, str]:
    return {
        "QUIRE_PARSE_TIMEOUT": str(timeout),
        "QUIRE_PARSE_MEMORY_MB": "1024",
        "PYTHONPATH": str(REPO),
    }


def test_each_bad_file_fails_alone_and_the_worker_lives(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in poison_env(3).items():
        monkeypatch.setenv(key, value)
    good = {f"good{n}.txt": f"Good file {n} about the migration of whales number {n}." for n in range(6)}
    folder = write_tree(
        tmp_path / "mixed",
        {
            **good,
            "bomb.docx": bomb("docx"),
            "bomb.epub": bomb("epub"),
            "bomb.pdf": make_pdf([["a page"]], flate_bomb=80_000_000),  # past pypdf's 75 MB stream cap
            "stuck.hang": "this parse never ends",
            "boom.crash": "this parse kills its process",
            "greedy.balloon": "this parse wants 64 GB",
            "more.md": "# More\n\nA good Markdown file after the bad ones, about dolphins.",
        },
    )
    assert quire_cli("base", "create", "kb", data_dir=data_dir).returncode == 0
    assert quire_cli("add", "kb", str(folder), data_dir=data_dir).returncode == 0

    worker = bad_cli("--json", "worker", "--until-idle", data_dir=data_dir)

    assert worker.returncode == 0, worker.stderr  # one worker process ran every job and exited cleanly
    quire = open_quire(data_dir)
    try:
        items = {i.relative_path or i.name: i for i in operations.list_items(quire, "kb", flat=True)}
    finally:
        quire.close()
    for name in [*good, "more.md"]:
        assert items[name].status == "completed", (name, items[name].error_code, items[name].error_message)
    failures = {name: (items[name].status, items[name].error_code) for name in items if name not in good}
    assert failures["bomb.docx"] == ("failed", "decompression_bomb")
    assert failures["bomb.epub"] == ("failed", "decompression_bomb")
    assert failures["bomb.pdf"] == ("failed", "decompression_bomb")
    assert failures["stuck.hang"] == ("failed", "parse_timeout")
    assert failures["boom.crash"] == ("failed", "parser_crashed")
    # the memory limit answered before the machine did: a MemoryError in the child, or its death
    assert failures["greedy.balloon"] in {("failed", "out_of_memory"), ("failed", "parser_crashed")}
    messages = [items[n].error_message or "" for n in failures if failures[n][0] == "failed"]
    assert len(set(messages)) >= 4 and all(str(tmp_path) not in m for m in messages)
    assert "DOCX" in (items["bomb.docx"].error_message or "")
    assert "EPUB" in (items["bomb.epub"].error_message or "")


def test_the_parse_process_is_replaced_and_bounded(monkeypatch: pytest.MonkeyPatch, bad_parsers_here: None) -> None:
    """In-process view of the same machinery: the child dies or times out, a new one takes the rest."""
    for key, value in poison_env(2).items():
        monkeypatch.setenv(key, value)
    from knowledge.ingest import parse_worker

    worker = parse_worker.ParseWorker(parse_worker.ParseLimits.from_env())
    try:
        results = worker.parse_many(
            [
                ("a.txt", b"first good text", 1 << 20, "eng"),
                ("x.hang", b"hang", 1 << 20, "eng"),
                ("b.txt", b"second good text", 1 << 20, "eng"),
                ("y.crash", b"crash", 1 << 20, "eng"),
                ("c.txt", b"third good text", 1 << 20, "eng"),
            ]
        )
        codes = [getattr(r, "code", None) or r.text for r in results]  # type: ignore[union-attr]
        assert codes == ["first good text", "parse_timeout", "second good text", "parser_crashed", "third good text"]
        assert worker.started == 3  # the first, one after the timeout, one after the crash
        pid = worker.pid
        assert pid is not None
        limits = Path(f"/proc/{pid}/limits").read_text()
        line = next(x for x in limits.splitlines() if x.startswith("Max address space"))
        assert str(1024 * 1024 * 1024) in line
    finally:
        worker.close()


def test_a_slow_answer_is_told_with_its_index_and_a_refusal_drops_the_batch(
    monkeypatch: pytest.MonkeyPatch, bad_parsers_here: None
) -> None:
    """``waiting`` hears once about the request whose answer is slow (a folder run marks that source in
    flight); if it raises, the rest of the batch's answers go with the process, never to the next request."""
    for key, value in poison_env(10).items():  # generous: a child's start counts against it on a loaded machine
        monkeypatch.setenv(key, value)
    from knowledge.ingest import parse_worker

    worker = parse_worker.ParseWorker(parse_worker.ParseLimits.from_env())
    heard: list[int] = []
    try:
        assert [r.text for r in worker.parse_many([("w.txt", b"warm", 1 << 20, "eng")])] == ["warm"]  # type: ignore[union-attr]
        results = worker.parse_many(
            [
                ("a.txt", b"quick", 1 << 20, "eng"),
                ("x.hang", b"hang", 1 << 20, "eng"),
                ("b.txt", b"after", 1 << 20, "eng"),
            ],
            heard.append,
        )
        assert [getattr(r, "code", None) or r.text for r in results] == ["quick", "parse_timeout", "after"]  # type: ignore[union-attr]
        assert 1 in heard and heard == sorted(set(heard))  # the hang, once (a loaded machine may slow another)

        def refuse(index: int) -> None:
            raise RuntimeError(f"no longer this attempt's (request {index})")

        with pytest.raises(RuntimeError, match="request 0"):
            worker.parse_many([("y.hang", b"hang", 1 << 20, "eng"), ("c.txt", b"left over", 1 << 20, "eng")], refuse)
        assert [r.text for r in worker.parse_many([("d.txt", b"next batch", 1 << 20, "eng")])] == ["next batch"]  # type: ignore[union-attr]
    finally:
        worker.close()


def item_row(quire: Quire, name: str) -> tuple[str, int]:
    with quire.db.read() as conn:
        row = conn.execute(text("SELECT status, deaths FROM items WHERE name = :n"), {"n": name}).first()
    return ("", 0) if row is None else (str(row.status), int(row.deaths))


def test_two_worker_deaths_quarantine_the_item_in_flight_and_spare_its_neighbours(
    quire: Quire, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_parsers_here: None
) -> None:
    for key, value in poison_env(600).items():  # the hanging parse stays in flight until the kill
        monkeypatch.setenv(key, value)
    make_base(quire)
    good = {f"good{n}.txt": f"Good file {n} about the migration of cranes number {n}." for n in range(4)}
    folder = write_tree(tmp_path / "batch", {**good, "stuck.hang": "this parse never ends"})
    operations.add_items(quire, "kb", [PathInput(folder)])

    for deaths in (1, 2):
        worker = python_proc("-m", BAD_CLI, "--data-dir", str(data_dir), "worker")
        try:
            # in flight again, with the deaths recovery counted so far
            wait_until(lambda n=deaths - 1: item_row(quire, "stuck.hang") == ("reading", n), timeout=120)
        finally:
            os.kill(worker.pid, signal.SIGKILL)
            worker.communicate(timeout=30)
        assert worker.returncode == -signal.SIGKILL

    last = bad_cli("worker", "--until-idle", data_dir=data_dir)
    assert last.returncode == 0, last.stderr

    stuck = {i.name: i for i in operations.list_items(quire, "kb", flat=True)}["stuck.hang"]
    assert (stuck.status, stuck.error_code, stuck.error_message) == (
        "failed",
        QUARANTINED,
        "the worker stopped twice while indexing this file",
    )
    assert item_row(quire, "stuck.hang") == ("failed", 2)
    for name in good:
        assert item_row(quire, name) == ("completed", 0), name
    assert len(search(quire, "kb", "cranes", mode="keyword")) == len(good)
    assert integrity_ok(quire)


def test_an_undeclared_metadata_field_fails_loudly_naming_the_parser_and_the_field(
    quire: Quire, tmp_path: Path, bad_parsers_here: None
) -> None:
    """A census violation is a bug in Quire: never a quiet ``parse_error`` of the file."""
    from knowledge.ingest import parse_worker
    from knowledge.sources.census import UndeclaredMetadata

    worker = parse_worker.ParseWorker(parse_worker.ParseLimits.from_env())
    try:
        with pytest.raises(UndeclaredMetadata, match=r"'text'.*colour"):
            worker.parse_many([("a.txt", b"fine", 1 << 20, "eng"), ("b.census", b"loud", 1 << 20, "eng")])
        assert [r.text for r in worker.parse_many([("c.txt", b"next batch", 1 << 20, "eng")])] == ["next batch"]  # type: ignore[union-attr]
    finally:
        worker.close()

    make_base(quire)
    folder = write_tree(tmp_path / "f", {"a.txt": "Plain text about ferns.", "b.census": "Text with a colour."})
    operations.add_items(quire, "kb", [PathInput(folder)])
    quire.make_worker(poll_interval=0.01).run(until_idle=True, timeout=300)
    items = {i.name: i for i in operations.list_items(quire, "kb", flat=True)}
    # the batch's bug is narrowed to its item (the others complete), recorded as Quire's error, not the file's
    assert items["a.txt"].status == "completed"
    census = items["b.census"]
    assert (census.status, census.error_code) == ("failed", "index_error")
    assert (census.error_message or "").startswith("UndeclaredMetadata: parser 'text'")
    assert "colour" in (census.error_message or "")
