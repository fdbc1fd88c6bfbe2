"""The query syntax people type, parsed once into a :class:`ParsedQuery` (pure: no I/O, no database).

Design. A query is split into tokens at whitespace; a double quote (straight or curly) opens a quoted
section that runs to the next quote, whitespace included, so ``in:"Lab notes"`` and ``-"draft copy"`` are
one token each. Each token is then one of:

* ``type:pdf`` / ``in:"folder"`` / ``tag:project`` / ``from:ana`` / ``after:2024-01`` / ``before:2024-06-30``
  — a **filter** on documents; repeated ``type:``, ``in:``, ``tag:`` or ``from:`` widen (either type, either
  folder, either tag, either sender), repeated dates narrow. A tag is compared without case and without its
  ``#``, and names its nested tags too (``tag:project`` keeps ``#project/harbour``); ``from:`` keeps messages
  whose sender (name or address) contains the value, without case;
* ``-word``, ``-"a phrase"``, ``-ABC-12`` — an **exclusion**: documents containing it are left out;
* ``"a phrase"`` — a **phrase** every hit must contain, word for word;
* an **identifier** — a DOI (``10.1000/xyz123``), ticket (``ABC-1234``), file name (``report_v2.pdf``) or
  code symbol (``parse_query``, ``Foo::bar``, ``parseQuery``, ``run()``): words joined by ``_ . / \\ : # @``
  or by ``-`` next to a digit. The keyword side gets it whole, as an exact phrase, never split into
  fragments that stopwords or the common-term cut could drop (plain hyphenated words such as ``T-cell``
  stay ordinary words);
* anything else — a free **word**.

Everything that is not a filter or an exclusion, in the order typed, is the text the encoder embeds.
Unknown ``key:value`` tokens are ordinary text (a URL or ``ratio:1`` is not an error). A bad query raises
``InvalidInput`` with a message for people: an unmatched quote, a filter without a value, an unknown
type, a date that is not ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``, a ``before:`` not after ``after:``, an
excluded filter, or nothing to search for or filter by (only exclusions). Filters alone (``tag:pottery``,
``type:pdf after:2024-01``) are a query too: the search lists what they match (:attr:`ParsedQuery.filters_only`).

Dates name periods: ``after:P`` keeps documents dated at or after the start of P, ``before:P`` those
dated before the start of P (so ``after:2024-01 before:2024-02`` is January 2024). Which date a document
has is decided by the search (:mod:`knowledge.search.scope`), not here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime

from knowledge.errors import InvalidInput
from knowledge.sources.formats import FORMATS

FILTER_KEYS = ("type", "in", "tag", "from", "after", "before")
# type: names for groups of formats (by the parser that reads them); any suffix Quire reads works too
TYPE_GROUPS: dict[str, tuple[str, ...]] = {
    "pdf": ("pdf",),
    "text": ("text",),
    "markdown": ("markdown",),
    "md": ("markdown",),
    "html": ("html",),
    "web": ("html",),
    "word": ("docx",),
    "docx": ("docx",),
    "epub": ("epub",),
    "code": ("code",),
    "image": ("image",),
    "note": ("note",),
    "notes": ("note",),
    "mail": ("mail", "outlook"),
    "email": ("mail", "outlook"),
}
NOTE = "note"  # the type of notes written in Quire (no file, no suffix)
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"'})
_FILTER = re.compile(r"(?i)^(type|in|tag|from|after|before):(.*)$", re.DOTALL)
_DATE = re.compile(r"^(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?$")
_CONNECTED = re.compile(r"[^\W_]+(?:[_./\\:#@-]+[^\W_]+)+")
_STRIP = "()[]{}<>,;!?'\u2018\u2019"
_TRAIL = ".:"
_CAMEL = re.compile(r"[a-z][A-Z]")


@dataclass(frozen=True)
class Filters:
    """Which documents a search may return. ``types``: format names (parsers, or ``note``) and suffixes
    (None: any type; empty: none, as when the window's type and a typed ``type:`` disagree)."""

    types: frozenset[str] | None = None
    folders: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # casefolded, without "#"
    senders: tuple[str, ...] = ()  # casefolded parts of a sender (``from:``)
    after: float | None = None  # seconds since the epoch: the start of the after: period (local time)
    before: float | None = None

    @property
    def empty(self) -> bool:
        return (
            self.types is None
            and not self.folders
            and not self.tags
            and not self.senders
            and self.after is None
            and self.before is None
        )

    def narrowed(self, other: Filters) -> Filters:
        """Both sets of filters at once (the window's controls and the typed operators)."""
        types = other.types if self.types is None else self.types if other.types is None else self.types & other.types
        return Filters(
            types,
            _union(self.folders, other.folders),
            _union(self.tags, other.tags),
            _union(self.senders, other.senders),
            _latest(self.after, other.after),
            _earliest(self.before, other.before),
        )


@dataclass(frozen=True)
class ParsedQuery:
    raw: str
    text: str  # what the encoder embeds: words, phrases and identifiers in the order typed
    words: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    exclusions: tuple[str, ...] = ()
    filters: Filters = field(default_factory=Filters)

    @property
    def filters_only(self) -> bool:
        """Filters with nothing to search for: the search lists what they match rather than ranking."""
        return not self.text and not self.filters.empty

    def with_filters(self, extra: Filters) -> ParsedQuery:
        return replace(self, filters=self.filters.narrowed(extra))


def parse(raw: str) -> ParsedQuery:
    """The query's parts; ``InvalidInput`` (a message for people) when it cannot be searched."""
    words: list[str] = []
    phrases: list[str] = []
    identifiers: list[str] = []
    exclusions: list[str] = []
    text: list[str] = []
    filters = Filters()
    for token in _tokens(raw.translate(_QUOTES)):
        excluded = token.startswith("-") and len(token) > 1
        body = token[1:] if excluded else token
        operator = _FILTER.match(body)
        if operator:
            if excluded:
                raise InvalidInput(f"a filter cannot be excluded ({token.split(':')[0]}:); leave out the minus sign")
            filters = _add_filter(filters, operator.group(1).lower(), _unquote(operator.group(2)))
            continue
        kind, value = _classify(body)
        if not value:
            continue
        if excluded:
            exclusions.append(value)
            continue
        {"phrase": phrases, "identifier": identifiers, "word": words}[kind].append(value)
        text.append(value)
    if filters.after is not None and filters.before is not None and filters.before <= filters.after:
        raise InvalidInput(
            f"before:{_day(filters.before)} is not later than after:{_day(filters.after)}; no document can be both"
        )
    if not text and filters.empty:
        what = "only exclusions" if exclusions else "no words"
        raise InvalidInput(f"the query has {what}; add words to search for, or a filter such as tag:project")
    return ParsedQuery(
        raw, " ".join(text), tuple(words), tuple(phrases), tuple(identifiers), tuple(exclusions), filters
    )


def plain(text: str) -> ParsedQuery:
    """``text`` as free words only, no syntax (benchmarks feed claims with stray quotes through this)."""
    return ParsedQuery(text, text, (text,))


def parse_type(value: str) -> frozenset[str]:
    """The formats ``type:value`` names: a group (``pdf``, ``text``, ``code``, ``note``…) or a suffix."""
    name = value.lower().lstrip(".")
    if name in TYPE_GROUPS:
        return frozenset(TYPE_GROUPS[name])
    if "." + name in FORMATS:
        return frozenset({"." + name})
    groups = ", ".join(sorted(TYPE_GROUPS))
    raise InvalidInput(f"unknown type:{value}; use one of {groups}, or a file suffix Quire reads (py, csv, …)")


def parse_date(key: str, value: str) -> date:
    """The first day of the period ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD`` names."""
    found = _DATE.match(value)
    try:
        if found is None:
            raise ValueError(value)
        return date(int(found.group(1)), int(found.group(2) or 1), int(found.group(3) or 1))
    except ValueError:
        forms = f"{key}:2024, {key}:2024-01 or {key}:2024-01-31"
        raise InvalidInput(f"{key}:{value} is not a date; write {forms}") from None


def _tokens(raw: str) -> list[str]:
    """Whitespace-separated tokens; a quoted section (whitespace included) belongs to its token."""
    tokens: list[str] = []
    current: list[str] = []
    quoted = False
    for char in raw:
        if char == '"':
            quoted = not quoted
            current.append(char)
        elif char.isspace() and not quoted:
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(char)
    if quoted:
        raise InvalidInput('the query has an unmatched quote ("); close the phrase or remove the quote')
    if current:
        tokens.append("".join(current))
    return tokens


def _unquote(value: str) -> str:
    return " ".join(value.replace('"', " ").split())


def _classify(body: str) -> tuple[str, str]:
    """("phrase" | "identifier" | "word", the value); an empty value when nothing searchable is left."""
    if '"' in body:
        value = _unquote(body)
        return "phrase", value if re.search(r"[^\W_]", value) else ""
    if body.rstrip(_STRIP[2:]).endswith("()"):
        return "identifier", body.rstrip(_STRIP[2:])[:-2].strip(_STRIP)  # run(), obj.method()
    value = body.strip(_STRIP).rstrip(_TRAIL).lstrip(":")
    if _is_identifier(value):
        return "identifier", value
    return "word", value if re.search(r"\w", value) else ""


def _is_identifier(value: str) -> bool:
    if _CAMEL.search(value) and value.isalnum():
        return True  # parseQuery, HttpServer: a code symbol
    if not _CONNECTED.fullmatch(value):
        return False
    parts = re.split(r"[_./\\:#@-]+", value)
    if "-" in value and not re.search(r"[_./\\:#@]", value):
        return any(c.isdigit() for c in value)  # ABC-1234, COVID-19; not T-cell
    if re.fullmatch(r"[^\W\d_](?:\.[^\W\d_])+", value):
        return False  # U.S, e.g: abbreviations, not file names
    return len(parts) > 1


def _add_filter(filters: Filters, key: str, value: str) -> Filters:
    if not value:
        example = {
            "type": "type:pdf", "in": 'in:"Lab notes"', "tag": "tag:project", "from": "from:ana@example.org",
            "after": "after:2024-01", "before": "before:2024",
        }  # fmt: skip
        raise InvalidInput(f"{key}: needs a value, e.g. {example[key]}")
    if key == "type":
        return replace(filters, types=(filters.types or frozenset()) | parse_type(value))
    if key == "in":
        return replace(filters, folders=(*filters.folders, value))
    if key == "tag":
        return replace(filters, tags=_union(filters.tags, (_tag(key, value),)))
    if key == "from":
        return replace(filters, senders=_union(filters.senders, (value.casefold(),)))
    day = datetime.combine(parse_date(key, value), datetime.min.time()).timestamp()
    if key == "after":
        return replace(filters, after=_latest(filters.after, day))
    return replace(filters, before=_earliest(filters.before, day))


def tag_name(value: str) -> str:
    """A tag as ``tag:`` compares it: without case, its ``#`` and its outer ``/`` (``""`` when none is left)."""
    return value.lstrip("#").strip("/").casefold()


def _tag(key: str, value: str) -> str:
    tag = tag_name(value)
    if not tag:
        raise InvalidInput(f"{key}:{value} names no tag; write the tag's name, e.g. tag:project")
    return tag


def _union(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return first + tuple(v for v in second if v not in first)


def _day(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).date().isoformat()


def _latest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)
