"""The knowledge CLI end to end in real processes: JSON shapes, exit codes, a queries file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, quire_cli


def ok(data_dir: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = quire_cli("--json", *args, data_dir=data_dir)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def code(data_dir: Path, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = quire_cli("--json", *args, data_dir=data_dir)
    return result.returncode, (json.loads(result.stdout) if result.stdout.strip() else {})


def test_base_lifecycle_and_exit_codes(tmp_path: Path) -> None:
    d = tmp_path / "data"
    created = ok(d, "base", "create", "Papers", "--precision", "fp32")
    assert (created["name"], created["dimension"], created["precision"]) == ("Papers", 384, "fp32")
    assert code(d, "base", "create", "papers")[0] == 4  # names are case-insensitive
    assert code(d, "base", "show", "nope")[0] == 3
    assert code(d, "base", "create", "x", "--chunk-size", "300")[0] == 2
    ok(d, "base", "rename", "Papers", "Articles")
    assert [b["name"] for b in ok(d, "base", "list")["bases"]] == ["Articles"]
    ok(d, "base", "lock", "Articles")
    rc, err = code(d, "add", "Articles", "--note", "refused while locked")
    assert rc == 4 and "locked" in err["error"]["message"]
    ok(d, "base", "unlock", "Articles")
    note = ok(d, "add", "Articles", "--note", "kept until deleted")["outcomes"][0]["item_id"]
    ok(d, "base", "lock", "Articles")
    deleted = ok(d, "delete", "Articles", str(note))  # delete is allowed at any time (SPEC §3), locked too
    assert deleted["statuses"] == {str(note): "deleting"}
    assert ok(d, "base", "show", "Articles")["locked"]  # and a locked base is deleted whole: a lock guards content
    ok(d, "base", "delete", str(created["id"]))
    assert ok(d, "base", "list")["bases"] == []


def test_add_worker_items_chunks_search_delete(tmp_path: Path) -> None:
    d = tmp_path / "data"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "whales.md").write_text("# Whales\n\nBlue whales are the largest animals that ever lived.\n")
    (docs / "bees.txt").write_text("Honey bees dance to tell the hive where flowers are.\n")
    ok(d, "base", "create", "kb", "--precision", "fp32")
    added = ok(d, "add", "kb", str(docs), "--note", "A note on octopus camouflage", "--title", "Octopus")
    assert [i["type"] for i in added["items"]] == ["directory", "note"]
    rc, _ = code(d, "chunks", "kb", str(added["created"][0]))
    assert rc == 5  # not completed yet: refused by the guard
    assert ok(d, "worker", "--until-idle")["jobs_finished"] >= 2

    items = ok(d, "items", "kb")["items"]
    assert {i["status"] for i in items} == {"completed"}
    assert {"id", "parent", "root", "type", "status", "source_path", "error_code", "error_message"} <= set(items[0])
    whale = next(i for i in items if i["name"] == "whales.md")
    assert whale["parent"] == added["created"][0] and whale["root"] == added["created"][0]

    chunks = ok(d, "chunks", "kb", str(whale["id"]))["chunks"]
    assert chunks[0]["line_start"] == 1 and "Blue whales" in chunks[0]["text"]

    hits = ok(d, "search", "kb", "largest animal", "--mode", "vector", "--limit", "2")["hits"]
    assert hits[0]["item_id"] == whale["id"]
    assert {"item_id", "source_path", "chunk_id", "score", "location", "text"} <= set(hits[0])

    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": "q1", "text": "bee dance"}\n{"id": "q2", "text": "octopus"}\n')
    result = quire_cli("--json", "search", "kb", "--queries-file", str(queries), "--mode", "keyword", data_dir=d)
    lines = [json.loads(x) for x in result.stdout.splitlines()]
    assert [x["id"] for x in lines] == ["q1", "q2"]
    assert lines[0]["hits"][0]["source_path"].endswith("bees.txt")
    assert lines[1]["hits"][0]["item_id"] == added["created"][1]

    ok(d, "delete", "kb", str(whale["id"]))
    assert all(h["item_id"] != whale["id"] for h in ok(d, "search", "kb", "whales", "--mode", "keyword")["hits"])
    assert code(d, "reindex", "kb", str(whale["id"]))[0] == 5  # deleting: the guard refuses reindex
    ok(d, "worker", "--until-idle")
    assert code(d, "chunks", "kb", str(whale["id"]))[0] == 3


def test_bad_arguments_exit_2_with_a_message(tmp_path: Path) -> None:
    d = tmp_path / "data"
    ok(d, "base", "create", "kb", "--precision", "fp32")
    rc, err = code(d, "add", "kb")
    assert rc == 2 and "path" in err["error"]["message"]
    rc, _ = code(d, "search", "kb", "x", "--mode", "psychic")
    assert rc == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    rc, err = code(d, "search", "kb", "--queries-file", str(bad))
    assert rc == 2 and "line 1" in err["error"]["message"]


def test_second_gui_instance_is_refused_but_cli_works_beside_it(tmp_path: Path) -> None:
    d = tmp_path / "data"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from knowledge.instance_lock import GuiInstanceLock;"
            f"lock = GuiInstanceLock(Path({str(d)!r})); lock.acquire(); print('held', flush=True); sys.stdin.read()",
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        from knowledge.errors import DataDirInUse
        from knowledge.instance_lock import GuiInstanceLock

        second = GuiInstanceLock(d)
        try:
            second.acquire()
            raise AssertionError("a second instance must be refused")
        except DataDirInUse as exc:
            assert "already open" in str(exc) and str(holder.pid) in str(exc)
        assert ok(d, "doctor")["ok"] is True  # CLI processes beside the window are fine
    finally:
        holder.communicate("", timeout=30)
    GuiInstanceLock(d).acquire()  # released when the holder exits
