"""Tables that keep their headers: each row becomes one line of ``header: value`` pairs.

A search for a cell's value together with its column name ("Amount 120 North") then finds the row's
line, because the header words sit next to the value in the same chunk, wherever the chunker cuts.
The first row with any value is the header row; a blank header cell is named by its column (``C``).
Empty cells are left out of a row's line; a row with no value at all is not written.

CSV and TSV are read here too (stdlib :mod:`csv`; the delimiter is sniffed among ``, ; \\t |``). One
segment per written row, carrying the *physical* line range of the record in the file (a quoted
value may span lines), so a hit opens the file at the right line.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from knowledge.sources.census import blank_metadata
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument, Segment, SourceRejected, failing_as
from knowledge.sources.plain import decode_nonblank
from knowledge.sources.textutil import clean_text, document

_DELIMITERS = ",;\t|"
_SNIFF_CHARS = 16 * 1024
csv.field_size_limit(16 * 1024 * 1024)  # a single huge cell is text to read, not an error (max_bytes bounds it)


@dataclass(frozen=True)
class Row:
    """One written row: its line of text and where it came from (page: sheet or slide; lines: rows)."""

    text: str
    page: int | None
    line_start: int
    line_end: int


def column_name(index: int) -> str:
    """Spreadsheet column letters for a 0-based index: 0 → ``A``, 27 → ``AB``."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def cell_text(value: object) -> str:
    """A cell on one line: whole floats without ``.0``, booleans and dates as written."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return " ".join(clean_text(str(value)).split())


class HeaderedRows:
    """Turns raw rows into ``header: value`` lines; the first non-empty row is taken as the header."""

    def __init__(self, prefix: str = "", first_column: int = 0) -> None:
        self._prefix = prefix
        self._first_column = first_column  # a sheet's used range may start right of column A
        self._headers: list[str] | None = None

    def line(self, values: Sequence[object]) -> str | None:
        cells = [cell_text(v) for v in values]
        if not any(cells):
            return None
        if self._headers is None:
            self._headers = [cell or column_name(self._first_column + i) for i, cell in enumerate(cells)]
            return f"{self._prefix}columns: " + "; ".join(self._headers)
        pairs = [f"{self._header(i)}: {cell}" for i, cell in enumerate(cells) if cell]
        return self._prefix + "; ".join(pairs)

    def _header(self, index: int) -> str:
        headers = self._headers or []
        return headers[index] if index < len(headers) else column_name(self._first_column + index)


def join_rows(rows: Iterable[Row]) -> tuple[str, tuple[Segment, ...]]:
    """One line per row, ``\\n``-separated; one segment per row (its ``\\n`` included)."""
    parts: list[str] = []
    segments: list[Segment] = []
    offset = 0
    for row in rows:
        line = row.text + "\n"
        parts.append(line)
        segments.append(Segment(offset, offset + len(line), row.page, row.line_start, row.line_end))
        offset += len(line)
    if parts:  # no trailing newline: the last segment ends at len(text)
        parts[-1] = parts[-1][:-1]
        last = segments[-1]
        segments[-1] = Segment(last.start, last.end - 1, last.page, last.line_start, last.line_end)
    return "".join(parts), tuple(segments)


def parse_csv(data: bytes, fmt: Format) -> ParsedDocument:
    decoded = decode_nonblank(data)
    delimiter = _sniff_delimiter(decoded.text, "\t" if fmt.mime == "text/tab-separated-values" else ",")
    with failing_as("CSV could not be read (malformed quoting)"):
        rows = list(_csv_rows(decoded.text, delimiter))
    text, segments = join_rows(rows)
    if not text.strip():
        raise SourceRejected("no_text", "table has no values")
    metadata = blank_metadata("csv")
    metadata.update(encoding=decoded.encoding, row_count=len(rows))
    return document("csv", text, segments, metadata, fmt.mime)


def _sniff_delimiter(text: str, default: str) -> str:
    try:
        return csv.Sniffer().sniff(text[:_SNIFF_CHARS], delimiters=_DELIMITERS).delimiter
    except csv.Error:
        return default


def _csv_rows(text: str, delimiter: str) -> Iterable[Row]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    table = HeaderedRows()
    first_line = 1
    for values in reader:
        line = table.line(values)
        if line is not None:
            yield Row(line, None, first_line, reader.line_num)
        first_line = reader.line_num + 1
