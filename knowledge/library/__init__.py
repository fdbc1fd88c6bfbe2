"""What a base holds: the bases themselves and their guards, the item tree and its status rules, owned
blobs, the audit log, the per-base index tables (vec0 + FTS5), vector files and keyword indexes. The rooms
above write through here."""

from knowledge.library import agent_exclusions, audit, bases, keyword_check, keyword_file, vector_file
from knowledge.library.bases import Base
from knowledge.library.location import Location, read_by_ocr
from knowledge.library.tree import Item

__all__ = [
    "Base",
    "Item",
    "Location",
    "agent_exclusions",
    "audit",
    "bases",
    "keyword_check",
    "keyword_file",
    "read_by_ocr",
    "vector_file",
]
