"""What the ``quire`` program and its command modules share: exit codes, the errors a command raises for
one, :class:`Output`, and the environment names of a team store. A leaf: it imports nothing of ``app``,
so ``app.cli.main`` (which lists the command modules) and the commands (and the window's team-store
modules) all import it without a cycle."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EXIT_OK, EXIT_OTHER, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_REFUSED = 0, 1, 2, 3, 4, 5
EXIT_SCHEMA = 6  # the store's schema is newer than this Quire's: upgrade Quire
EXIT_TEMPFAIL = 75  # sysexits.h EX_TEMPFAIL (jobs.outage.EXIT_TEMPFAIL): try again later

STORE_ENV, QUEUE_ENV = "QUIRE_STORE", "QUIRE_QUEUE"
QUEUE_SCHEMES = ("redis", "rediss", "unix")


class TemporaryFailure(Exception):
    """A server stayed away longer than the command would wait (exit 75: a service manager restarts it)."""


class UsageError(Exception):
    """A bad argument discovered after parsing (exit 2)."""


@dataclass
class Output:
    as_json: bool

    def emit(self, data: Any, text: Callable[[Any], str] | str | None = None) -> None:
        if self.as_json:
            print(json.dumps(data, default=str, sort_keys=True))
        elif callable(text):
            print(text(data))
        elif text is not None:
            print(text)
        else:
            print(json.dumps(data, default=str, indent=2, sort_keys=True))

    def line(self, data: Any) -> None:
        print(json.dumps(data, default=str, sort_keys=True), flush=True)


def local_only(args: argparse.Namespace, what: str, instead: str) -> None:
    """Refuse a command that works on a data directory's SQLite file when a team store was chosen."""
    if getattr(args, "store", None):
        raise UsageError(f"{what} works on a data directory, not a team store; {instead}")
