"""Portable bases: export and import a base with its vectors, back up and restore a data directory,
diagnose a damaged one, and keep all of it private to its owner. See each module for its contract.

The face: export/import of one base, backups and restore, relocation of source paths, salvage of a
damaged database, the read-only diagnosis, and the repair scan that removes a crashed import.
"""

from knowledge.portable import backup, diagnose, relocate, salvage
from knowledge.portable.diagnose import explain_open_failure
from knowledge.portable.export import ExportResult, export_base
from knowledge.portable.import_ import import_base, register
from knowledge.portable.import_check import ImportResult
from knowledge.portable.moving_in import MovedBase, move_in

__all__ = [
    "ExportResult",
    "ImportResult",
    "MovedBase",
    "backup",
    "diagnose",
    "explain_open_failure",
    "export_base",
    "import_base",
    "move_in",
    "register",
    "relocate",
    "salvage",
]
