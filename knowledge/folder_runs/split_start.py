"""Starting a split plan: one run per planned folder (or chunk of a folder's own files), all in one transaction.

Each planned run is previewed as ``start_run`` would preview it — a whole folder by its own walk, a chunk of
a split folder's own files by judging just those entries — and then judged once more by the rules of the
folder the person chose (its ``.quireignore`` files above the planned folder still apply: a file they
exclude is not in any manifest, so a split never ingests what one run over the whole folder would leave
out). Every run is then created (or replayed: each run's key is derived from base, folder, person and
manifest, so repeating the gesture replays every run, and a sub-folder already started by hand replays
that run) inside **one** write transaction: every run is started or none is. Each created run files its
own ``ingest.folder_run.created`` entry, which names the folder it was split from (``split_of``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knowledge import preferences
from knowledge.folder_runs.judging import descendant_cap, judge_destination
from knowledge.folder_runs.preview import Preview, PreviewEntry, build_preview, preview_of_walk
from knowledge.folder_runs.principal import require_person_for_run
from knowledge.folder_runs.split_plan import PlannedRun, SplitPlan, own_entries, plan_split
from knowledge.folder_runs.start import StartResult, create_or_replay, derived_key
from knowledge.ingest.walk import VISIBLE, Walk, judge_path
from knowledge.library.bases import Base
from knowledge.principal import Principal
from knowledge.store import machine_folders

if TYPE_CHECKING:
    from knowledge.runtime import Quire


@dataclass(frozen=True)
class SplitStart:
    plan: SplitPlan
    runs: list[StartResult]  # in the plan's order

    def as_dict(self) -> dict[str, Any]:
        pairs = zip(self.plan.runs, self.runs, strict=True)
        return {
            "split": self.plan.as_dict(),
            "runs": [{**r.as_dict(), "folder": p.folder, "label": p.label} for p, r in pairs],
        }


def start_split(quire: Quire, principal: Principal, base_ref: str | int, folder: str | os.PathLike[str]) -> SplitStart:
    """Start (or replay) every run of :func:`plan_split` over ``folder`` into ``base_ref``, in one transaction.

    A folder within the cap is planned as the one run over it, which is exactly ``start_run`` without a key."""
    require_person_for_run(principal, "start")
    with quire.db.read() as conn:
        base = judge_destination(conn, base_ref)
    plan = plan_split(quire, folder)
    machine_folders.record_for(quire.db, quire.data_dir, [plan.folder])  # a person here starts it: readable here
    previews = [_preview_of(quire, base, plan, planned) for planned in plan.runs]
    split_of = plan.folder if plan.over_cap else None
    results = []
    with quire.db.write():  # every run or none: each start below is a savepoint of this transaction
        for preview in previews:
            key = derived_key(base.id, preview.folder, principal.label, preview)
            results.append(create_or_replay(quire, principal, base, preview, key, split_of=split_of))
    return SplitStart(plan, results)


def _preview_of(quire: Quire, base: Base, plan: SplitPlan, planned: PlannedRun) -> Preview:
    folder = Path(planned.folder)
    with quire.db.read() as conn:
        cap, limit = descendant_cap(conn), preferences.max_file_bytes(conn)
        ignore = preferences.ignore_patterns(conn)
    if planned.own is None:
        preview = build_preview(quire, base, folder, cap)
    else:
        names = set(planned.own)
        entries = [e for e in own_entries(folder, [quire.data_dir], ignore) if e.path.name in names]
        found = Walk(folder, entries=entries, walked=len(entries))
        preview = preview_of_walk(quire, base, folder, cap, found, limit, {})
    if planned.relative == ".":
        return preview
    return _judged_from(Path(plan.folder), planned.relative, preview, [quire.data_dir], ignore)


def _judged_from(top: Path, below: str, preview: Preview, hidden: list[Path], ignore: list[str]) -> Preview:
    """``preview`` with the sources the chosen folder's rules exclude moved to the ineligible, with the reason."""
    eligible: list[PreviewEntry] = []
    ineligible = list(preview.ineligible)
    for entry in preview.eligible:
        judged = judge_path(top, f"{below}/{entry.relative}", hidden=hidden, ignore=ignore)
        if judged.verdict == VISIBLE:
            eligible.append(entry)
        else:
            ineligible.append(PreviewEntry(entry.relative, entry.kind, entry.size, None, judged.reason or "excluded"))
    if len(eligible) == len(preview.eligible):
        return preview
    kept = frozenset(preview.visible_files - {e.relative for e in ineligible})
    return dataclasses.replace(
        preview, eligible=eligible, ineligible=sorted(ineligible, key=lambda e: e.relative), visible_files=kept
    )
