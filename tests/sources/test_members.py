"""The files inside containers and the attachments of messages, read in memory (knowledge/sources/members.py);
each member then parses like a file. Hostile archives: tests/security/test_crafted_archives.py."""

from __future__ import annotations

import gzip

from knowledge.sources import parse_bytes
from knowledge.sources.members import Member, attachments, container_kind, unpack
from tests.sources.builders import make_pdf, tar_of, zip_of
from tests.sources.office_builders import make_eml, make_msg

LIMIT = 50 * 1024 * 1024


def by_name(members: list[Member]) -> dict[str, bytes]:
    return {m.name: m.data for m in members}


def test_a_zip_holding_a_pdf_and_notes_in_a_folder_and_a_nested_zip() -> None:
    pdf = make_pdf([["The quillomet survey, page one."]])
    inner = zip_of({"deep/notes.md": b"# Inner\n\nThe vantrelish note.\n"})
    found = unpack(
        zip_of({"report.pdf": pdf, "docs/": b"", "docs/a.txt": b"plain words", "inner.zip": inner}),
        "x.zip",
        max_bytes=LIMIT,
    )
    assert by_name(found.members) == {  # the inner zip is a member: its own child, unpacked in its turn
        "report.pdf": pdf,
        "docs/a.txt": b"plain words",
        "inner.zip": inner,
    }
    assert by_name(unpack(inner, "inner.zip", max_bytes=LIMIT).members) == {
        "deep/notes.md": b"# Inner\n\nThe vantrelish note.\n"
    }
    assert found.refused == []
    parsed = parse_bytes(by_name(found.members)["report.pdf"], name="report.pdf")  # read like a file
    assert "quillomet" in parsed.text and parsed.segments[0].page == 1


def test_tar_plain_and_compressed() -> None:
    files = {"a/b.txt": b"tar words", "c.md": b"# C\n"}
    for name, data in (
        ("x.tar", tar_of(files)),
        ("x.tar.gz", tar_of(files, "w:gz")),
        ("x.tgz", gzip.compress(tar_of(files))),
        ("x.tar.xz", tar_of(files, "w:xz")),
    ):
        assert container_kind(name) == "tar"
        assert by_name(unpack(data, name, max_bytes=LIMIT).members) == files, name


def test_a_mailbox_of_three_messages_each_an_eml() -> None:
    messages = [make_eml(f"Note {n}", plain=f"Body {n}.\nFrom the harbour.\n>From quoted.\n") for n in (1, 2, 3)]
    mbox = b"".join(
        b"From ada@example.org Tue Mar  5 10:30:00 2024\n"
        + m.replace(b"\r\n", b"\n").replace(b"\nFrom ", b"\n>From ")
        + b"\n"
        for m in messages
    )
    found = unpack(mbox, "inbox.mbox", max_bytes=LIMIT)
    assert [m.name for m in found.members] == ["message 0001.eml", "message 0002.eml", "message 0003.eml"]
    second = parse_bytes(found.members[1].data, name=found.members[1].name)
    assert second.metadata["subject"] == "Note 2" and "From the harbour." in second.text
    assert "\nFrom quoted." in second.text  # mboxrd: one ">" of an escaped From line is taken off


def test_attachments_of_an_eml_and_a_msg() -> None:
    eml = make_eml("Report", plain="See attached.", attachment=b"%PDF-not-really")
    assert by_name(attachments(eml, "m.eml", max_bytes=LIMIT).members) == {"a.bin": b"%PDF-not-really"}
    msg = make_msg(
        "Report", plain="See attached.", attachments=(("minutes.md", b"# Minutes\n"), ("sub/../../x.txt", b"x"))
    )
    found = attachments(msg, "m.msg", max_bytes=LIMIT)
    assert by_name(found.members) == {"minutes.md": b"# Minutes\n"}
    assert [r.code for r in found.refused] == ["unreadable"]


def test_a_member_over_the_file_limit_is_refused_by_itself() -> None:
    found = unpack(zip_of({"big.txt": b"word " * 1000, "small.txt": b"ok"}), "x.zip", max_bytes=1000)
    assert by_name(found.members) == {"small.txt": b"ok"}
    assert [(r.name, r.code) for r in found.refused] == [("big.txt", "too_large")]


NESTED = b"""From: Ada <ada@example.org>\r
To: Grace <grace@example.org>\r
Subject: Bundle\r
MIME-Version: 1.0\r
Content-Type: multipart/mixed; boundary="outer"\r
\r
--outer\r
Content-Type: text/plain\r
\r
The bundle is attached.\r
--outer\r
Content-Type: multipart/mixed; boundary="inner"\r
Content-Disposition: attachment\r
\r
--inner\r
Content-Type: text/plain\r
\r
A note inside the bundle.\r
--inner\r
Content-Type: text/markdown; charset=x-unknown-charset\r
Content-Disposition: attachment; filename="plan.md"\r
\r
# The zorvanite plan\r
--inner--\r
--outer--\r
"""


def test_an_attachment_that_is_itself_multipart_gives_its_files_and_the_message_its_body() -> None:
    found = attachments(NESTED, "m.eml", max_bytes=LIMIT)
    assert by_name(found.members) == {"plan.md": b"# The zorvanite plan"}  # unknown charset: raw bytes kept
    message = parse_bytes(NESTED, name="bundle.eml")
    assert "The bundle is attached." in message.text and [m.name for m in message.members] == ["plan.md"]
