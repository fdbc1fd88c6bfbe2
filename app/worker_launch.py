"""Launcher for the app's worker process: tie it to the app's life, then become ``quire worker``.

``python -m app.worker_launch PARENT_PID DATA_DIR`` asks Linux to send the process SIGTERM when its
parent (the app's main thread, which started it) dies — so an app crash never leaves a worker running
on its own — checks the parent is still there, and then ``exec``s exactly
``python -m app.cli --data-dir DATA_DIR worker --log`` in the same process (``--log``: into the data
directory's rotated, owner-only ``worker.log``). Elsewhere it only execs.
SIGTERM makes the worker stop taking jobs; whatever is running is judged by recovery on the next start.

This module imports nothing from Qt or from the core (``app.self_command`` spells the argv): it is a few
system calls and an ``exec``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

from app.self_command import quire_command, worker_launcher_command

PR_SET_PDEATHSIG = 1


def worker_argv(data_dir: str) -> list[str]:
    """``quire worker`` for this data directory: the CLI module, or the frozen app's ``cli`` entry. It logs to
    its own file and reports no progress line: the window's status bar shows the same numbers."""
    return quire_command("--data-dir", data_dir, "worker", "--log", "--progress-every", "0")


def launcher_argv(parent_pid: int, data_dir: str) -> list[str]:
    """How the app starts this launcher (program first)."""
    return worker_launcher_command(parent_pid, data_dir)


def _die_with_parent(parent_pid: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the app died before prctl took effect
        sys.exit(0)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m app.worker_launch PARENT_PID DATA_DIR", file=sys.stderr)
        return 2
    _die_with_parent(int(argv[0]))
    args = worker_argv(argv[1])
    os.execv(args[0], args)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
