"""What the folder-run panel reads in the background (previews, runs, a run's detail) and how it words
times, sizes and audit entries. Called from ``Op``s; nothing here touches a widget."""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass
from pathlib import Path

from app import team_store
from knowledge import folder_runs
from knowledge.folder_runs import FolderTooLarge, Preview, Principal, RunSummary, Split, SplitPlan
from knowledge.library import audit
from knowledge.runtime import Quire


def gui_principal() -> Principal:
    """The person at the keyboard: the GUI may start and revert runs (an agent may not). On a team store the
    database role that connected (``app.team_store``), else this machine's user."""
    name = team_store.person_name()
    if name is not None:
        return Principal.person(name)
    try:
        return Principal.person(getpass.getuser())
    except Exception:
        return Principal.person("unknown")


def when(stamp: float | None) -> str:
    return "" if stamp is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def size_text(size: int | None) -> str:
    if size is None:
        return ""
    if size < 1024:
        return f"{size} B"
    return f"{size / 1024:.1f} KB" if size < 1024 * 1024 else f"{size / (1024 * 1024):.1f} MB"


@dataclass(frozen=True)
class PreviewOutcome:
    """A preview, or — for a folder over the cap — the refusal, where it could be split (the sub-folders that
    fit) and the plan that starts one run per sub-folder (None, with the reason in ``refusal``, if it has none)."""

    folder: Path
    base_id: int
    preview: Preview | None
    refusal: str | None = None
    split: Split | None = None
    plan: SplitPlan | None = None


def preview_folder(quire: Quire, principal: Principal, base_id: int, folder: Path) -> PreviewOutcome:
    """Runs in an ``Op``: the service's preview, or its cap refusal with the sub-folders that fit and the split plan."""
    try:
        return PreviewOutcome(folder, base_id, folder_runs.preview(quire, principal, base_id, folder))
    except FolderTooLarge as exc:
        refusal, fitting = str(exc), folder_runs.fitting_subfolders(quire, folder)
    try:
        plan: SplitPlan | None = folder_runs.plan_split(quire, folder)
    except FolderTooLarge as no_plan:
        refusal, plan = f"{refusal}; {no_plan}", None
    return PreviewOutcome(folder, base_id, None, refusal, fitting, plan)


ENTRIES_PER_READ = 500


@dataclass(frozen=True)
class RunView:
    """A run's summary and the audit entries filed after the entry the panel had (``after_entry``)."""

    summary: RunSummary
    entries: list[audit.Entry]
    after_entry: int


def read_run(quire: Quire, run_id: int, after_entry: int = 0) -> RunView:
    """Runs in an ``Op``: a run's summary and its audit entries after ``after_entry`` — bounded reads
    however many sources the run has (its sources are paged by ``app.run_sources_model``)."""
    entries = audit.list_entries(quire.db, run_id=run_id, after_id=after_entry, limit=ENTRIES_PER_READ)
    return RunView(folder_runs.run_summary(quire, run_id), entries, after_entry)


def read_runs(quire: Quire, folder: Path | None, base_id: int | None) -> list[RunSummary]:
    if folder is not None:
        return folder_runs.list_runs(quire, folder=folder)
    return folder_runs.list_runs(quire, base=base_id) if base_id is not None else []


def audit_details(entry: audit.Entry) -> str:
    payload = entry.payload
    counts = payload.get("counts")
    parts = []
    if isinstance(counts, dict):
        parts.append(", ".join(f"{k} {v}" for k, v in counts.items() if v and k not in ("pending",)))
    for key in ("disposition", "error", "deleting", "walked", "retry_of", "approved_by"):
        if key in payload:
            parts.append(f"{key}: {payload[key]}")
    return " · ".join(p for p in parts if p)
