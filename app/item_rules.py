"""What the item actions say, as plain functions of the base and the selection: why an action is not
available right now (the service still guards; these keep the window honest), and what an add did."""

from __future__ import annotations

from app.context import why_base_refuses_changes
from knowledge import lifecycle
from knowledge.library import Base, Item

TERMINAL = ("completed", "failed", "skipped")


def added_message(changes: lifecycle.Changes, what: str, base_name: str) -> str:
    """The status line after an add: what was created, and what the base already held."""
    counts: dict[str, int] = {}
    for outcome in changes.outcomes:
        counts[outcome.outcome] = counts.get(outcome.outcome, 0) + 1
    present, covered = counts.get("already_present", 0), counts.get("already_covered", 0)
    if not present and not covered:
        return f"Adding {what} to {base_name!r}…"
    parts = []
    if counts.get("created"):
        parts.append(f"adding {counts['created']}")
    if present:
        refreshed = sum(1 for o in changes.outcomes if o.refreshed)
        parts.append(f"{present} already present" + (f" ({refreshed} refreshing what changed)" if refreshed else ""))
    if covered:
        parts.append(f"{covered} already covered by a folder in the base")
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]} in {base_name!r}."


def why_no_delete(base: Base | None, chosen: list[Item]) -> str | None:
    """Delete is allowed at any time, on a locked or failed base too: a lock never keeps a person from removing."""
    return None if chosen else "Select items to delete"


def why_no_reindex(base: Base | None, chosen: list[Item]) -> str | None:
    refusal = why_base_refuses_changes(base)
    if refusal is not None:
        return refusal
    if not chosen:
        return "Select completed or failed items to reindex"
    busy = next((i for i in chosen if i.status not in TERMINAL), None)
    if busy is None:
        return None
    return f"{busy.name!r} is {busy.status}; wait until it is completed, failed or skipped"


def why_no_retry(base: Base | None, chosen: list[Item]) -> str | None:
    refusal = why_no_reindex(base, chosen)
    if refusal is not None:
        return refusal.replace("Select completed or failed items to reindex", "Select a failed folder or file")
    if not any(i.status == "failed" for i in chosen):
        return "Nothing selected has failed"
    return None


def why_no_chunks(base: Base | None, chosen: list[Item]) -> str | None:
    if base is None or base.status == "failed":
        return "The base's index cannot be read"
    if len(chosen) != 1:
        return "Select one completed item"
    return None if chosen[0].status == "completed" else f"{chosen[0].name!r} is {chosen[0].status}, not completed"
