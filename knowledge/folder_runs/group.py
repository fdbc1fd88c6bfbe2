"""Sources prepared as a group: read several, parse them in one request, chunk them, embed all their chunks
in one call.

Embedding one source at a time hands the encoder a few chunks per call, too few for its length-sorted
batches (``Encoder.encode_documents``) to fill; a group gives it the index job's kind of call. Reading
asks the base once which of the group's bytes it holds already and the parse process once for the rest
(:func:`knowledge.folder_runs.source.parse_works`), so a source costs no round trip of its own before its
transaction. Only the preparation is grouped: every source still settles in its own fenced transaction
(:mod:`knowledge.folder_runs.execute`), so a group changes what a crash costs (at most the preparation
of the groups in hand, redone by the next attempt), never what it commits.

A group closes at :data:`GROUP_MAX_SOURCES` sources, :data:`GROUP_MAX_CHUNKS` chunks or
:data:`GROUP_MAX_BYTES` bytes read, whichever comes first, so it stays a few seconds of encoding and its
sources' bytes stay few in memory. Chunks are counted as the parsed sources are chunked, in order: the
sources after the one that reached the limit keep their parsed text (``SourceTools.ahead``) and open the
next group, so nothing is read or parsed twice. What a source's preparation meets (unreadable, changed,
unparseable, a parser bug) is that source's own outcome; an embedding failure is narrowed to its culprit
sources (:func:`knowledge.folder_runs.source.embed_works`). An unexpected fault while reading source *k*
ends the group before *k*: the sources before it settle first, then *k* is read again as the next group's
first and, if it faults again, the fault stops the run there, exactly as it did one source at a time.

The group's sources are marked in flight from their chunking until their encode is done
(:class:`knowledge.folder_runs.deaths.Flight`); while they are read and parsed only a parse that is slow
marks its own source.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from pathlib import Path

from knowledge.folder_runs.ledger import ManifestSource
from knowledge.folder_runs.source import SourceTools, SourceWork, chunk_work, parse_works, read_source_work
from knowledge.ingest.walk import VISIBLE, judge_path

log = logging.getLogger(__name__)

# As many sources as an index batch holds: the encoder keeps its two batches in flight through a call and
# drains at its end, so small calls idle a stream (32 sources, ~60 SciFact chunks a call, cost a folder run
# ~20 % of its wall time against `quire add`; 64 and 128 measured the same). Progress is still written once
# a group, and a crash during a group's encode still costs only that group's preparation.
GROUP_MAX_SOURCES = 128
GROUP_MAX_CHUNKS = 512  # a few seconds of encoding; the index job's batches carry ~200-300
GROUP_MAX_BYTES = 32 * 1024 * 1024  # raw bytes held until each source commits


def prepare_group(tools: SourceTools, root: Path, todo: deque[ManifestSource]) -> list[ManifestSource]:
    """Take the next group off ``todo``, read, parse and chunk it into ``tools.ready`` (its embedding is the
    caller's); return its sources in order. What the group read but did not take goes back to ``todo``."""
    group, works = _read_group(tools, root, todo)
    parse_works(tools, [(s, w) for s, w in zip(group, works, strict=True) if w is not None])
    if tools.flight is not None:
        tools.flight.hold([s.id for s, w in zip(group, works, strict=True) if w is not None and w.parsed])
    chunks = 0
    for n, work in enumerate(works):
        if chunks >= GROUP_MAX_CHUNKS:  # the rest open the next group, their parsed text kept
            _put_back(tools, todo, group[n:], works[n:])
            group, works = group[:n], works[:n]
            break
        chunks += chunk_work(tools, work)
    log.debug("group of %d sources: %d chunks", len(group), chunks)
    tools.ready.update((source.id, work) for source, work in zip(group, works, strict=True))
    return group


def _read_group(
    tools: SourceTools, root: Path, todo: deque[ManifestSource]
) -> tuple[list[ManifestSource], list[SourceWork | None]]:
    group: list[ManifestSource] = []
    works: list[SourceWork | None] = []
    held = 0
    while todo and len(group) < GROUP_MAX_SOURCES and held < GROUP_MAX_BYTES:
        source = todo[0]
        work: SourceWork | None = tools.ahead.pop(source.id, None)
        if work is None:
            try:
                work = _read_visible(tools, root, source)
            except Exception:
                if not group:
                    raise  # the group's first source: nothing before it is left to settle
                break  # settle the sources before it first; it is read again as the next group's first
        todo.popleft()
        group.append(source)
        works.append(work)
        if work is not None:
            held += len(work.raw or b"")
    return group, works


def _put_back(
    tools: SourceTools, todo: deque[ManifestSource], sources: list[ManifestSource], works: list[SourceWork | None]
) -> None:
    for source, work in zip(reversed(sources), reversed(works), strict=True):
        todo.appendleft(source)
        if work is not None:
            tools.ahead[source.id] = work
    if tools.flight is not None:
        tools.flight.release([s.id for s in sources])


def _read_visible(tools: SourceTools, root: Path, source: ManifestSource) -> SourceWork | None:
    """The source read, or None when the walk's rules no longer see it (its transaction says why: the
    judgement made there, under the write lock, is the one that counts)."""
    judged = judge_path(root, source.relative_path, hidden=[tools.quire.data_dir])
    return read_source_work(tools, root, source) if judged.verdict == VISIBLE else None


def next_window(todo: deque[ManifestSource], deaths: Mapping[int, int]) -> deque[ManifestSource]:
    """The sources the next group may take off ``todo``: one that died before on its own (so a second death
    names it exactly, see :mod:`knowledge.folder_runs.deaths`), else up to a group's worth that never did
    (stopping before one that did)."""
    window: deque[ManifestSource] = deque()
    if todo and deaths.get(todo[0].id, 0):
        window.append(todo.popleft())
        return window
    while todo and len(window) < GROUP_MAX_SOURCES and not deaths.get(todo[0].id, 0):
        window.append(todo.popleft())
    return window
