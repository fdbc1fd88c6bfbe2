"""Test-only parsers: a parse that never returns, one that kills its own process, one that asks for far
too much memory, and one that yields a metadata field its census does not declare.

:func:`register` adds them to this process through ``knowledge.sources.dispatch.register_parser``; the
parse process gets them from its parent explicitly. Processes started by a test run
``python -m tests.support.cli_with_bad_parsers …`` (``quire …`` with these registered first): the
product itself never imports this module.
"""

from __future__ import annotations

import os
import signal
import threading

from knowledge.sources.dispatch import register_parser
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument
from knowledge.sources.textutil import document, line_segments


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


def undeclared(data: bytes, fmt: Format) -> ParsedDocument:
    """Text, plus a metadata field (``colour``) the text parser's census does not declare."""
    text = data.decode("utf-8")
    return document("text", text, line_segments(text), {"colour": "red"}, "text/plain")


PARSERS = {".hang": hang, ".crash": crash, ".balloon": balloon, ".census": undeclared}


def register() -> None:
    for suffix, parse in PARSERS.items():
        register_parser(suffix, parse)
