"""A run's items keep the folders of the tree they came from, as ``add`` does: each sub-folder is a directory
item named after it, under the folder above it, made once; a revert takes them with the files; every search
hit says where its document lies below the top of its tree, so two files of one name read differently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledge import folder_runs
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from knowledge.search import search
from tests.conftest import quire_cli
from tests.folder_runs.helpers import PERSON, drain, make_base, rows, scalar
from tests.support.engine_fixtures import ENGINES, engine_quire
from tests.support.files import write_tree

# the data directory, or a team store for the tests parametrized over ENGINES
quire = pytest.fixture(engine_quire)

# two files named changelog.txt in different sub-folders, both mentioning one rare word; folders three deep
NESTED_TREE = {
    "top.txt": "The top note of the documentation tree lists its packages.",
    "python3/changelog.txt": "Python changes: the quokkaline release fixed the parser and the interpreter.",
    "python3/README.txt": "Python read-me: how to install the interpreter on this machine.",
    "perl/changelog.txt": "Perl changes: the quokkaline release fixed regular expressions and modules.",
    "perl/extra/deep/notes.txt": "Deep notes about Perl's modules, three folders down.",
}
WORD = "quokkaline"
CHANGELOGS = {"doc/python3/changelog.txt", "doc/perl/changelog.txt"}


def _items(quire: Quire, run_id: int) -> dict[int, tuple[int | None, int | None, str, str, str | None, str]]:
    """The run's items by id: (parent, root, type, name, relative path, status)."""
    found = rows(
        quire,
        "SELECT id, parent_id, root_id, type, name, relative_path, status FROM items WHERE run_id = :r",
        r=run_id,
    )
    return {r[0]: r[1:] for r in found}


def _path_of(items: dict[int, tuple[int | None, int | None, str, str, str | None, str]], item_id: int) -> str:
    """The names from the tree's top down to the item, through its parents."""
    names: list[str] = []
    at: int | None = item_id
    while at is not None:
        parent, _root, _type, name, _rel, _status = items[at]
        names.append(name)
        at = parent
    return "/".join(reversed(names))


@pytest.mark.parametrize("quire", ENGINES, indirect=True)  # the folders' lookup and the hits' joins, on both engines
def test_a_runs_items_keep_their_sub_folders_and_a_revert_takes_them_all(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = write_tree(tmp_path / "doc", NESTED_TREE)
    started = folder_runs.start_run(quire, PERSON, "kb", folder, key="tree")
    drain(quire)
    summary = folder_runs.show_run(quire, started.run_id).summary
    # the folder items are no sources: the run counts its five files, all committed
    assert (summary.run.status, summary.run.declared_size, summary.counts["committed"]) == ("completed", 5, 5)
    assert summary.counts["settled"] == 5 and summary.counts["pending"] == 0

    items = _items(quire, started.run_id)
    (container,) = [i for i, v in items.items() if v[0] is None]
    assert items[container][2:4] == ("directory", "doc")
    files = {i: v for i, v in items.items() if v[2] == "file"}
    # each file hangs under the folders it lies in, named as they are, all in the container's tree
    assert sorted(_path_of(items, i) for i in files) == sorted(f"doc/{rel}" for rel in NESTED_TREE)
    assert sorted(v[4] or "" for v in files.values()) == sorted(NESTED_TREE)
    folders = {v[4]: (i, v) for i, v in items.items() if v[2] == "directory" and i != container}
    assert sorted(folders) == ["perl", "perl/extra", "perl/extra/deep", "python3"]  # each made once
    for rel, (item_id, (parent, root, _type, name, _rel, status)) in folders.items():
        above = rel.rsplit("/", 1)[0] if "/" in rel else None
        assert parent == (container if above is None else folders[above][0])
        assert (root, name, status) == (container, rel.rsplit("/", 1)[-1], "completed")  # settled with the run
        assert _path_of(items, item_id) == f"doc/{rel}"
    assert {v[1] for v in items.values()} == {container} and items[container][5] == "completed"

    # every hit says where its document lies below the top of its tree (the CLI's JSON, a real process)
    found = quire_cli("--json", "search", "kb", WORD, "--mode", "keyword", data_dir=quire.data_dir)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert {h["path"] for h in hits} == CHANGELOGS
    assert {h["item_name"] for h in hits} == {"changelog.txt"}  # the fields it had stay
    assert {h["source_path"] for h in hits} == {
        str(folder / "python3/changelog.txt"),
        str(folder / "perl/changelog.txt"),
    }

    reverted = folder_runs.revert_run(quire, PERSON, started.run_id)
    assert reverted.deleting == len(items)  # the folders go with the files
    assert {r[0] for r in rows(quire, "SELECT status FROM items WHERE run_id = :r", r=started.run_id)} == {"deleting"}
    assert search(quire, "kb", WORD, mode="keyword", limit=10) == []
    drain(quire)
    assert scalar(quire, "SELECT count(*) FROM items WHERE run_id = :r", r=started.run_id) == 0


def test_a_later_run_and_an_added_folder_show_paths_below_their_own_tops(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = write_tree(tmp_path / "doc", NESTED_TREE)
    operations.add_items(quire, "kb", [operations.PathInput(folder / "python3")])  # added with `quire add DIR`
    drain(quire)
    run = folder_runs.start_run(quire, PERSON, "kb", folder / "perl", key="perl")
    drain(quire)
    assert folder_runs.show_run(quire, run.run_id).summary.counts["committed"] == 2
    hits = search(quire, "kb", WORD, mode="keyword", limit=10)
    assert sorted(h.as_dict()["path"] for h in hits) == ["perl/changelog.txt", "python3/changelog.txt"]
    deep = search(quire, "kb", "three folders down", mode="keyword", limit=10)
    assert [h.as_dict()["path"] for h in deep] == ["perl/extra/deep/notes.txt"]
    single = write_tree(tmp_path / "alone", {"changelog.txt": f"A lone changelog, {WORD} too."})
    operations.add_items(quire, "kb", [operations.PathInput(single / "changelog.txt")])  # a root: its name
    drain(quire)
    paths = sorted(h.as_dict()["path"] for h in search(quire, "kb", WORD, mode="keyword", limit=10))
    assert paths == ["changelog.txt", "perl/changelog.txt", "python3/changelog.txt"]


def test_a_sub_folder_follows_its_files_while_the_run_goes_on(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen from inside each source's transaction: once a sub-folder's files are committed it is complete (so the
    tree's percentages move during a long run), while the run's container stays in progress until the end."""
    from knowledge.folder_runs import commit

    make_base(quire)
    folder = write_tree(tmp_path / "doc", NESTED_TREE)
    seen: list[dict[str, str]] = []
    original = commit._commit_source

    def committing(conn, settling, source, p, before):  # type: ignore[no-untyped-def]
        done = original(conn, settling, source, p, before)
        statuses = conn.exec_driver_sql(
            "SELECT coalesce(relative_path, '.'), status FROM items WHERE type = 'directory'"
        ).all()
        seen.append({str(r[0]): str(r[1]) for r in statuses})
        return done

    monkeypatch.setattr(commit, "_commit_source", committing)
    folder_runs.start_run(quire, PERSON, "kb", folder, key="tree")
    drain(quire)
    assert len(seen) == len(NESTED_TREE)
    assert all(snapshot["."] == "processing" for snapshot in seen)  # the container: in progress to the end
    assert {rel: status for rel, status in seen[-1].items() if rel != "."} == {
        "perl": "completed", "perl/extra": "completed", "perl/extra/deep": "completed", "python3": "completed",
    }  # fmt: skip
    # and before the last file: a folder whose files were in reads completed while the run went on
    assert any(status == "completed" for snapshot in seen[:-1] for rel, status in snapshot.items() if rel != ".")
