"""How a row of the item tree reads: its details column, a folder's summary of its children, its
progress and its status colour. Pure functions of an item and its children's counts (no Qt)."""

from __future__ import annotations

from knowledge.library import Item
from knowledge.store.schema import ACTIVE_STATUSES

STAGE_PROGRESS = {"idle": 0.02, "processing": 0.05, "preparing": 0.02, "reading": 0.35, "embedding": 0.7}
STATUS_COLORS = {
    "completed": "#2e7d32",
    "failed": "#c62828",
    "skipped": "#9e9e9e",  # not read by design: quiet grey, never an alarm
    "deleting": "#757575",
}
DONE_STATUSES = ("completed", "failed", "skipped")
ACTIVE_COLOR = "#1565c0"


STALE_MARK = "⟳ stale: made by an older parser, chunker or model; reindex to refresh"


def details_text(item: Item, summary: dict[str, int], *, stale: bool = False) -> str:
    """The fourth column: a failed or skipped row's reason, a container's summary, a completed leaf's
    chunks (with its page count and OCR'd pages where the parser knows them, and the stale marker when
    its material was made by another parser, chunker or model than today's)."""
    if item.status in ("failed", "skipped") and not item.is_container:
        return item.error_message or item.error_code or item.status
    if item.is_container:
        return summary_text(summary) or ("reading the folder…" if item.status == "preparing" else "empty")
    if item.status == "completed":
        parts = [f"{item.chunk_count} chunk{'s' if item.chunk_count != 1 else ''}", *_pages_text(item)]
        return " · ".join([*parts, STALE_MARK] if stale else parts)
    return {"processing": "waiting for the worker", "idle": "waiting"}.get(item.status, f"{item.status}…")


def _pages_text(item: Item) -> list[str]:
    pages = item.metadata.get("page_count")
    if not isinstance(pages, int):
        return []
    parts = [f"{pages} page{'s' if pages != 1 else ''}"]
    if item.metadata.get("ocr"):
        parts.append(f"OCR p.{item.metadata.get('ocr_pages')}" if pages > 1 else "OCR")
    return parts


def summary_text(summary: dict[str, int]) -> str:
    """``120 items · 97 indexed · 23 skipped`` (and failed / in progress when there are any)."""
    total = sum(summary.values())
    if not total:
        return ""
    active = sum(n for s, n in summary.items() if s in ACTIVE_STATUSES)
    parts = [f"{total} item{'s' if total != 1 else ''}", f"{summary.get('completed', 0)} indexed"]
    for status in ("skipped", "failed"):
        if summary.get(status):
            parts.append(f"{summary[status]} {status}")
    if active:
        parts.append(f"{active} in progress")
    return " · ".join(parts)


def progress_of(item: Item, summary: dict[str, int]) -> float | None:
    if item.status in DONE_STATUSES:
        return 1.0
    if item.is_container:
        total = sum(summary.values())
        if not total:
            return None
        return sum(summary.get(s, 0) for s in DONE_STATUSES) / total
    return STAGE_PROGRESS.get(item.status)
