"""A person's gestures are audited on a data directory: one entry per add, delete, reindex, base change and sync
switch, naming the person (the one the caller acts as, else this machine's user) with counts, never item ids.
``quire audit`` shows them."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

from knowledge.library import audit, bases
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import NoteInput, PathInput
from knowledge.principal import Principal, acting_as
from knowledge.runtime import Quire
from tests.conftest import quire_cli
from tests.knowledge.helpers import make_base

PERSON = f"person:{getpass.getuser()}"


def entries(quire: Quire, *actions: str) -> list[audit.Entry]:
    return audit.list_entries(quire.db, actions=actions or None)


def test_add_delete_and_reindex_file_one_entry_each_for_the_person(quire: Quire, tmp_path: Path) -> None:
    base = make_base(quire)
    (tmp_path / "a.bin").write_bytes(b"\x00")  # unsupported: failed at once, so it may be reindexed
    (tmp_path / "b.bin").write_bytes(b"\x01")
    added = operations.add_items(
        quire, base.id, [PathInput(tmp_path / "a.bin"), PathInput(tmp_path / "b.bin"), NoteInput("a note")]
    )
    operations.add_items(quire, base.id, [PathInput(tmp_path / "a.bin")])  # already there: still a gesture
    ids = sorted(added.created)
    files = [i for i in ids if i != max(ids)]
    operations.reindex_items(quire, base.id, files)
    operations.delete_items(quire, base.id, ids)

    (first, again) = entries(quire, audit.ITEMS_ADDED)
    assert (first.actor, first.base_id, first.payload["counts"], first.payload["inputs"]) == (
        PERSON,
        base.id,
        {"created": 3},
        3,
    )
    assert list(again.payload["counts"]) in (["already_present"], ["already_present_refreshed"])
    (reindexed,) = entries(quire, audit.ITEMS_REINDEXED)
    assert reindexed.actor == PERSON and reindexed.payload["counts"] == {"selected": 2}
    assert reindexed.payload["job"] > 0
    (deleted,) = entries(quire, audit.ITEMS_DELETED)
    assert deleted.actor == PERSON and deleted.payload["counts"] == {"selected": 3, "deleting": 3}
    for entry in entries(quire):
        assert not audit.FORBIDDEN_PAYLOAD_KEYS & set(entry.payload)  # counts, never item ids


def test_the_person_acted_for_is_named(quire: Quire) -> None:
    base = make_base(quire)
    with acting_as(Principal.person("carol")):
        operations.add_items(quire, base.id, [NoteInput("carol writes")])
    (added,) = entries(quire, audit.ITEMS_ADDED)
    assert added.actor == "person:carol"


def test_base_changes_are_audited(quire: Quire) -> None:
    base = make_base(quire, "kb")
    bases.rename_base(quire.db, base.id, "papers")
    bases.set_locked(quire.db, base.id, True)
    bases.set_locked(quire.db, base.id, False)
    bases.delete_base(quire.db, quire.queue, base.id, quire.data_dir / "blobs")
    seen = [(e.action, e.actor, e.base_id) for e in entries(quire)]
    assert seen == [
        (audit.BASE_CREATED, PERSON, base.id),
        (audit.BASE_RENAMED, PERSON, base.id),
        (audit.BASE_LOCKED, PERSON, base.id),
        (audit.BASE_UNLOCKED, PERSON, base.id),
        (audit.BASE_DELETED, PERSON, base.id),
    ]
    assert entries(quire, audit.BASE_RENAMED)[0].payload["to"] == "papers"


def test_a_locked_base_is_deleted_and_audited(quire: Quire) -> None:
    base = make_base(quire, "kb")
    bases.set_locked(quire.db, base.id, True)  # a lock guards the base's content, never its removal
    bases.delete_base(quire.db, quire.queue, base.id, quire.data_dir / "blobs")
    assert [b.name for b in bases.list_bases(quire.db)] == []
    assert [(e.action, e.actor, e.payload["name"]) for e in entries(quire, audit.BASE_DELETED)] == [
        (audit.BASE_DELETED, PERSON, "kb")
    ]


def test_quire_audit_shows_an_add_and_a_delete(tmp_path: Path) -> None:
    data = tmp_path / "data"
    note = tmp_path / "n.bin"
    note.write_bytes(b"\x00")

    def ok(*args: str) -> dict:  # type: ignore[type-arg]
        result = quire_cli("--json", *args, data_dir=data)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return json.loads(result.stdout)  # type: ignore[no-any-return]

    ok("base", "create", "kb")
    item = ok("add", "kb", str(note))["outcomes"][0]["item_id"]
    ok("delete", "kb", str(item))
    shown = ok("audit")["entries"]
    assert [(e["action"], e["actor"]) for e in shown] == [
        (audit.BASE_CREATED, PERSON),
        (audit.ITEMS_ADDED, PERSON),
        (audit.ITEMS_DELETED, PERSON),
    ]
