"""Names, limits and errors that every part of a folder run shares."""

from __future__ import annotations

import logging

from knowledge.errors import GuardRejected, KnowledgeError

log = logging.getLogger(__name__)


JOB_TYPE = "knowledge.folder-run"
CAP_SETTING = "folder_runs.max_descendants"
DEFAULT_CAP = 200
FOLDER_NOT_FOUND = "folder not found"
MAX_ROUNDS = 3  # a source that changes under us this many times in a row is settled unavailable
JOB_MAX_ATTEMPTS = 1000  # crashes cost time, never the run: recovery keeps handing it back

COMMITTED = "committed"
# A source an earlier attempt of this run committed (reported by the re-walk; it settled once), or — stored
# as its outcome — a retry's source that the failed run it retries committed.
ALREADY_COMMITTED = "already_committed"

LINK_REASONS = {
    "link_to_dir": "a link to a folder is not followed",
    "link_outside": "a link pointing outside the folder is not followed",
    "dangling_link": "a broken link",
    "special": "not a regular file (device, pipe or socket)",
}


class FolderTooLarge(GuardRejected):
    """The walk reached more descendants than the cap: the folder is refused, never truncated."""

    code = "folder_too_large"


class RunFault(KnowledgeError):
    """Something a folder run cannot continue past (invariant, authorization, malformed payload)."""

    code = "run_fault"


class SourceChanged(Exception):
    """The source changed between being read and its transaction: roll back and read it again."""
