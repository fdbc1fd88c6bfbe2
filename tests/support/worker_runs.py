"""Two or more real ``quire worker`` processes run side by side: wait for them, and tell whether they worked at once."""

from __future__ import annotations

import subprocess
from typing import Any

from sqlalchemy import text


def finish(*workers: subprocess.Popen[str], timeout: float = 300) -> None:
    """Wait for each worker to end (killed past ``timeout``) and require a clean exit."""
    for w in workers:
        try:
            _, err = w.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            w.kill()
            raise
        assert w.returncode == 0, err


def index_jobs_overlapped(db: Any) -> bool:
    """Whether two index jobs ran at overlapping times: with one thread per worker, two processes at once."""
    with db.read() as conn:
        spans = conn.execute(
            text(
                "SELECT started_at, finished_at FROM jobs "
                "WHERE type = 'knowledge.index-documents' AND status = 'completed'"
            )
        ).all()
    return any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1 :])
