"""One reconcile of a synced root: claim → scan → apply in bounded batches → compare-and-swap the cursor.

Contract (see also the room's docstring in ``knowledge/sync/__init__.py``):

* **Claim first** (``claim.py``). A reconcile first claims the root in a tiny write transaction:
  ``scan_generation`` goes from ``s`` to ``s + 1`` with ``scan_owner`` stamped (``UPDATE … WHERE
  scan_generation = s``). A claim held by a live process (not stale) makes the newcomer stand down at once,
  writing nothing. A claim left by a dead process is taken over. The scan reads the item rows *after* the
  claim, so it sees everything an earlier, interrupted reconcile committed.
* **Fenced batches** (``apply.py``). Changes are applied at most ``sync.apply_batch`` (200) per write
  transaction, each opened by the caller's writer (``ctx.write()`` in a job: fenced on the job attempt) and
  re-checking the claim (``Claim.check``); a reconcile whose claim was taken over raises ``StoodDown`` and
  its transaction rolls back. Each change is re-validated inside the transaction, so a redo never duplicates.
* **Checkpoint last.** The cursor moves (``cursor_generation = s + 1``) only in the transaction of the
  last batch, by compare-and-swap on the old cursor and the claim. A crash anywhere leaves the cursor
  behind; the next reconcile scans again and redoes only the difference that is left.
* **The base is judged in each batch's own transaction.** A base that is locked or failed takes nothing:
  the batch rolls back, the claim is released with the reason in ``last_error`` (``base_unavailable: …``,
  so the root's state reads ``waiting``) and the root is looked at again every ``sync.poll_seconds``; the
  next reconcile that finds the base writable applies what is still there.
* **Review roots** (``review.py``) list what they find as pending until a person applies or dismisses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.sanitize import sanitize_error
from knowledge.library import audit
from knowledge.principal import require_person
from knowledge.sync.apply import apply_all
from knowledge.sync.claim import BaseUnavailable, Claim, Outcome, StoodDown, claim, new_owner, release, target_of
from knowledge.sync.review import review
from knowledge.sync.roots import (
    POLL_SECONDS,
    QUIET_SECONDS,
    WAITING_FOR_BASE,
    SyncRoot,
    Writer,
    schedule_reconcile,
    setting,
)
from knowledge.sync.scan import scan

if TYPE_CHECKING:
    from knowledge.runtime import Quire

PREPARING_RETRY_SECONDS = 1.0  # a root still being expanded by prepare-root is looked at again after this


def reconcile(
    quire: Quire,
    root_id: int,
    writer: Writer,
    *,
    owner: str | None = None,
    apply_review: bool = False,
    actor: str = audit.SYSTEM_ACTOR,
) -> Outcome:
    """Reconcile one root. ``auto`` roots apply what they find; ``review`` roots list it as pending,
    unless ``apply_review`` (a person pressed Apply), which applies the pending changes still current."""
    if apply_review:
        require_person("apply sync changes")  # a person's decision; the automatic reconciles are the system's
    owner = owner or new_owner(quire)
    outcome = Outcome(root_id)
    try:
        root, outcome.generation = claim(quire, writer, root_id, owner)
    except StoodDown as exc:
        outcome.stood_down = str(exc)
        return outcome
    held = Claim(quire, writer, root, outcome.generation, owner, actor)
    try:
        _scan_and_apply(held, outcome, apply_review)
    except BaseUnavailable as exc:
        _wait_for_base(held, str(exc))
        outcome.stood_down = str(exc)
    except StoodDown as exc:
        outcome.stood_down = str(exc)
    except BaseException as exc:
        release(quire, root_id, owner, error=sanitize_error(exc))
        raise
    return outcome


def _scan_and_apply(held: Claim, outcome: Outcome, apply_review: bool) -> None:
    """Under the claim: scan the folder, then apply (``auto``) or list (``review``) what changed."""
    quire, root = held.quire, held.root
    target = target_of(quire, root)
    if target is None:  # being prepared or deleted: its own job owns it now; look again later
        release(quire, root.id, held.owner)
        _look_again(quire, root, PREPARING_RETRY_SECONDS, "revisit")
        outcome.stood_down = "the folder is being prepared or deleted"
        return
    diff = scan(quire.db, target, hidden=[quire.data_dir], quiet_seconds=setting(quire.db, QUIET_SECONDS))
    outcome.counts, outcome.hashed, outcome.files_seen = diff.counts(), diff.hashed, diff.files_seen
    outcome.changes = [c.as_dict() for c in diff.changes[:200]]
    if root.mode == "review":
        review(held, diff, outcome, apply_review)
    else:
        apply_all(held, diff.applicable, diff, outcome)
    if diff.of("unstable"):
        _look_again(quire, root, setting(quire.db, QUIET_SECONDS), "revisit")


def _wait_for_base(held: Claim, why: str) -> None:
    """Release the claim with the reason the root waits, and look again later (the tag alternates with the
    claim generation, so a waiting reconcile job can schedule its successor while it still runs)."""
    quire = held.quire
    release(quire, held.root.id, held.owner, error=f"{WAITING_FOR_BASE}: {why}")
    _look_again(quire, held.root, setting(quire.db, POLL_SECONDS), f"waiting{held.generation % 2}")


def _look_again(quire: Quire, root: SyncRoot, delay: float, tag: str) -> None:
    with quire.db.write() as conn:
        schedule_reconcile(quire, conn, root, delay=delay, tag=tag)


def apply_pending(quire: Quire, root_id: int, actor: str) -> Outcome:
    """A person's Apply on a review root: apply its pending changes still current (the window's button)."""
    return reconcile(quire, root_id, quire.db.write, apply_review=True, actor=actor)
