"""Test-only parsers: a parse that never returns, one that kills its own process, one that asks for far
too much memory, one that yields a metadata field its census does not declare, and plain text
that hangs only once the file says so (a file indexed well before it turns poisonous).

:func:`register` adds them to this process through ``knowledge.sources.dispatch.register_parser``; the
parse process gets them from its parent explicitly. Processes started by a test run
``python -m tests.support.cli_with_bad_parsers …`` (``quire …`` with these registered first): the
product itself never imports this module.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from knowledge.sources.dispatch import register_parser
from knowledge.sources.formats import Format
from knowledge.sources.model import ParsedDocument
from knowledge.sources.plain import parse_text
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


def hang_when_marked(data: bytes, fmt: Format) -> ParsedDocument:
    """Plain text, except that a file containing ``HANG`` never finishes parsing."""
    if b"HANG" in data:
        threading.Event().wait()
    return parse_text(data, Format("text", "text/plain"))


PARSERS = {".hang": hang, ".crash": crash, ".balloon": balloon, ".census": undeclared, ".marked": hang_when_marked}


def register() -> None:
    for suffix, parse in PARSERS.items():
        register_parser(suffix, parse)


# ``quire`` with these parsers registered (a test-only entry point; the product never reads it)
CLI_MODULE = "tests.support.cli_with_bad_parsers"


def cli_argv(*args: str, data_dir: Path) -> list[str]:
    """The command line of ``quire --data-dir DATA_DIR ARGS`` with these parsers registered."""
    return [sys.executable, "-m", CLI_MODULE, "--data-dir", str(data_dir), *args]


def run_cli(
    *args: str, data_dir: Path, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``quire ARGS`` in a real process with these parsers registered."""
    repo = Path(__file__).resolve().parents[2]
    full_env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONFAULTHANDLER": "1", **(env or {})}
    argv = cli_argv(*args, data_dir=data_dir)
    return subprocess.run(argv, cwd=repo, env=full_env, capture_output=True, text=True, timeout=timeout)
