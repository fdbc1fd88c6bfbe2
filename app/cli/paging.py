"""Paging of every listing: ``--limit N`` (default 1000) rows after ``--after CURSOR`` (a row id), in the
listing's order: ascending ids, except ``proposals list`` (newest first, so its next page holds older ones).

``--json`` answers carry ``next``: the cursor to pass as ``--after`` for the next page, or null when this
page was not full (the listing is over). Text answers end with ``(more: --after N)`` when there may be more.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from app.cli.base import UsageError

T = TypeVar("T")

DEFAULT_LIMIT = 1000


def add_paging(parser: argparse.ArgumentParser, *, most: int = 10_000) -> None:
    parser.add_argument("--limit", type=int, default=min(DEFAULT_LIMIT, most), help=f"rows per page (1 to {most})")
    parser.add_argument("--after", type=int, default=0, metavar="CURSOR", help="the page after this cursor (`next`)")
    parser.set_defaults(limit_most=most)


def limit_of(args: argparse.Namespace) -> int:
    most = int(getattr(args, "limit_most", 10_000))
    if not 1 <= args.limit <= most:
        raise UsageError(f"--limit must be between 1 and {most}")
    if args.after < 0:
        raise UsageError("--after takes a cursor from an earlier page (`next`)")
    return int(args.limit)


def next_cursor(rows: Sequence[T], limit: int, cursor: Callable[[T], int]) -> int | None:
    """The cursor of the page after ``rows``, or None when the page was not full."""
    return cursor(rows[-1]) if rows and len(rows) >= limit else None


def paged(key: str, rows: list[Any], next_: int | None) -> dict[str, Any]:
    return {key: rows, "next": next_}


def with_more(text: str, next_: int | None) -> str:
    return text if next_ is None else f"{text}\n(more: --after {next_})"
