"""Review mode: a ``review`` root's reconcile lists what it found instead of applying it, until a person
applies the pending changes still current (Apply) or dismisses them (a dismissal sticks until the file
changes again)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from knowledge.library import audit
from knowledge.principal import require_person
from knowledge.sync import pending
from knowledge.sync.apply import apply_all
from knowledge.sync.claim import Claim, Outcome
from knowledge.sync.roots import SyncRoot, Writer, load_root, set_pending_count
from knowledge.sync.scan import Change, Diff

if TYPE_CHECKING:
    from knowledge.runtime import Quire


def review(held: Claim, diff: Diff, outcome: Outcome, apply_review: bool) -> None:
    """List the diff's changes as pending (a review scan), or apply the listed ones still current (Apply)."""
    root = held.root
    with held.quire.db.read() as conn:
        listed = pending.listed(conn, root.id)
    current = [
        c
        for c in diff.applicable
        if listed.get(c.relative, ("", ""))[0] != "dismissed" or listed[c.relative][1] != c.fingerprint
    ]
    if apply_review:
        chosen = [c for c in current if listed.get(c.relative) == ("pending", c.fingerprint)]
        rest = [c for c in current if c not in chosen]
        apply_all(held, chosen, diff, outcome, pending_after=len(rest))
        _write_pending(held.writer, root, rest)
        outcome.pending = len(rest)
        return
    with held.writer() as conn:
        held.check(conn)
        pending.replace(conn, root.id, current)
        set_pending_count(conn, root.id, len(current), release=True)
    outcome.pending = len(current)


def _write_pending(writer: Writer, root: SyncRoot, rest: Sequence[Change]) -> None:
    with writer() as conn:
        pending.replace(conn, root.id, rest)
        set_pending_count(conn, root.id, len(rest))


def dismiss(quire: Quire, root_id: int, paths: Sequence[str], actor: str) -> int:
    """Dismiss pending changes; each stays dismissed until its file changes again (its fingerprint)."""
    require_person("dismiss sync changes")
    with quire.db.write() as conn:
        found = pending.dismiss_paths(conn, root_id, paths)
        set_pending_count(conn, root_id, pending.count_pending(conn, root_id))
        root = load_root(conn, root_id)
        if found and root is not None:
            audit.append(
                conn, audit.SYNC_DISMISSED, actor, base_id=root.base_id, payload={"root": root_id, "count": found}
            )
    return found
