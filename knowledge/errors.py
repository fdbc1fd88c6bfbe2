"""One error root for the knowledge layer, with the specific kinds callers branch on.

The CLI maps these to its exit codes (3 not found, 4 conflict, 5 refused/forbidden, 6 a schema
this Quire does not work on, 1 other) and the GUI
shows ``str(error)``: messages are written for people and never carry stack traces or SQL.
"""

from __future__ import annotations


class KnowledgeError(Exception):
    """Root of every error the knowledge layer raises on purpose."""

    code = "error"


class NotFound(KnowledgeError, LookupError):
    code = "not_found"


class Conflict(KnowledgeError):
    """The request is well formed but the current state refuses it (locked/failed base, key reuse)."""

    code = "conflict"


class SecondLiveItem(Conflict):
    """The database refused a second live item for one source file (its unique key): another writer made one
    first. A caller that judges again in a new transaction finds that item and answers with it."""


class GuardRejected(Conflict):
    """A lifecycle guard refused the operation (e.g. reindex of an active subtree)."""

    code = "guard_rejected"


class Forbidden(KnowledgeError):
    """The caller may not do this (an agent principal starting a folder run)."""

    code = "forbidden"


class InvalidInput(KnowledgeError, ValueError):
    code = "invalid_input"


class StoreError(KnowledgeError):
    """The database could not do what was asked (locked for too long, disk full, corrupt)."""

    code = "store_error"


class SchemaMismatch(StoreError):
    """The store's schema is not the one this Quire works on: a newer Quire upgraded it (exit 6)."""

    code = "schema_mismatch"


class DataDirInUse(KnowledgeError):
    """Another Quire window already has this data directory open."""

    code = "data_dir_in_use"


class MissingComponent(KnowledgeError):
    """A part Quire ships with (a native library, an extension, the model) is missing or will not load.

    The message is one sentence naming the part; the loader's own text goes to the debug log only.
    """

    code = "missing_component"

    def __init__(self, component: str) -> None:
        super().__init__(f"Quire could not load {component}: this installation is incomplete, reinstall Quire")
        self.component = component


class ModelUnavailable(KnowledgeError):
    """A base's packaged model will not load here (its files damaged or incomplete), or the process that
    encodes queries with it cannot start or died. Search answers by keyword instead (``search.degraded``)."""

    code = "model_unavailable"


class ModelNotInstalled(InvalidInput):
    """A base's model is not installed here (the multilingual add-on removed, or not the file this Quire
    ships): refused like a bad argument where a base is made; search answers by keyword instead."""
