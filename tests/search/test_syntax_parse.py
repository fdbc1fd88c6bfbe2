"""The parser alone (pure): what counts as an identifier, quotes, filters that combine."""

from __future__ import annotations

import pytest

from knowledge.errors import InvalidInput
from knowledge.search.keyword_query import fts_query
from knowledge.search.query import _looks_up
from knowledge.search.syntax import Filters, parse


@pytest.mark.parametrize(
    ("token", "kind"),
    [
        ("10.1000/xyz123", "identifier"),
        ("ABC-1234", "identifier"),
        ("report_v2.pdf", "identifier"),
        ("parse_query", "identifier"),
        ("Foo::bar", "identifier"),
        ("parseQuery", "identifier"),
        ("COVID-19", "identifier"),
        ("T-cell", "word"),
        ("e.g.", "word"),
        ("U.S.", "word"),
        ("harbour,", "word"),
    ],
)
def test_identifiers_are_told_from_words(token: str, kind: str) -> None:
    parsed = parse(token)
    assert (parsed.identifiers if kind == "identifier" else parsed.words) != ()


def test_a_call_is_a_symbol_and_curly_quotes_make_a_phrase() -> None:
    assert parse("run()").identifiers == ("run",)
    assert parse("\u201ctidal silt\u201d budget").phrases == ("tidal silt",)


def test_identifiers_reach_fts_whole_and_phrases_are_required() -> None:
    # the stopword "is" is dropped as a word, but the ticket reaches FTS5 whole as one phrase
    assert fts_query(parse("IS-42 the report")) == '"IS-42" OR "report" OR "42"'
    assert fts_query(parse('"silt budget" harbour')) == '("silt budget") AND ("silt budget" OR "harbour")'


def test_the_windows_filters_narrow_the_typed_ones() -> None:
    typed = parse("harbour type:pdf after:2024").filters
    assert typed.narrowed(Filters(types=frozenset({"markdown"}))).types == frozenset()
    assert typed.narrowed(Filters()).types == frozenset({"pdf"})
    assert typed.narrowed(Filters(after=typed.after + 10)).after == typed.after + 10  # type: ignore[operator]


def test_only_a_short_query_ranks_exact_identifiers_first() -> None:
    assert _looks_up(parse("ABC-1234 silt survey"))
    assert not _looks_up(parse("IL-6 levels rise in patients with severe sepsis after surgery"))
    assert not _looks_up(parse("silt survey"))


def test_a_malformed_query_is_a_message() -> None:
    with pytest.raises(InvalidInput, match="unmatched quote"):
        parse('"open')


def test_filters_alone_are_a_query_and_exclusions_alone_are_not() -> None:
    assert parse("tag:pottery").filters_only and parse("type:pdf after:2024-01 -draft").filters_only
    assert not parse("pottery tag:pottery").filters_only
    with pytest.raises(InvalidInput, match="only exclusions"):
        parse("-draft -copy")


def test_tags_and_senders_are_filters_that_widen() -> None:
    filters = parse('harbour tag:#Project/Harbour tag:dredging from:"Ana Ruiz" FROM:lab@example.org').filters
    assert filters.tags == ("project/harbour", "dredging")
    assert filters.senders == ("ana ruiz", "lab@example.org")
    assert parse("harbour tag:x").filters.narrowed(Filters(tags=("y",))).tags == ("x", "y")
    assert parse("harbour").filters.empty and not parse("harbour tag:x").filters.empty
    assert parse("sent from:here").filters.senders == ("here",)
