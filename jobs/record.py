"""A row of the ``jobs`` table as a value: what readers (the window, recovery, a handler) see of a job."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NewType

JobId = NewType("JobId", int)  # a row of the jobs table


@dataclass(frozen=True)
class JobRecord:
    id: JobId
    type: str
    base_id: int | None
    payload: dict[str, Any]
    idempotency_key: str | None
    status: str
    attempt: int
    recovery: str
    lease_owner: str | None
    lease_expires_at: float | None
    cancel_requested: bool
    progress_done: int
    progress_total: int
    progress_label: str
    last_error: str | None
    result: Any
    enqueued_by: str | None
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    host: str | None = None  # the machine whose workers alone may claim it (a team store's pinned job)

    @classmethod
    def from_row(cls, row: Any) -> JobRecord:
        m = row._mapping
        return cls(
            id=m["id"],
            type=m["type"],
            base_id=m["base_id"],
            payload=json.loads(m["payload"] or "{}"),
            idempotency_key=m["idempotency_key"],
            status=m["status"],
            attempt=m["attempt"],
            recovery=m["recovery"],
            lease_owner=m["lease_owner"],
            lease_expires_at=m["lease_expires_at"],
            cancel_requested=bool(m["cancel_requested"]),
            progress_done=m["progress_done"],
            progress_total=m["progress_total"],
            progress_label=m["progress_label"],
            last_error=m["last_error"],
            result=json.loads(m["result"]) if m["result"] else None,
            enqueued_by=m["enqueued_by"],
            created_at=m["created_at"],
            updated_at=m["updated_at"],
            started_at=m["started_at"],
            finished_at=m["finished_at"],
            host=m.get("host"),
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)
