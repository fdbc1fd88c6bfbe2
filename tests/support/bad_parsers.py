"""Test-only parsers registered through ``QUIRE_TEST_PARSERS`` (knowledge/sources/formats.py): a parse
that never returns, one that kills its own process, one that asks for too much memory, and plain text
that hangs only once the file says so (a file indexed well before it turns poisonous)."""

from __future__ import annotations

import os
import signal
import threading

from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument
from knowledge.sources.plain import parse_text


def hang(data: bytes, fmt: Format) -> ParsedDocument:
    threading.Event().wait()  # never set: only the wall-clock limit ends this parse
    raise AssertionError("unreachable")


def crash(data: bytes, fmt: Format) -> ParsedDocument:
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


def balloon(data: bytes, fmt: Format) -> ParsedDocument:
    """Asks for far more memory than the parse process may have (its RLIMIT_AS)."""
    hog = bytearray(64 * 1024 * 1024 * 1024)
    raise AssertionError(f"allocated {len(hog)} bytes: the memory limit is not in force")


def hang_when_marked(data: bytes, fmt: Format) -> ParsedDocument:
    """Plain text, except that a file containing ``HANG`` never finishes parsing."""
    if b"HANG" in data:
        threading.Event().wait()
    return parse_text(data, Format("text", "text/plain"))
