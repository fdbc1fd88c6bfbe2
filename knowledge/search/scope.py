"""What one search may return, worked out inside its read snapshot from the parsed query
(:mod:`knowledge.search.syntax`) and the caller's subtree, before any ranking is cut to its top k.

* **Documents** (``items``): the subtree, the ``in:`` folders (every directory of the base with that name,
  or that path below its root, and everything under it), the ``type:`` formats (by the file name's
  suffix, as the window's type filter; notes are ``type:note``), the ``tag:`` tags and ``from:`` senders
  (read from the item's stored metadata: ``tags`` as the Markdown reader joins them, ``from`` as a mail
  reader writes the header) and the dates. A document's date is the file's modification time recorded when
  it was last read (``items.mtime``); a note's is when it was written (``created_at``); a mail message's is
  its ``Date:`` header when it has one (what a person means by "mail after March"). Dates are the
  computer's local time.
* **Exclusions** (``excluded``): every document with a chunk that keyword search matches for an
  excluded word or phrase (stemmed as keyword search stems: ``-drafts`` also leaves out "draft").
* **Kept from agents**: for an agent principal, every document a person kept from agents
  (:mod:`knowledge.library.agent_hidden`) is excluded too.
* **Phrases** (``chunks``): the chunks that contain every quoted phrase; a hit must be one of them.
* **Identifiers** (:func:`identifier_counts`): in a short query (``query.SHORT_QUERY_WORDS``) keyword and
  hybrid searches rank the chunks containing more of the typed identifiers exactly above the others (in
  their order otherwise), so an exact DOI, ticket or symbol is never outranked by a merely similar passage.

Rankings test each candidate with :meth:`Scope.admits`; when the admitted chunks are few
(``EXACT_UP_TO``), the vector side scores exactly those instead of searching the nearest and filtering.

:func:`base_tags` lists the tags a base's documents carry, read the same way, for the window's tag control.
"""

from __future__ import annotations

import json
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, text

from knowledge.errors import InvalidInput
from knowledge.library import agent_hidden, index_postgres, tree
from knowledge.library.bases import Base, resolve_base
from knowledge.library.index import fts_table
from knowledge.search.syntax import NOTE, Filters, ParsedQuery
from knowledge.search.term_stats import quoted
from knowledge.sources.formats import format_for, suffix_of

if TYPE_CHECKING:
    from knowledge.runtime import Quire

MESSAGE_PARSERS = frozenset({"mail", "outlook"})  # items dated by their Date: header
EXACT_UP_TO = 20_000  # admitted chunks the vector side scores one by one rather than searching all


@dataclass(frozen=True)
class Scope:
    items: AbstractSet[int] | None = None  # the documents allowed (None: every one)
    excluded: AbstractSet[int] = frozenset()  # documents left out
    chunks: AbstractSet[int] | None = None  # chunks containing every phrase (None: no phrase)

    @property
    def everything(self) -> bool:
        return self.items is None and not self.excluded and self.chunks is None

    def admits(self, chunk_id: int, item_id: int) -> bool:
        if self.chunks is not None and chunk_id not in self.chunks:
            return False
        if self.items is not None and item_id not in self.items:
            return False
        return item_id not in self.excluded


def build_scope(conn: Connection, base: Base, parsed: ParsedQuery, subtree: int | None) -> Scope:
    items: set[int] | None = None
    if subtree is not None:
        tree.load_in_base(conn, base.id, subtree)
        items = set(tree.subtree_ids(conn, [subtree]))
    if not parsed.filters.empty:
        matching = _filtered_items(conn, base, parsed.filters)
        items = matching if items is None else items & matching
    excluded: set[int] = set(agent_hidden.hidden_ids(conn, base.id))  # kept from an acting agent
    if parsed.exclusions:
        excluded |= _excluded_items(conn, base, " OR ".join(quoted(e) for e in parsed.exclusions))
    chunks = None
    if parsed.phrases:
        chunks = _fts_rowids(conn, base, " AND ".join(quoted(p) for p in parsed.phrases))
    return Scope(items, frozenset(excluded), None if chunks is None else frozenset(chunks))


def base_tags(quire: Quire, base_ref: int | str) -> list[tuple[str, int]]:
    """Every tag the base's live documents carry, casefolded as ``tag:`` compares them, with how many documents
    carry it; most used first, then by name."""
    with quire.db.read() as conn:
        base = resolve_base(conn, base_ref)
        rows = conn.execute(
            text(
                "SELECT metadata FROM items WHERE base_id = :b AND type != 'directory' AND status != 'deleting' "
                "AND metadata LIKE :tagged"
            ),
            {"b": base.id, "tagged": '%"tags"%'},
        ).all()
    counts: dict[str, int] = {}
    for (metadata,) in rows:
        for tag in dict.fromkeys(_stored_tags(_fields(metadata).get("tags"))):
            counts[tag] = counts.get(tag, 0) + 1
    return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))


def identifier_counts(conn: Connection, base: Base, identifiers: tuple[str, ...]) -> dict[int, int]:
    """For each chunk that contains typed identifiers exactly (as a phrase), how many of them it contains."""
    counts: dict[int, int] = {}
    for identifier in dict.fromkeys(identifiers):
        for chunk_id in _fts_rowids(conn, base, quoted(identifier)):
            counts[chunk_id] = counts.get(chunk_id, 0) + 1
    return counts


def admitted_chunks(conn: Connection, scope: Scope) -> list[tuple[int, int]] | None:
    """(chunk id, item id) of every admitted chunk when there are at most ``EXACT_UP_TO``; else None."""
    if scope.chunks is not None and len(scope.chunks) <= EXACT_UP_TO:
        pairs = _chunk_items(conn, "c.id", list(scope.chunks))
    elif scope.items is not None and len(scope.items) <= EXACT_UP_TO:
        pairs = _chunk_items(conn, "c.item_id", list(scope.items))
        if len(pairs) > EXACT_UP_TO:
            return None
    else:
        return None
    return [(cid, iid) for cid, iid in pairs if scope.admits(cid, iid)]


def _chunk_items(conn: Connection, column: str, ids: list[int]) -> list[tuple[int, int]]:
    query = text(
        f"SELECT c.id, c.item_id FROM chunks c JOIN items i ON i.id = c.item_id "
        f"WHERE {column} IN :ids AND i.status != 'deleting'"
    ).bindparams(bindparam("ids", expanding=True))
    found: list[tuple[int, int]] = []
    for start in range(0, len(ids), 500):
        found.extend((r[0], r[1]) for r in conn.execute(query, {"ids": ids[start : start + 500]}).all())
    return found


def _fts_rowids(conn: Connection, base: Base, match: str) -> set[int]:
    table = fts_table(base.id)
    if conn.dialect.name == "postgresql":
        tsq = index_postgres.build_tsquery(conn, match)
        if tsq is None:
            return set()
        return {r[0] for r in conn.execute(text(index_postgres.matching_sql(table)), {"q": tsq})}
    return {r[0] for r in conn.execute(text(f"SELECT rowid FROM {table} WHERE {table} MATCH :m"), {"m": match})}


def _excluded_items(conn: Connection, base: Base, match: str) -> set[int]:
    """Every item with a chunk that matches ``match``. On SQLite one join in C: an excluded common word ("-2")
    matches a large share of a big base, and carrying its chunk ids through Python in batches of 500 took
    seconds at 1M chunks. Deleting items are not told apart: they are hidden anyway."""
    if conn.dialect.name == "postgresql":
        return {item for _chunk, item in _chunk_items(conn, "c.id", list(_fts_rowids(conn, base, match)))}
    table = fts_table(base.id)
    rows = conn.execute(
        text(f"SELECT DISTINCT c.item_id FROM {table} JOIN chunks c ON c.id = {table}.rowid WHERE {table} MATCH :m"),
        {"m": match},
    )
    return {r[0] for r in rows}


def _filtered_items(conn: Connection, base: Base, filters: Filters) -> set[int]:
    """The base's files and notes that pass the type, folder, tag, sender and date filters."""
    under: set[int] | None = None
    if filters.folders:
        under = set(tree.subtree_ids(conn, _folders(conn, base, filters.folders)))
    rows = conn.execute(
        text(
            "SELECT id, type, name, coalesce(mtime, created_at), parser, metadata FROM items "
            "WHERE base_id = :b AND type != 'directory' AND status != 'deleting'"
        ),
        {"b": base.id},
    ).all()
    kept: set[int] = set()
    for item_id, kind, name, dated, parser, metadata in rows:
        if under is not None and item_id not in under:
            continue
        if filters.types is not None and not _of_type(kind, name, filters.types):
            continue
        if _needs_metadata(filters, parser):
            if not _passes_metadata(filters, parser, _fields(metadata), dated):
                continue
        elif not _in_period(filters, dated):
            continue
        kept.add(item_id)
    return kept


_DATES = text("SELECT id, coalesce(mtime, created_at), parser, metadata FROM items WHERE id IN :ids").bindparams(
    bindparam("ids", expanding=True)
)


def item_dates(conn: Connection, item_ids: list[int]) -> dict[int, float]:
    """Each item's date as ``after:`` and ``before:`` judge it (a message's ``Date:`` header, else the file's
    modification time, else when the note was written), so a listing's order agrees with its date filters."""
    dates: dict[int, float] = {}
    for start in range(0, len(item_ids), 500):
        for item_id, dated, parser, metadata in conn.execute(_DATES, {"ids": item_ids[start : start + 500]}).all():
            header = _header_date(_fields(metadata).get("date")) if parser in MESSAGE_PARSERS else None
            dates[int(item_id)] = float(header or dated)
    return dates


def _needs_metadata(filters: Filters, parser: str | None) -> bool:
    """Whether the item's metadata is needed to judge it (parsing JSON only then keeps plain filters cheap)."""
    dated_by_header = parser in MESSAGE_PARSERS and (filters.after is not None or filters.before is not None)
    return bool(filters.tags or filters.senders) or dated_by_header


def _passes_metadata(filters: Filters, parser: str | None, fields: dict[str, Any], dated: float) -> bool:
    if filters.tags and not _has_tag(fields.get("tags"), filters.tags):
        return False
    if filters.senders and not any(s in str(fields.get("from") or "").casefold() for s in filters.senders):
        return False
    if parser in MESSAGE_PARSERS:
        dated = _header_date(fields.get("date")) or dated
    return _in_period(filters, dated)


def _in_period(filters: Filters, dated: float) -> bool:
    after, before = filters.after, filters.before
    return not ((after is not None and dated < after) or (before is not None and dated >= before))


def _fields(metadata: str | None) -> dict[str, Any]:
    try:
        fields = json.loads(metadata) if metadata else {}
    except ValueError:
        return {}
    return fields if isinstance(fields, dict) else {}


def _has_tag(stored: object, wanted: tuple[str, ...]) -> bool:
    """``stored``: the tags as the Markdown reader joins them ("a, b/c"); a wanted tag names its nested ones."""
    return any(t == w or t.startswith(w + "/") for t in _stored_tags(stored) for w in wanted)


def _stored_tags(stored: object) -> list[str]:
    return [t.strip().casefold() for t in str(stored or "").split(",") if t.strip()]


def _header_date(value: object) -> float | None:
    """A message's ``Date:`` as the mail readers store it (ISO 8601), in seconds; None when absent or odd."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _of_type(kind: str, name: str, types: AbstractSet[str]) -> bool:
    if kind == NOTE:
        return NOTE in types
    fmt = format_for(name)
    return suffix_of(name) in types or (fmt is not None and fmt.parser in types)


def _folders(conn: Connection, base: Base, names: tuple[str, ...]) -> list[int]:
    """Every directory of the base called one of ``names`` (or at that path below its root)."""
    rows = conn.execute(
        text(
            "SELECT id, name, relative_path FROM items WHERE base_id = :b AND type = 'directory' "
            "AND status != 'deleting'"
        ),
        {"b": base.id},
    ).all()
    found: list[int] = []
    for name in names:
        wanted = name.strip("/").casefold()
        ids = [
            r[0]
            for r in rows
            if r[1].casefold() == wanted or (r[2] or "").replace("\\", "/").strip("/").casefold() == wanted
        ]
        if not ids:
            raise InvalidInput(f'no folder called "{name}" in this base (in:"{name}")')
        found.extend(ids)
    return found
