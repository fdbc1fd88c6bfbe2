"""E-mail headers are bounded before the email parser, whose structured-header parsing is superlinear."""

from __future__ import annotations

import time

from knowledge.sources import parse_source
from knowledge.sources.members import attachments

from .conftest import Writer, rejected
from .office_builders import make_eml

_BODY = b"\r\nThe harbour meeting is moved.\r\n"


def _timed_parse(write: Writer, name: str, data: bytes) -> tuple[str, float]:
    started = time.monotonic()
    parsed = parse_source(write(name, data))
    return parsed.text, time.monotonic() - started


def test_a_crafted_address_or_content_type_header_parses_in_bounded_time(write: Writer) -> None:
    # 24 KB of commas in To took the parser ~10 s; 12 KB of semicolons in Content-Type ~15 s.
    commas = b"Subject: harbour\r\nFrom: ada@example.org\r\nTo: grace@example.org" + b"," * 24_000 + b"\r\n"
    text, seconds = _timed_parse(write, "commas.eml", commas + _BODY)
    assert "harbour meeting" in text and "grace@example.org" in text and seconds < 3.0
    semis = b"Subject: harbour\r\nContent-Type: text/plain" + b";" * 12_000 + b"\r\n"
    text, seconds = _timed_parse(write, "semis.eml", semis + _BODY)
    assert "harbour meeting" in text and seconds < 3.0
    started = time.monotonic()
    assert attachments(semis + _BODY, "semis.eml", max_bytes=1 << 20).members == []
    assert time.monotonic() - started < 3.0


def test_a_header_block_over_the_limits_is_too_large(write: Writer) -> None:
    many = b"Subject: s\r\n" + b"".join(b"X-Note-%d: v\r\n" % n for n in range(1500))
    assert rejected(write("many.eml", many + _BODY)).code == "too_large"
    folded = b"Subject: s\r\n" + b" more words\r\n" * 30_000
    assert rejected(write("folded.eml", folded + _BODY)).code == "too_large"


def test_ordinary_messages_and_a_header_only_message_still_read(write: Writer) -> None:
    parsed = parse_source(write("ok.eml", make_eml("Budget for Q3", plain="the budget is approved.\n")))
    assert parsed.metadata["subject"] == "Budget for Q3" and "approved" in parsed.text
    assert parse_source(write("bare.eml", b"Subject: only a subject")).metadata["subject"] == "only a subject"
