"""Reasons without paths: every stored reason is a code plus a short message with no absolute path, no
home directory and no user name, whatever the exception text held."""

from __future__ import annotations

import getpass
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sqlalchemy import text

from jobs.registry import JobType
from jobs.runtime import JobContext
from jobs.sanitize import sanitize_error, sanitize_reason
from knowledge.ingest.embedding import Encoder
from knowledge.ingest.models import model_spec
from knowledge.library import audit
from knowledge.lifecycle import operations
from knowledge.lifecycle.operations import PathInput
from knowledge.runtime import Quire
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree

HOME = os.path.expanduser("~")


def leaks(value: str | None, tmp_path: Path) -> list[str]:
    """What of a private place shows in a stored value."""
    text_ = value or ""
    found = [s for s in (str(tmp_path), HOME + "/", "/tmp/", "/home/") if s in text_]
    user = getpass.getuser()
    if f"/{user}/" in text_:
        found.append("user name")
    return found


def test_the_sanitizer_strips_paths_home_and_user() -> None:
    assert sanitize_error(PermissionError(13, "Permission denied", "/home/ann/My Notes/a.pdf")) == (
        "PermissionError: Permission denied"
    )
    assert sanitize_reason("cannot parse '/srv/data/x y/report.docx' at byte 7") == (
        "cannot parse 'report.docx' at byte 7"
    )
    assert sanitize_reason(f"bad header in {HOME}/papers/p.pdf\nTraceback ...") == "bad header in p.pdf"
    assert sanitize_reason("file:///home/ann/a.txt is gone") == "a.txt is gone"
    assert sanitize_reason("ratio 3:1, see docs/ARCHITECTURE.md") == "ratio 3:1, see docs/ARCHITECTURE.md"
    assert len(sanitize_reason("x" * 2000)) == 500


class LeakyEncoder(Encoder):
    """The real encoder, failing with the file's full path in the exception text for one file."""

    def __init__(self, leak: str) -> None:
        super().__init__(model_spec("all-MiniLM-L6-v2"), precision="fp32")
        self.leak = leak

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        if any("hemlock" in t for t in texts):
            raise OSError(5, "Input/output error", self.leak)
        if any("nightshade" in t for t in texts):
            raise ValueError(f"cannot embed {self.leak}: token 7 out of range")
        return super().encode_documents(texts)


def test_every_stored_reason_is_free_of_paths(quire: Quire, tmp_path: Path) -> None:
    make_base(quire)
    folder = write_tree(
        tmp_path / "private docs",
        {"good.txt": "Plain text about ferns.", "io.txt": "Text about hemlock.", "value.txt": "About nightshade."},
    )
    leak = str(folder / "value.txt")
    quire.encoder_factory = lambda _choice, query: (
        Encoder(model_spec("all-MiniLM-L6-v2"), precision="fp32") if query else LeakyEncoder(leak)
    )

    def leaky_handler(ctx: JobContext) -> None:
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{leak}'")

    quire.registry.register(JobType("test.leaky", leaky_handler, "abandon"))
    with quire.db.write() as conn:
        quire.queue.enqueue(conn, "test.leaky", {})
        audit.append(conn, audit.RUN_FAILED, audit.SYSTEM_ACTOR, payload={"error": f"OSError: cannot read {leak}"})
    operations.add_items(quire, "kb", [PathInput(folder)])
    drain(quire)

    items = {i.name: i for i in operations.list_items(quire, "kb", flat=True)}
    assert (items["io.txt"].error_code, items["io.txt"].error_message) == (
        "embedding_error",
        "OSError: Input/output error",
    )
    assert items["value.txt"].error_code == "embedding_error"
    # an unquoted path with a space loses its absolute part (what follows the space is all that is left)
    assert (items["value.txt"].error_message or "").startswith("ValueError: cannot embed ")
    assert (items["value.txt"].error_message or "").endswith("value.txt: token 7 out of range")
    with quire.db.read() as conn:
        stored = [r[0] for r in conn.execute(text("SELECT error_message FROM items")).all()]
        stored += [r[0] for r in conn.execute(text("SELECT last_error FROM jobs")).all()]
        stored += [r[0] for r in conn.execute(text("SELECT payload FROM audit_log")).all()]
        last_error = conn.execute(text("SELECT last_error FROM jobs WHERE type = 'test.leaky'")).scalar_one()
    assert last_error == "FileNotFoundError: [Errno 2] No such file or directory: 'value.txt'"
    assert [s for s in stored if leaks(s, tmp_path)] == []
