"""Live updates by polling: everything the worker does reaches the window here; no worker ever signals the
window, so a dead or busy worker can never leave it waiting.

One poll in flight at a time, in an ``Op``: rows of the shown base updated since a cursor (with a small
overlap, so a row committed just before the cursor is not missed), the container child counts the tree
asked for, job counts, and every so often whether the loaded rows still exist. The interval grows with
the poll's own cost (at most ``POLL_BUDGET`` of a core) and stretches when no job is live.

Threading contract: main thread only; the read runs in an ``Op`` and comes back to ``_polled``.
"""

from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, QTimer, Signal

from app.context import AppContext
from app.item_model import ItemTreeModel
from app.ops import Op
from app.startup import PollResult, poll

log = logging.getLogger(__name__)

POLL_OVERLAP_SECONDS = 2.0
POLL_BUDGET = 0.1  # the poll may use at most a tenth of one core: its interval grows with its cost
MAX_POLL_MS = 5000
IDLE_FACTOR = 4  # with no job live, polls are this much further apart
EXISTENCE_CHECK_EVERY = 10  # polls between checks that loaded rows still exist


class Poller(QObject):
    """Polls for the model of the item tree; ``polled`` fires after each result was applied."""

    polled = Signal(object)  # PollResult

    def __init__(self, ctx: AppContext, model: ItemTreeModel, poll_ms: int, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ctx, self.model, self._poll_ms = ctx, model, poll_ms
        self._cursor = 0.0
        self._overlap = True
        self._polling = False
        self._count = 0
        self._stopped = False
        self.timer = QTimer(self)
        self.timer.setInterval(poll_ms)
        self.timer.timeout.connect(self.poll_now)

    def start(self) -> None:
        self.timer.start()

    def stop(self) -> None:
        self._stopped = True
        self.timer.stop()

    def restart_cursor(self) -> None:
        """A new base is shown: read what changed recently, with the overlap."""
        self._cursor = time.time() - POLL_OVERLAP_SECONDS
        self._overlap = True

    def poll_now(self) -> None:
        quire = self.ctx.quire
        if quire is None or self._polling or self._stopped:
            return
        self._polling = True
        self._count += 1
        since = self._cursor - POLL_OVERLAP_SECONDS if self._overlap else self._cursor
        check = self.model.loaded_ids() if self._count % EXISTENCE_CHECK_EVERY == 0 else []
        summaries = self.model.take_summary_requests()
        Op(poll, quire, self.model.base_id, since, summaries, check).bound_to(self).on_success(self._polled).on_failure(
            self._poll_failed
        ).run()

    def _poll_failed(self, exc: BaseException) -> None:
        self._polling = False
        log.warning("poll failed: %s", exc)

    def _polled(self, result: PollResult) -> None:
        self._polling = False
        self.ctx.set_bases(result.bases)
        if result.base_id == self.model.base_id and result.changed is not None:
            self._cursor = max(self._cursor, result.changed.cursor)
            self._overlap = result.changed.complete
            self.model.apply_items(result.changed.items)
            self.model.apply_summaries(result.summaries)
            self.model.remove_ids(set(result.checked) - result.existing)
        self.timer.setInterval(self.next_interval(result))
        self.polled.emit(result)

    def next_interval(self, result: PollResult) -> int:
        """Poll often while work is live, less when idle, and never spend more than the budget on it."""
        cost_ms = int(result.seconds * 1000 / POLL_BUDGET)
        interval = max(self._poll_ms, cost_ms) * (1 if result.live_jobs else IDLE_FACTOR)
        return min(interval, MAX_POLL_MS)
