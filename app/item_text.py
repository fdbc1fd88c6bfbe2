"""How a row of the item tree reads: its details column, a folder's summary of its children, its
progress and its status colour. Pure functions of an item and its children's counts (no Qt)."""

from __future__ import annotations

from knowledge.library import Item
from knowledge.store.schema import ACTIVE_STATUSES

STAGE_PROGRESS = {"idle": 0.02, "processing": 0.05, "preparing": 0.02, "reading": 0.35, "embedding": 0.7}
STATUS_COLORS = {
    "completed": "#2e7d32",
    "failed": "#c62828",
    "deleting": "#757575",
}
ACTIVE_COLOR = "#1565c0"


STALE_MARK = "⟳ stale: made by an older parser, chunker or model; reindex to refresh"


def details_text(item: Item, summary: dict[str, int], *, stale: bool = False) -> str:
    """The fourth column: a failed row's reason, a container's summary, a completed leaf's chunks (and
    the stale marker when its material was made by another parser, chunker or model than today's)."""
    if item.status == "failed" and not item.is_container:
        return item.error_message or item.error_code or "failed"
    if item.is_container:
        return summary_text(summary) or ("reading the folder…" if item.status == "preparing" else "empty")
    if item.status == "completed":
        chunks = f"{item.chunk_count} chunk{'s' if item.chunk_count != 1 else ''}"
        return f"{chunks} · {STALE_MARK}" if stale else chunks
    return {"processing": "waiting for the worker", "idle": "waiting"}.get(item.status, f"{item.status}…")


def summary_text(summary: dict[str, int]) -> str:
    total = sum(summary.values())
    if not total:
        return ""
    active = sum(n for s, n in summary.items() if s in ACTIVE_STATUSES)
    parts = [f"{total} item{'s' if total != 1 else ''}", f"{summary.get('completed', 0)} done"]
    if summary.get("failed"):
        parts.append(f"{summary['failed']} failed")
    if active:
        parts.append(f"{active} in progress")
    return " · ".join(parts)


def progress_of(item: Item, summary: dict[str, int]) -> float | None:
    if item.status in ("completed", "failed"):
        return 1.0
    if item.is_container:
        total = sum(summary.values())
        if not total:
            return None
        return (summary.get("completed", 0) + summary.get("failed", 0)) / total
    return STAGE_PROGRESS.get(item.status)
