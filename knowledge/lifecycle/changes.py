"""What an operation changed (items created, statuses, jobs scheduled, one outcome per added input), for
views to refresh from instead of re-reading everything."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobs.queue import JobId
from knowledge.library.ids import BaseId, ItemId
from knowledge.lifecycle.identity import AddOutcome


@dataclass
class Changes:
    """What an operation changed, for views to refresh from."""

    base_id: BaseId
    created: list[ItemId] = field(default_factory=list)
    statuses: dict[ItemId, str] = field(default_factory=dict)
    job_ids: list[JobId] = field(default_factory=list)
    noop: bool = False
    outcomes: list[AddOutcome] = field(default_factory=list)  # add: one per input

    def as_dict(self) -> dict[str, Any]:
        return {
            "base_id": self.base_id,
            "created": self.created,
            "statuses": {str(k): v for k, v in self.statuses.items()},
            "job_ids": self.job_ids,
            "noop": self.noop,
            "outcomes": [o.as_dict() for o in self.outcomes],
        }
