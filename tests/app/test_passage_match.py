"""Locating a passage extracted by one library on a page whose text came from another."""

from __future__ import annotations

from app.passage_match import fold, match_on_page

PAGE = 'Intro line here.\r\nThe ﬁrst passage of the page,\r\nit runs on to\r\nthe last line and "ends."'


def _text(first: int, last: int) -> str:
    return PAGE[first : last + 1]


def test_a_passage_is_found_despite_other_whitespace_ligatures_and_case() -> None:
    match = match_on_page(fold(PAGE), "the first PASSAGE of the page, it runs on")
    assert match is not None and match.remainder == ""
    assert _text(match.first, match.last) == "The ﬁrst passage of the page,\r\nit runs on"


def test_punctuation_that_clings_to_the_ends_is_covered() -> None:
    match = match_on_page(fold(PAGE), "the last line and ends")
    assert match is not None and _text(match.first, match.last) == 'the last line and "ends."'


def test_a_passage_running_on_to_the_next_page_keeps_its_remainder_for_it() -> None:
    match = match_on_page(fold(PAGE), 'the last line and "ends."\n\nNext page begins here')
    assert match is not None and _text(match.first, match.last).startswith("the last line")
    assert match.remainder == "nextpagebeginshere"
    following = fold("Next page begins here, and more.")
    rest = match_on_page(following, match.remainder, continued=True)
    assert rest is not None and (rest.first, rest.last) == (0, len("Next page begins here,") - 1)


def test_a_passage_not_on_the_page_is_not_found() -> None:
    assert match_on_page(fold(PAGE), "nothing of this stands anywhere on that page at all") is None
    assert match_on_page(fold(""), "anything") is None


def test_a_few_differing_characters_still_locate_the_passage() -> None:
    match = match_on_page(fold(PAGE), "The first passage of the paqe, it runs on to the last line")
    assert match is not None and _text(match.first, match.last).startswith("The ﬁrst")
    assert _text(match.first, match.last).endswith("the last line")
