"""One error root for the job layer, and the control-flow signals handlers raise (kept apart, as in huey)."""

from __future__ import annotations


class JobError(Exception):
    """Root of the job layer's errors."""


class JobNotFound(JobError, LookupError):
    pass


class UnknownJobType(JobError):
    pass


class EnqueueError(JobError):
    """The job could not be enqueued; the caller's transaction should roll back or compensate."""


class ControlFlow(Exception):
    """Raised inside a handler to steer the runtime; never an error to report."""


class Superseded(ControlFlow):
    """This attempt no longer owns the job (a newer attempt took over, or it was cancelled): stand down."""


class Cancelled(ControlFlow):
    """Cancellation was requested; the handler stopped between steps."""


class HandBack(ControlFlow):
    """Give the job back to the queue without consuming an attempt (e.g. a missing identity)."""

    def __init__(self, reason: str, delay_seconds: float = 5.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay_seconds = delay_seconds
