"""Inline code spans hide ``#tags`` and ``[[links]]`` in Markdown, found in one pass over the line."""

from __future__ import annotations

from knowledge.sources import parse_bytes
from knowledge.sources.markdown import without_code_spans


def test_a_span_runs_to_the_next_run_of_backticks_of_its_own_length() -> None:
    assert without_code_spans("a `#x` b") == "a   b"
    assert without_code_spans("`` a ` b `` #t") == "  #t"  # a shorter run inside does not close it
    assert without_code_spans("``x` #t") == "``x` #t"  # no run of two closes it: nothing is code
    assert without_code_spans("`unclosed #tag") == "`unclosed #tag"
    assert without_code_spans("``x`` `y` ```z``` #q") == "      #q"


def test_tags_and_links_in_code_are_not_marks_and_a_long_line_of_backticks_is_read() -> None:
    body = (
        "# Notes\n\nA #kept tag, `#hidden` code and [[Real Page]] with `[[Not A Link]]`.\n"
        + "Then "
        + "`" * 20_000  # a run of backticks no run closes: the old pattern took minutes on such a line
        + " #after\n"
    )
    parsed = parse_bytes(body.encode(), name="notes.md")
    assert parsed.metadata["tags"] == "kept, after"
    assert parsed.metadata["links"] == "Real Page"
