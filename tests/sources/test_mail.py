"""Saved e-mail (.eml): header fields as metadata, the plain body preferred, HTML converted."""

from __future__ import annotations

from knowledge.sources import parse_source

from .conftest import Writer, assert_tiles, rejected
from .office_builders import make_eml, make_msg


def test_plain_body_and_header_metadata(write: Writer) -> None:
    data = make_eml("Budget for Q3", plain="Hello Grace,\n\nthe budget is approved.\n", html="<p>IGNORED html twin</p>")
    parsed = parse_source(write("budget.eml", data))
    assert parsed.text == (
        "Subject: Budget for Q3\nFrom: Ada Lovelace <ada@example.org>\nTo: Grace Hopper <grace@example.org>\n"
        "Date: 2024-03-05T10:30:00+01:00\n\nHello Grace,\n\nthe budget is approved."
    )
    assert parsed.metadata == {
        "subject": "Budget for Q3", "from": "Ada Lovelace <ada@example.org>",
        "to": "Grace Hopper <grace@example.org>", "cc": None, "date": "2024-03-05T10:30:00+01:00",
    }  # fmt: skip
    assert "secret@example.org" not in parsed.text  # Bcc is excluded (census)
    assert (parsed.parser, parsed.mime) == ("mail", "message/rfc822") and len(parsed.segments) == 2
    assert_tiles(parsed)


def test_html_only_body_is_converted(write: Writer) -> None:
    html = (
        "<html><head><style>p{}</style></head><body><p>Meet at the <b>harbour</b>.</p><p>Bring maps.</p></body></html>"
    )
    parsed = parse_source(write("meet.eml", make_eml("Meeting", html=html, attachment=b"\x00\x01")))
    assert parsed.text.endswith("Meet at the harbour.\n\nBring maps.")
    assert "p{}" not in parsed.text and "a.bin" not in parsed.text


def test_encoded_headers_unknown_charset_and_bad_date(write: Writer) -> None:
    data = (
        b"Subject: =?utf-8?q?Caf=C3=A9_notes?=\r\nFrom: x@example.org\r\nDate: not a date\r\n"
        b"Content-Type: text/plain; charset=x-unknown-charset\r\n\r\nBody with caf\xc3\xa9.\r\n"
    )
    parsed = parse_source(write("odd.eml", data))
    assert parsed.metadata["subject"] == "Café notes" and parsed.metadata["date"] == "not a date"
    assert parsed.text.endswith("Body with café.")


def test_binary_and_empty_messages(write: Writer) -> None:
    assert rejected(write("x.eml", b"\x89PNG\r\n\x1a\n\x00\x00\x00")).code == "binary"
    assert rejected(write("y.eml", b"X-Nothing: here\r\n\r\n   \r\n")).code == "no_text"


# -- Outlook .msg (extract-msg) ------------------------------------------------------------------------


def test_msg_plain_body_and_fields_from_its_properties(write: Writer) -> None:
    data = make_msg(
        "Budget for Q3",
        plain="Hello Grace,\r\n\r\nthe budget is approved.\r\n",
        to=(("Grace Hopper", "grace@example.org"), ("Linus", "linus@example.org")),
        attachments=(("notes.txt", b"attached words"),),
    )
    parsed = parse_source(write("budget.msg", data))
    assert parsed.text == (
        "Subject: Budget for Q3\nFrom: Ada Lovelace <ada@example.org>\n"
        "To: Grace Hopper <grace@example.org>; Linus <linus@example.org>\n"
        "Date: 2024-03-05T09:30:00+00:00\n\nHello Grace,\n\nthe budget is approved."
    )
    assert parsed.metadata == {
        "subject": "Budget for Q3", "from": "Ada Lovelace <ada@example.org>",
        "to": "Grace Hopper <grace@example.org>; Linus <linus@example.org>", "cc": None,
        "date": "2024-03-05T09:30:00+00:00",
    }  # fmt: skip
    assert "secret@example.org" not in parsed.text and "attached words" not in parsed.text  # census
    assert (parsed.parser, parsed.mime) == ("outlook", "application/vnd.ms-outlook") and len(parsed.segments) == 2
    assert_tiles(parsed)


def test_msg_html_only_body_is_converted(write: Writer) -> None:
    html = "<html><head><style>p{}</style></head><body><p>Meet at the <b>harbour</b>.</p><p>Bring maps.</p></body>"
    parsed = parse_source(write("meet.msg", make_msg("Meeting", html=html)))
    assert parsed.text.endswith("Meet at the harbour.\n\nBring maps.") and "p{}" not in parsed.text


def test_msg_that_is_not_one(write: Writer) -> None:
    real = make_msg("Budget", plain="body")
    assert rejected(write("short.msg", b"just some words, not a compound file")).code == "parse_error"
    damaged = rejected(write("cut.msg", real[: len(real) // 3]))
    assert damaged.code == "parse_error" and "Outlook message" in damaged.reason
