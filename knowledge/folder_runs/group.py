"""Sources prepared as a group: read, parse and chunk several, then embed all their chunks in one call.

Embedding one source at a time hands the encoder a few chunks per call, too few for its length-sorted
batches (``Encoder.encode_documents``) to fill; a group gives it the index job's kind of call. Only the
preparation is grouped: every source still settles in its own fenced transaction
(:mod:`knowledge.folder_runs.execute`), so a group changes what a crash costs (at most one group's
preparation, redone by the next attempt), never what it commits.

A group closes at :data:`GROUP_MAX_SOURCES` sources, :data:`GROUP_MAX_CHUNKS` chunks or
:data:`GROUP_MAX_BYTES` bytes read, whichever comes first, so it stays a few seconds of encoding and its
sources' bytes stay few in memory. What a source's preparation meets (unreadable, changed, unparseable,
a parser bug) is that source's own outcome; an embedding failure is narrowed to its culprit sources
(:func:`knowledge.folder_runs.source.finish_works`). An unexpected fault while reading source *k* ends the
group before *k*: the sources before it settle first, then *k* is read again as the next group's first
and, if it faults again, the fault stops the run there, exactly as it did one source at a time.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from pathlib import Path

from knowledge.folder_runs.ledger import ManifestSource
from knowledge.folder_runs.source import SourceTools, SourceWork, finish_works, read_source_work
from knowledge.ingest.walk import VISIBLE, judge_path

log = logging.getLogger(__name__)

GROUP_MAX_SOURCES = 32  # progress and crash loss stay small; enough to fill the encoder's batches
GROUP_MAX_CHUNKS = 512  # a few seconds of encoding; the index job's batches carry ~200-300
GROUP_MAX_BYTES = 32 * 1024 * 1024  # raw bytes held until each source commits


def prepare_group(tools: SourceTools, root: Path, todo: deque[ManifestSource]) -> list[ManifestSource]:
    """Take the next group off ``todo`` and prepare it into ``tools.ready``; return its sources in order."""
    group: list[ManifestSource] = []
    works: list[SourceWork | None] = []
    chunks = held = 0
    while todo and len(group) < GROUP_MAX_SOURCES and chunks < GROUP_MAX_CHUNKS and held < GROUP_MAX_BYTES:
        source = todo[0]
        try:
            work = _read_visible(tools, root, source)
        except Exception:
            if not group:
                raise  # the group's first source: nothing before it is left to settle
            break  # settle the sources before it first; it is read again as the next group's first
        todo.popleft()
        group.append(source)
        works.append(work)
        if work is not None and work.prepared is not None:
            chunks += len(work.prepared.rows)
            held += len(work.prepared.raw or b"") + len(work.prepared.text)
    stats = finish_works(tools, works)
    log.debug("group of %d sources: %d texts embedded, %d reused", len(group), stats.embedded, stats.reused_vectors)
    tools.ready.update((source.id, work) for source, work in zip(group, works, strict=True))
    return group


def _read_visible(tools: SourceTools, root: Path, source: ManifestSource) -> SourceWork | None:
    """The source read and prepared, or None when the walk's rules no longer see it (its transaction says
    why: the judgement made there, under the write lock, is the one that counts)."""
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
