"""One undecodable byte in a long, mostly UTF-8 file is replaced, not a refusal of the whole file (issue 44
item 5: a 1.2 MB changelog with one Latin-1 byte was refused as ``invalid_encoding``)."""

from __future__ import annotations

import random

from knowledge.sources import parse_source

from .conftest import Writer, rejected, segment_at


def _changelog(size: int) -> str:
    """Debian-style entries, ASCII but for a maintainer's accented name now and then (a few dozen
    multi-byte characters in the first 64 KiB, too few to outweigh one bad byte before the fix)."""
    rnd = random.Random(7)
    names = ["Jörg Müller", "Zoë Łukasiewicz", "Anne Smith", "Bob Jones", "Carl Berg", "Dana White"]
    entries: list[str] = []
    total, version = 0, 0
    while total < size:
        version += 1
        lines = [f"quire (1.{version}.0-1) unstable; urgency=medium\n\n"]
        lines += [
            f"  * Fixed the {rnd.choice(['parser', 'indexer', 'worker'])} when a {rnd.choice(['big', 'odd'])} "
            f"file grows during a scan (closes: #{rnd.randint(1000, 99999)}).\n"
            for _ in range(rnd.randint(3, 12))
        ]
        lines.append(f"\n -- {rnd.choice(names)} <dev@example.org>  Mon, 01 Jan 2024 12:00:00 +0000\n\n")
        entries.append("".join(lines))
        total += len(entries[-1])
    return "".join(entries)


def test_one_latin1_byte_in_a_long_utf8_changelog_is_replaced(write: Writer) -> None:
    text = _changelog(1_200_000)
    middle = text.index("  * Fixed", len(text) // 2)
    data = text[:middle].encode() + b"  * Caf\xe9 menu.\n" + text[middle:].encode()
    parsed = parse_source(write("changelog.txt", data))
    assert parsed.metadata["encoding"] == "utf-8 (repaired)"
    assert parsed.text.count("\ufffd") == 1 and "Caf\ufffd menu." in parsed.text
    assert parsed.text.count("Jörg Müller") == text.count("Jörg Müller") > 100  # the UTF-8 stays UTF-8
    assert segment_at(parsed, "Caf\ufffd menu.").line_start == text[:middle].count("\n") + 1


def test_one_stray_byte_in_a_short_utf8_note_is_replaced(write: Writer) -> None:
    """A few lines: one replacement character is over 1% of them, and two valid characters against one
    undecodable byte is evidence enough; cp1252 cannot have it (0x9D in the closing quote)."""
    before, after = "Élève\u2019s notes: \u201cCaf", " au lait\u201d \u2014 twice.\n"
    parsed = parse_source(write("NOTES", before.encode() + b"\xe9" + after.encode()))
    assert (parsed.metadata["encoding"], parsed.text) == ("utf-8 (repaired)", f"{before}\ufffd{after}")


def test_a_stray_byte_past_the_detection_sample_of_an_ascii_log_is_replaced(write: Writer) -> None:
    """Nothing to weigh it against (no multi-byte characters), not Western text (0x81 is undefined in
    cp1252), and charset-normalizer sees only ASCII: one byte in a thousand or fewer is replaced."""
    data = b"2024-01-01 12:00:00 worker started, nothing to do\n" * 8000 + b"odd \x81 byte\n"
    parsed = parse_source(write("worker.log", data))
    assert parsed.metadata["encoding"] == "utf-8 (repaired)"
    assert parsed.text.endswith("odd \ufffd byte\n")


def test_latin1_text_and_garbage_are_not_taken_for_broken_utf8(write: Writer) -> None:
    latin1 = _changelog(20_000).replace("Ł", "L").encode("latin-1")
    assert parse_source(write("legacy.txt", latin1)).metadata["encoding"] == "cp1252"
    garbage = b"header: " + bytes(range(0x80, 0x100)) * 200
    assert rejected(write("garbage.txt", garbage)).code == "invalid_encoding"
