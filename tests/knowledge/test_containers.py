"""Containers with children, end to end with the real worker: the files inside a zip and the messages of an
mbox become child items of their archive, found by their words with their own locations; hostile members
are refused with reasons; a reindex or a change re-derives the children; deleting the archive deletes them
(rows, search material, owned copies) and they never outlive it in search."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import text

from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from knowledge.search import search
from tests.knowledge.helpers import drain, make_base, material_counts
from tests.sources.builders import make_pdf, zip_of
from tests.sources.office_builders import make_eml, make_msg

pytestmark = pytest.mark.model


def _mbox() -> bytes:
    messages = [
        make_eml(f"Harbour log {word}", plain=f"The {word} arrived at the quay.\n")
        for word in ("brimquel", "taskorin", "velmarod")
    ]
    return b"".join(
        b"From ada@example.org Tue Mar  5 10:30:00 2024\n" + m.replace(b"\r\n", b"\n") + b"\n" for m in messages
    )


def _bundle(with_notes: bool = True) -> bytes:
    files = {"report.pdf": make_pdf([["The quillomet survey of the harbour."]])}
    if with_notes:
        files["notes/a.md"] = b"# Notes\n\nFirst line.\n\nThe vantrelish tide table.\n"
    return zip_of(files)


def _mail_with_minutes() -> bytes:
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"], message["From"], message["To"] = "Minutes", "Ada <ada@example.org>", "lab@example.org"
    message.set_content("The gorvelish meeting went well; minutes attached.")
    message.add_attachment(
        b"# Minutes\n\nThe plostarine budget passed.\n", maintype="text", subtype="markdown", filename="minutes.md"
    )
    message.add_attachment(b"\x00\x01", maintype="application", subtype="octet-stream", filename="blob.bin")
    return message.as_bytes()


def _children(quire: Quire, container_id: int) -> dict[str, tuple[int, str, str | None]]:
    with quire.db.read() as conn:
        rows = conn.execute(
            text("SELECT id, name, status, error_code FROM items WHERE parent_id = :p"), {"p": container_id}
        ).all()
    return {r.name: (r.id, r.status, r.error_code) for r in rows}


def _by_path(quire: Quire) -> dict[str, int]:
    return {i.relative_path or i.name: i.id for i in operations.list_items(quire, "kb", flat=True)}


def _found(quire: Quire, query: str) -> list[str]:
    return [h.item_name for h in search(quire, "kb", query, mode="keyword", limit=5)]


def test_archive_and_mailbox_children_live_and_die_with_their_container(quire: Quire, tmp_path: Path) -> None:
    base = make_base(quire)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "bundle.zip").write_bytes(_bundle())
    (folder / "inbox.mbox").write_bytes(_mbox())
    (folder / "minutes.eml").write_bytes(_mail_with_minutes())
    crane = make_msg("Crane", plain="The sprovalent crane.", attachments=(("plan.txt", b"the yandorel lift plan"),))
    (folder / "crane.msg").write_bytes(crane)
    hostile = zip_of({"fine.txt": b"the orvandel memo", "zeros.txt": b"\x00" * (8 * 1024 * 1024)})
    (folder / "hostile.zip").write_bytes(hostile.replace(b"fine.txt", b"../f.txt"))  # a name leaving the archive
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)
    items = _by_path(quire)

    bundle = _children(quire, items["bundle.zip"])
    assert {name: status for name, (_i, status, _c) in bundle.items()} == {
        "report.pdf": "completed",
        "notes/a.md": "completed",
    }
    hit = search(quire, "kb", "quillomet", mode="keyword", limit=1)[0]
    assert (hit.item_name, hit.item_id, hit.page) == ("report.pdf", bundle["report.pdf"][0], 1)
    notes = search(quire, "kb", "vantrelish", mode="keyword", limit=1)[0]
    assert notes.item_name == "notes/a.md" and (notes.line_start, notes.line_end) == (1, 5)
    assert _found(quire, "report.pdf")[0] == "bundle.zip"  # the archive's own text lists its files

    inbox = _children(quire, items["inbox.mbox"])
    assert sorted(inbox) == ["message 0001.eml", "message 0002.eml", "message 0003.eml"]
    assert _found(quire, "taskorin")[0] == "message 0002.eml"
    only_ada = search(quire, "kb", "quay from:ada@example.org", mode="keyword", limit=10)
    assert {h.item_name for h in only_ada} == set(inbox)  # each message keeps its own mail metadata

    # attachments of a type Quire reads are children of their message; the message keeps its own text
    assert {n: st for n, (_i, st, _c) in _children(quire, items["minutes.eml"]).items()} == {"minutes.md": "completed"}
    assert _found(quire, "plostarine") == ["minutes.md"] and _found(quire, "gorvelish") == ["minutes.eml"]
    assert sorted(_children(quire, items["crane.msg"])) == ["plan.txt"] and _found(quire, "yandorel") == ["plan.txt"]

    refused = _children(quire, items["hostile.zip"])
    assert {name: (status, code) for name, (_i, status, code) in refused.items()} == {
        "../f.txt": ("failed", "unreadable"),
        "zeros.txt": ("failed", "decompression_bomb"),
    }
    assert not (tmp_path / "f.txt").exists() and not (folder.parent / "f.txt").exists()
    with quire.db.read() as conn:
        status, code = conn.execute(
            text("SELECT status, error_code FROM items WHERE id = :i"), {"i": items["hostile.zip"]}
        ).one()
        messages = [r[0] for r in conn.execute(text("SELECT error_message FROM items WHERE error_message IS NOT NULL"))]
    assert (status, code) == ("failed", "children_failed")
    assert all(str(tmp_path) not in m for m in messages)

    # a reindex of the folder keeps an unchanged archive's children as they are
    operations.reindex_items(quire, "kb", [items["docs"]])
    drain(quire)
    assert _children(quire, items["bundle.zip"]) == bundle

    # the archive changes on disk: its children are re-derived, the one it no longer holds is gone
    (folder / "bundle.zip").write_bytes(_bundle(with_notes=False))
    os.utime(folder / "bundle.zip", (1_700_000_000, 1_700_000_000))
    operations.reindex_items(quire, "kb", [items["docs"]])
    drain(quire)
    changed = _children(quire, items["bundle.zip"])
    assert sorted(changed) == ["report.pdf"] and changed["report.pdf"][0] != bundle["report.pdf"][0]
    assert _found(quire, "vantrelish") == []
    assert _found(quire, "quillomet") == ["report.pdf"]

    # deleting the archive deletes its children: rows, search material and owned copies
    before = material_counts(quire, base.id)
    operations.delete_items(quire, "kb", [items["bundle.zip"]])
    assert _found(quire, "quillomet") == []  # hidden from the moment the delete commits
    drain(quire)
    assert _children(quire, items["bundle.zip"]) == {}
    after = material_counts(quire, base.id)
    assert after["chunks"] < before["chunks"] and after["chunks"] == after["vectors"] == after["keywords"]
    with quire.db.read() as conn:
        orphans = conn.execute(
            text("SELECT count(*) FROM chunks c LEFT JOIN items i ON i.id = c.item_id WHERE i.id IS NULL")
        ).scalar_one()
    assert orphans == 0


def test_an_archive_commits_its_members_with_their_jobs(
    quire: Quire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The moment the archive's commit returns, every member it created has a pending job attached: a worker
    killed right after that commit (before anything else runs) leaves nothing that no job will advance."""
    from knowledge.lifecycle import index_documents

    make_base(quire)
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(zip_of({f"n{i}.md": f"# N{i}\n\nThe zelvorin note {i}.\n".encode() for i in range(12)}))
    seen_after_commit: list[list[tuple[str, int | None, str | None]]] = []
    real_commit = index_documents._commit_in_one_transaction

    def commit_then_look(*args: object, **kwargs: object) -> int:
        written = real_commit(*args, **kwargs)  # type: ignore[arg-type]
        with quire.db.read() as conn:
            rows = conn.execute(
                text(
                    "SELECT i.name, i.job_id, j.status FROM items i LEFT JOIN jobs j ON j.id = i.job_id"
                    " WHERE i.parent_id IS NOT NULL AND i.status NOT IN ('completed', 'skipped', 'failed')"
                )
            ).all()
        seen_after_commit.append([(r.name, r.job_id, r.status) for r in rows])
        return written

    monkeypatch.setattr(index_documents, "_commit_in_one_transaction", commit_then_look)
    operations.add_items(quire, "kb", [PathInput(archive)])
    drain(quire)

    members_at_archive_commit = seen_after_commit[0]
    assert len(members_at_archive_commit) == 12
    assert all(job_id is not None and status == "pending" for _name, job_id, status in members_at_archive_commit)
    assert _found(quire, "zelvorin") and len(_children(quire, _by_path(quire)["bundle.zip"])) == 12
