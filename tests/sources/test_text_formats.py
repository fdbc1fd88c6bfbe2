"""Plain text, Markdown, source code and notes: decoding, refusals, line segments, metadata."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from knowledge.sources import SourceRejected, parse_bytes, parse_note, parse_source

from .builders import PNG_BYTES
from .conftest import Writer, assert_tiles, rejected, segment_at


def test_utf8_text_has_one_segment_per_source_line(write: Writer) -> None:
    parsed = parse_source(write("notes.txt", b"first line\r\nsecond\r\n\r\nfourth"))
    assert parsed.text == "first line\nsecond\n\nfourth"
    assert (parsed.parser, parsed.parser_version, parsed.mime) == ("text", "text-3", "text/plain")
    assert [(s.line_start, s.line_end, s.page) for s in parsed.segments] == [
        (1, 1, None), (2, 2, None), (3, 3, None), (4, 4, None),
    ]  # fmt: skip
    assert_tiles(parsed)
    assert parsed.metadata == {"encoding": "utf-8"}


def test_latin1_text_is_decoded_as_western(write: Writer) -> None:
    source = "Café crème brûlée, naïve façade.\nGrüße aus München.\n"
    parsed = parse_source(write("legacy.txt", source.encode("latin-1")))
    assert parsed.text == source
    assert parsed.metadata["encoding"] == "cp1252"


def test_utf16_with_bom(write: Writer) -> None:
    parsed = parse_source(write("wide.txt", "Ünïcödé text\r\nline two\r\n".encode("utf-16")))
    assert parsed.text == "Ünïcödé text\nline two\n"
    assert parsed.metadata["encoding"] == "utf-16"
    assert segment_at(parsed, "line two").line_start == 2


def test_utf16_without_bom_is_recognised() -> None:
    parsed = parse_bytes("plain ascii in utf-16\nsecond line\n".encode("utf-16-le"), name="w.txt")
    assert parsed.text.startswith("plain ascii in utf-16")


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Zażółć gęślą jaźń. Litwo! Ojczyzno moja! ty jesteś jak zdrowie, ile cię trzeba cenić.\n", "cp1250"),
        ("Съешь же ещё этих мягких французских булок, да выпей чаю. Это тестовый текст.\n", "cp1251"),
        ("日本語のテキストです。これはテストです。いろはにほへと ちりぬるを わかよたれそ\n", "shift_jis"),
    ],
)
def test_other_legacy_encodings_round_trip(text: str, encoding: str) -> None:
    assert parse_bytes(text.encode(encoding), name="x.txt").text == text


def test_mostly_utf8_with_one_bad_byte_is_repaired() -> None:
    data = ("naïve café " * 50).encode() + b"\xff" + b" end\n"
    parsed = parse_bytes(data, name="log.log")
    assert parsed.metadata["encoding"] == "utf-8 (repaired)"
    assert "\ufffd end" in parsed.text


def test_implausible_bytes_are_invalid_encoding(write: Writer) -> None:
    # High bytes only: not UTF-8, undefined in cp1252 (0x81...), and charset-normalizer finds no match.
    error = rejected(write("garbage.txt", b"header: " + bytes(range(0x80, 0x100)) * 8))
    assert error.code == "invalid_encoding"


def test_png_renamed_to_txt_is_binary(write: Writer) -> None:
    assert rejected(write("image.txt", PNG_BYTES)).code == "binary"


def test_control_characters_without_nul_are_binary() -> None:
    with pytest.raises(SourceRejected) as info:
        parse_bytes(bytes([1, 2, 3, 4, 5, 6, 7, 65]) * 100, name="x.txt")
    assert info.value.code == "binary"


@pytest.mark.parametrize("data", [b"", b"  \n\t\r\n  ", codecs.BOM_UTF8 + b"\n", " \n".encode("utf-16")])
def test_empty_and_whitespace_only(write: Writer, data: bytes) -> None:
    assert rejected(write("blank.txt", data)).code == "empty"


def test_text_is_cleaned_of_controls_and_foreign_line_breaks() -> None:
    # A NUL after the 8 KiB sniffing window is dropped, not a reason to call the file binary.
    head = b"x" * 9000 + b"\n"
    parsed = parse_bytes(head + b"a\x00b\tc\x0cd\x1be\nnext\x0bline\r\n", name="x.txt")
    assert parsed.text[len(head) :] == "ab\tc de\nnext line\n"
    assert parsed.text.splitlines() == parsed.text.split("\n")[:-1]


def test_markdown_front_matter_title_and_source_line_numbers(write: Writer) -> None:
    source = (
        "---\n"
        'title: "Field Notes"\n'
        "author: [Ann, Bob]\n"
        "date: 2024-03-01\n"
        "tags:\n"
        "  - birds\n"
        "  - spring # a comment\n"
        "secret: do-not-store\n"
        "---\n"
        "# Morning walk\n"
        "Saw a heron.\n"
        "```sh\n"
        "# not a heading\n"
        "```\n"
        "## Afternoon ##\n"
    )
    parsed = parse_source(write("walk.md", source.encode()))
    assert parsed.parser == "markdown" and parsed.mime == "text/markdown"
    assert parsed.metadata == {
        "encoding": "utf-8", "title": "Field Notes", "author": "Ann; Bob", "date": "2024-03-01",
        "tags": "birds, spring", "heading_count": 2, "created": None, "modified": None, "aliases": None,
        "links": None,
    }  # fmt: skip
    assert "secret" not in parsed.text and "do-not-store" not in parsed.text
    assert parsed.text.startswith("# Morning walk\n")
    assert segment_at(parsed, "Saw a heron").line_start == 11
    assert_tiles(parsed)


def test_markdown_vault_tags_aliases_dates_and_wiki_links() -> None:
    source = (
        "---\n"
        "aliases: [Heron log, HL]\n"
        "tag: '#birds'\n"
        "created: 2024-03-01T08:00\n"
        "lastmod: 2024-03-02\n"
        "---\n"
        "# Walk #not-in-heading-start\n"
        "Saw a heron #Birds #wading/heron by [[River Path]] and [[Old Mill|the mill]].\n"
        "See ![[map.png]], [[River Path#Bridge]] and issue #42 at http://x.org/#frag or C#.\n"
        "`#code-tag [[Code Link]]` stays code.\n"
        "```\n"
        "#fenced [[Fenced Link]]\n"
        "```\n"
    )
    metadata = parse_bytes(source.encode(), name="heron.md").metadata
    assert metadata["tags"] == "birds, not-in-heading-start, wading/heron"  # once each, case-insensitive
    assert metadata["aliases"] == "Heron log, HL"
    assert metadata["links"] == "River Path | Old Mill | map.png"
    assert (metadata["created"], metadata["modified"]) == ("2024-03-01T08:00", "2024-03-02")


def test_markdown_title_falls_back_to_first_heading() -> None:
    parsed = parse_bytes(b"Intro text\n\n#hashtag is not a heading\n## The Title ##\nbody\n", name="n.markdown")
    assert parsed.metadata["title"] == "The Title"
    assert parsed.metadata["heading_count"] == 1
    assert parsed.metadata["author"] is None


def test_markdown_block_scalar_and_unclosed_front_matter() -> None:
    block = parse_bytes(b"---\ntitle: >\n  A folded\n  title\n---\nbody\n", name="a.md")
    assert block.metadata["title"] == "A folded title"
    unclosed = parse_bytes(b"---\ntitle: x\nno closing fence\n", name="b.md")
    assert unclosed.text.startswith("---\n") and unclosed.metadata["title"] is None


def test_markdown_with_only_front_matter_is_empty() -> None:
    with pytest.raises(SourceRejected) as info:
        parse_bytes(b"---\ntitle: Only\n---\n\n", name="a.md")
    assert info.value.code == "empty"


def test_code_file_language_and_lines(write: Writer) -> None:
    parsed = parse_source(write("tool.py", b"import os\n\n\ndef main() -> None:\n    print(os.sep)\n"))
    assert (parsed.parser, parsed.metadata) == ("code", {"encoding": "utf-8", "language": "python"})
    assert segment_at(parsed, "print").line_start == 5
    assert parse_bytes(b'{"a": 1}', name="DATA.JSON").metadata["language"] == "json"


def test_note_is_parsed_line_by_line() -> None:
    parsed = parse_note("Buy milk\r\nCall Ann\n", title="  Todo\n list ")
    assert parsed.text == "Buy milk\nCall Ann\n"
    assert (parsed.parser, parsed.parser_version, parsed.metadata) == ("note", "note-1", {"title": "Todo list"})
    assert [s.line_start for s in parsed.segments] == [1, 2]
    assert parse_note("x", title=None).metadata == {"title": None}
    with pytest.raises(SourceRejected) as info:
        parse_note(" \n ", title="t")
    assert info.value.code == "empty"


def test_large_text_file_parses_quickly(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"2024-01-01 12:00:00 INFO something happened here\n" * 100_000)
    parsed = parse_source(path)
    assert len(parsed.segments) == 100_000
    assert parsed.segments[-1].line_start == 100_000
