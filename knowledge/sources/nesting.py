"""One budget for everything under one file added: how deep its containers nest and how much they yield.

A container's members become child items and each is read in a job of its own, so a zip holding mailboxes
holding messages with zipped attachments would be unpacked level after level, each level with fresh
per-container limits (``members.py``: entries and bytes of *one* container). The budget here is the whole
tree's, whatever the container kinds (zip, tar, mbox, a message's attachments), and is worked out again
from the stored tree at each expansion (``knowledge.ingest.nesting.tree_budget``), so it holds across jobs:

* **levels**: the file added is level 0; containers at levels 1 and 2 are unpacked (a zip's mailbox, that
  mailbox's messages); an archive or mailbox that would sit at level 3 is not made a container at all: it
  is a ``skipped`` child (``nested_too_deep``); a message there keeps its own text but not its attachments;
* **descendants**: at most :data:`MAX_DESCENDANTS` items below the file in all (refused ones count too);
* **bytes**: the members' bytes over the whole tree at most ``archive.MAX_UNPACKED_BYTES`` (``too_large``);
* **ratio**: the whole tree's bytes past ``archive.RATIO_FLOOR`` and more than ``archive.MAX_RATIO`` times
  the file's own size is a bomb (``decompression_bomb``) — judged on the sum, so members each exactly at the
  floor (never judged by themselves: the floor is a strict bound) cannot add up unseen. A compressed member
  (``x.txt.gz`` in a zip) counts what it unpacked to (its text copy), and is unpacked only within what is
  left (``knowledge.ingest.nesting.compressed_limits``, shared by size among those parsed together).

A member that breaks a bound stops the expansion there: the members before it are kept, and the rest are
one refused child saying how many were left out and why (never one row per member left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from knowledge.sources import archive
from knowledge.sources.formats import is_container
from knowledge.sources.model import Member, Refused, RejectCode

MAX_LEVELS = 2
MAX_DESCENDANTS = 10_000
_MIB = 1024 * 1024
TREE_RATIO_REASON = (
    f"the file added expands more than {archive.MAX_RATIO} times in all, nested containers and compressed "
    "members counted; looks like a decompression bomb"
)


@dataclass(frozen=True)
class TreeBudget:
    """What the tree under one file added already holds, seen from the container being expanded."""

    depth: int  # the container's level: 0 for the file added, 1 for its members…
    descendants: int  # items under the file added, outside the container's own members
    expanded: int  # their bytes
    packed: int  # the file added's own size
    top: int = 0  # the file added's item id (0 when the container is that file)


def admit(
    budget: TreeBudget, members: Sequence[Member], refused: Sequence[Refused]
) -> tuple[list[Member], list[Refused]]:
    """The members and refusals the container may make children of, within ``budget`` (module doc)."""
    if budget.depth > MAX_LEVELS:  # a message at the last level: its own text is read, not its attachments
        left = len(members) + len(refused)
        return [], [_marker(left, "nested_too_deep", _too_deep())] if left else []
    kept: list[Member] = []
    said: list[Refused] = []
    count, size = budget.descendants, budget.expanded
    for n, member in enumerate(members):
        if budget.depth + 1 > MAX_LEVELS and is_container(member.name):
            stop = None if count < MAX_DESCENDANTS else _over_count()
            if stop is None:
                said.append(Refused(member.name, "nested_too_deep", _too_deep()))
                count += 1
                continue
        else:
            stop = _stop(count, size + len(member.data), budget.packed)
        if stop is not None:
            said.append(_marker(len(members) - n + len(refused), *stop))
            return kept, said
        kept.append(member)
        count, size = count + 1, size + len(member.data)
    room = max(MAX_DESCENDANTS - count, 0)
    if len(refused) > room:
        return kept, [*said, *refused[:room], _marker(len(refused) - room, *_over_count())]
    return kept, [*said, *refused]


def _stop(count: int, size: int, packed: int) -> tuple[RejectCode, str] | None:
    if count >= MAX_DESCENDANTS:
        return _over_count()
    if size > archive.MAX_UNPACKED_BYTES:
        limit = archive.MAX_UNPACKED_BYTES // _MIB
        return "too_large", f"the file added holds more than {limit} MB in all, nested containers counted"
    if size > archive.RATIO_FLOOR and size > archive.MAX_RATIO * max(packed, 1):
        return "decompression_bomb", TREE_RATIO_REASON
    return None


def _over_count() -> tuple[RejectCode, str]:
    return "too_large", f"the file added holds more than {MAX_DESCENDANTS} files in all, nested containers counted"


def _too_deep() -> str:
    return f"nested more than {MAX_LEVELS} containers deep below the file added; not unpacked"


def _marker(left: int, code: RejectCode, reason: str) -> Refused:
    return Refused(f"({left} more not unpacked)", code, f"{reason}; {left} not unpacked")
