"""HTML: visible text with block structure, declared charset, metadata."""

from __future__ import annotations

import pytest

from knowledge.sources import SourceRejected, parse_bytes, parse_source

from .conftest import Writer, assert_tiles

PAGE = """<!DOCTYPE html>
<html lang="de-CH">
<head>
  <meta charset="utf-8">
  <title>  Garden
     Diary </title>
  <meta name="Author" content="Ann Gardener">
  <meta name="description" content="Notes from the garden.">
  <meta name="keywords" content="spam, spam">
  <meta name="generator" content="SiteBuilder 9">
  <style>body { color: red; }</style>
  <script>var secret = "tracking";</script>
</head>
<body>
  <noscript>Enable JavaScript</noscript>
  <h1>Spring   planting</h1>
  <p>Tomatoes, <b>basil</b> and
     beans.</p>
  <ul><li>one</li><li>two</li></ul>
  <table><tr><th>Plant</th><th>Day</th></tr><tr><td>Basil</td><td>Monday</td></tr></table>
  <pre>  indented
    code</pre>
  <div hidden>invisible</div>
  <p>Line<br>break &amp; entity&nbsp;here</p>
  <!-- a comment -->
  <script>document.write("more tracking")</script>
</body>
</html>
"""


def test_visible_text_keeps_blocks_and_drops_scripts(write: Writer) -> None:
    parsed = parse_source(write("diary.html", PAGE.encode()))
    assert parsed.text == (
        "Spring planting\n\n"
        "Tomatoes, basil and beans.\n\n"
        "one\ntwo\n\n"
        "Plant\tDay\nBasil\tMonday\n\n"
        "  indented\n    code\n\n"
        "Line\nbreak & entity here"  # a no-break space is collapsed like any other space
    )
    for hidden in ("tracking", "color", "Enable JavaScript", "invisible", "comment", "Garden"):
        assert hidden not in parsed.text
    assert (parsed.parser, parsed.mime) == ("html", "text/html")
    assert len(parsed.segments) == 1 and parsed.segments[0].page is None
    assert_tiles(parsed)


def test_metadata_is_title_language_author_description(write: Writer) -> None:
    parsed = parse_source(write("diary.htm", PAGE.encode()))
    assert parsed.metadata == {
        "encoding": "utf-8", "title": "Garden Diary", "language": "de-CH",
        "author": "Ann Gardener", "description": "Notes from the garden.",
    }  # fmt: skip


def test_declared_charset_is_honoured() -> None:
    page = '<html><head><meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1"></head>'
    data = page.encode() + b"<body><p>Caf\xe9 \x93quoted\x94</p></body></html>"
    parsed = parse_bytes(data, name="old.html")
    assert parsed.text == "Café “quoted”"
    assert parsed.metadata["encoding"] == "cp1252"


def test_page_without_visible_text_is_no_text() -> None:
    with pytest.raises(SourceRejected) as info:
        parse_bytes(b"<html><head><title>t</title><script>x()</script></head><body> </body></html>", name="a.html")
    assert info.value.code == "no_text"


def test_xhtml_with_self_closing_title() -> None:
    page = b'<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title/></head>'
    page += b"<body><p>Hi&#160;there</p></body></html>"
    parsed = parse_bytes(page, name="page.xhtml")
    assert parsed.text == "Hi there"
    assert parsed.mime == "application/xhtml+xml" and parsed.metadata["title"] is None


def test_deeply_nested_markup_does_not_hit_the_recursion_limit() -> None:
    depth = 5000
    parsed = parse_bytes(("<div>" * depth + "deep text" + "</div>" * depth).encode(), name="deep.html")
    assert parsed.text == "deep text"


@pytest.mark.parametrize("label", ["unicode_escape", "punycode", "no-such-charset", "utf-16"])
def test_unsafe_or_bogus_declared_charset_is_ignored(label: str) -> None:
    page = f'<meta charset="{label}"><p>caf\\u00e9 ok</p>'.encode()
    assert parse_bytes(page, name="a.html").text == "caf\\u00e9 ok"
