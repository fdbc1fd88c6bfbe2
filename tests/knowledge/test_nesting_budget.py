"""One budget per file added, across every container kind (knowledge/sources/nesting.py), end to end with the
real worker: each nested container is expanded by a job of its own, so the budget must come from the stored
tree, not from the job that happened to unpack the level above."""

from __future__ import annotations

import gzip
from email.message import EmailMessage
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from knowledge.sources import nesting
from tests.knowledge.helpers import drain, make_base
from tests.sources.builders import zip_of
from tests.support.engine_fixtures import ENGINES, engine_quire

pytestmark = pytest.mark.model
quire = pytest.fixture(params=ENGINES)(engine_quire)  # the tree's count runs in SQL on both engines
_MIB = 1024 * 1024


def _mail(subject: str, body: str, attachments: dict[str, bytes]) -> bytes:
    message = EmailMessage()
    message["Subject"], message["From"], message["To"] = subject, "ada@example.org", "grace@example.org"
    message.set_content(body)
    for name, data in attachments.items():
        message.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return message.as_bytes()


def _mbox(*messages: bytes) -> bytes:
    return b"".join(b"From ada@example.org Tue Mar  5 10:30:00 2024\n" + m + b"\n" for m in messages)


def _tree(quire: Quire) -> list[tuple[int, str, str, str | None, int]]:
    """(id, name, status, error code, level below the file added) of every item under the first root."""
    with quire.db.read() as conn:
        rows = conn.execute(
            text(
                "WITH RECURSIVE down(id, level) AS (SELECT id, 0 FROM items WHERE parent_id IS NULL"
                " UNION ALL SELECT i.id, down.level + 1 FROM items i JOIN down ON i.parent_id = down.id)"
                " SELECT i.id, i.name, i.status, i.error_code, down.level FROM down JOIN items i ON i.id = down.id"
            )
        ).all()
    return [(r.id, r.name, r.status, r.error_code, r.level) for r in rows]


def _found(quire: Quire, query: str) -> list[str]:
    return [h.item_name for h in search(quire, "kb", query, mode="keyword", limit=5)]


def _add(quire: Quire, path: Path, data: bytes) -> None:
    path.write_bytes(data)
    operations.add_items(quire, "kb", [PathInput(path)])
    drain(quire)


def test_a_zip_mbox_mail_chain_is_not_followed_past_two_container_levels(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    inner = zip_of({"bottom.txt": b"the zorblatt word at the very bottom"})
    for level in range(5):  # zip -> mbox -> mail -> zip -> mbox -> mail ... five times over
        mail = _mail(f"Round {level}", f"the plarvine round {level} body", {f"next{level}.zip": inner})
        inner = zip_of({f"box{level}.mbox": _mbox(mail)})
    assert len(inner) < 3000  # a small file
    _add(quire, tmp_path / "chain.zip", inner)

    tree = _tree(quire)
    assert max(level for *_rest, level in tree) == 3  # zip(0) -> mbox(1) -> message(2) -> its attachment(3)
    deepest = [(name, status, code) for _i, name, status, code, level in tree if level == 3]
    assert deepest == [("next4.zip", "skipped", "nested_too_deep")]  # skipped with its reason, not failed
    assert _found(quire, "plarvine")  # the two levels that are read are searchable
    assert _found(quire, "zorblatt") == []
    with quire.db.read() as conn:
        message = conn.execute(text("SELECT error_message FROM items WHERE name = 'next4.zip'")).scalar_one()
    assert "nested more than 2 containers deep" in message and str(tmp_path) not in message


def test_a_zip_of_many_mailboxes_stops_at_the_descendants_cap(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nesting, "MAX_DESCENDANTS", 30)  # read at call time, in the worker's process
    make_base(quire)
    boxes = {
        f"box{b}.mbox": _mbox(*(_mail(f"Note {b}-{m}", f"the quendral note {b} {m}", {}) for m in range(10)))
        for b in range(5)
    }
    _add(quire, tmp_path / "mailboxes.zip", zip_of(boxes))  # 5 mailboxes + 50 messages: 55 items

    below = [row for row in _tree(quire) if row[4] > 0]
    markers = [(name, code) for _i, name, _s, code, _l in below if name.endswith("more not unpacked)")]
    assert len(below) - len(markers) == 30  # the whole tree's cap, not 10,000 per mailbox
    assert markers and {code for _name, code in markers} == {"too_large"}
    with quire.db.read() as conn:
        reasons = conn.execute(text("SELECT error_message FROM items WHERE name LIKE '(%more not unpacked)'")).all()
    assert all("more than 30 files in all" in r[0] for r in reasons)


def test_members_of_exactly_one_mebibyte_are_judged_on_the_whole_tree(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    inner = {f"part{n}.zip": zip_of({f"z{i}.txt": b"\0" * _MIB for i in range(4)}) for n in range(3)}
    top = zip_of(inner)  # 12 MiB from about 13 KB: each member exactly at the floor, never judged by itself
    assert len(top) * 100 < 12 * _MIB
    _add(quire, tmp_path / "ones.zip", top)

    below = [row for row in _tree(quire) if row[4] > 0]
    assert "decompression_bomb" in {code for *_r, code, _l in below}
    with quire.db.read() as conn:
        kept = conn.execute(
            text("SELECT coalesce(sum(size), 0) FROM items WHERE parent_id IS NOT NULL AND blob_sha256 IS NOT NULL")
        ).scalar_one()
    assert kept <= max(100 * len(top), _MIB) + len(top)  # what was unpacked stays within the whole-tree ratio


def test_compressed_members_of_exactly_one_mebibyte_count_on_the_whole_tree(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    top = zip_of({f"log{i}.txt.gz": gzip.compress(b"\0" * _MIB, 9) for i in range(12)})
    assert len(top) * 100 < 12 * _MIB  # 12 MiB from a few KB; each member alone exactly at the floor
    _add(quire, tmp_path / "logs.zip", top)

    codes = {code for _i, _n, _s, code, level in _tree(quire) if level == 1}
    assert codes == {"decompression_bomb"}, codes


def test_ordinary_nested_content_is_read_in_full(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    mail = _mail("Minutes", "the gorvelish meeting", {"minutes.txt": b"the plostarine budget passed"})
    bundle = zip_of(
        {
            "notes/a.txt": b"the vantrelish tide table",
            "notes/b.txt": b"the quillomet survey",
            "notes/c.log.gz": gzip.compress(b"the yandorel compressed log line\n" * 2000),  # 66 KB from ~200 B
            "inbox.mbox": _mbox(mail),
            "inner.zip": zip_of({"deep.txt": b"the brimquel deep file"}),
        }
    )
    _add(quire, tmp_path / "bundle.zip", bundle)

    tree = {name: (status, level) for _i, name, status, _c, level in _tree(quire)}
    assert all(status == "completed" for status, _level in tree.values()), tree
    assert tree["inner.zip"] == ("completed", 1) and tree["deep.txt"] == ("completed", 2)  # its own child
    assert tree["minutes.txt"] == ("completed", 3)  # a plain attachment at the last level is a leaf: read
    for word, name in (
        ("vantrelish", "notes/a.txt"),
        ("quillomet", "notes/b.txt"),
        ("gorvelish", "message 0001.eml"),
        ("plostarine", "minutes.txt"),
        ("brimquel", "deep.txt"),
        ("yandorel", "notes/c.log.gz"),
    ):
        assert _found(quire, word)[:1] == [name], word
