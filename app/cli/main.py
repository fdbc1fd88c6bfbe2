"""``quire [--data-dir DIR] [--store URL] [--queue URL] [--json] [--as-agent NAME] COMMAND``: parser, output
and exit codes.

Exit codes are stable: 0 ok, 2 usage, 3 not found, 4 conflict, 5 refused or forbidden, 6 the store's schema
was upgraded by a newer Quire (upgrade Quire), 75 (EX_TEMPFAIL) a
server stayed away past the outage budget (``quire worker``, ``QUIRE_OUTAGE_SECONDS``: start it again), 1
anything else.
Every command prints JSON with ``--json`` (one document, or one JSON line per result where a command
answers many queries) and readable text otherwise. Command groups live in ``app.cli.commands_*``
modules; each exposes ``add_commands(subparsers)`` and sets ``func`` on its parsers. Nothing here imports Qt:
only ``quire gui`` does, inside its command.

Where the data lives: a directory (``--data-dir``, SQLite, the default) or a team store (``--store
postgresql://…`` or ``QUIRE_STORE``; its wake-ups over ``--queue redis://…`` or ``QUIRE_QUEUE``, without
which workers poll the store). With a team store the data directory is still this machine's own (owned
copies, caches, the worker log). A store URL is only ever shown redacted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from app.cli.base import (
    EXIT_CONFLICT,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_OTHER,
    EXIT_REFUSED,
    EXIT_SCHEMA,
    EXIT_TEMPFAIL,
    EXIT_USAGE,
    QUEUE_ENV,
    QUEUE_SCHEMES,
    STORE_ENV,
    Output,
    TemporaryFailure,
    UsageError,
)
from knowledge.errors import (
    Conflict,
    Forbidden,
    GuardRejected,
    InvalidInput,
    KnowledgeError,
    MissingComponent,
    NotFound,
    SchemaMismatch,
)
from knowledge.paths import resolve_data_dir


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"quire: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", default=argparse.SUPPRESS, help="data directory (default: platform dir)")
    common.add_argument(
        "--store", metavar="URL", default=argparse.SUPPRESS, help="a team store: postgresql://… (or QUIRE_STORE)"
    )
    common.add_argument(
        "--queue", metavar="URL", default=argparse.SUPPRESS, help="a team store's wake-ups: redis://… (or QUIRE_QUEUE)"
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    common.add_argument("--as-agent", metavar="NAME", default=argparse.SUPPRESS, help="act as an agent principal")
    parser = _Parser(prog="quire", description="Quire: local-first knowledge bases.", parents=[common])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    # they import from here; commands_portable adds to the ``base`` group commands_bases made
    from app.cli import (
        commands_bases,
        commands_config,
        commands_core,
        commands_doctor,
        commands_knowledge,
        commands_mcp,
        commands_portable,
        commands_runs,
        commands_store,
        commands_sync,
    )

    for commands in (
        commands_core,
        commands_doctor,
        commands_bases,
        commands_knowledge,
        commands_portable,
        commands_runs,
        commands_mcp,
        commands_sync,
        commands_config,
        commands_store,
    ):
        commands.add_commands(sub, common)
    return parser


def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, SchemaMismatch):
        return EXIT_SCHEMA
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, Forbidden | GuardRejected):
        return EXIT_REFUSED
    if isinstance(exc, Conflict):
        return EXIT_CONFLICT
    if isinstance(exc, InvalidInput | UsageError):
        return EXIT_USAGE
    return EXIT_OTHER


def _quiet_libraries() -> None:
    """Progress bars and chatter from the model libraries are not output of ours."""
    for key, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("TRANSFORMERS_VERBOSITY", "error"),
        ("TQDM_DISABLE", "1"),
    ):
        os.environ.setdefault(key, value)


def as_program() -> None:
    """What only a process that *is* ``quire`` does, before :func:`main`: ``quire … | head`` ends quietly on the
    closed pipe (SIGPIPE's default action) instead of with a traceback. Never done by :func:`main` itself, which
    a test runner calls in its own process: there a server thread writing to a socket a killed client closed
    would end the whole runner without a word."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _quiet_libraries()
    try:
        parser = build_parser()  # imports the store: apsw and sqlite-vec
    except ImportError as exc:
        as_json = "--json" in (sys.argv[1:] if argv is None else argv)
        return _fail(Output(as_json), missing_component(exc), EXIT_OTHER)
    args = parser.parse_args(argv)
    args.data_dir = resolve_data_dir(getattr(args, "data_dir", None))
    args.json = getattr(args, "json", False)
    args.as_agent = getattr(args, "as_agent", None)
    out = Output(args.json)
    try:
        args.store, args.queue = store_location(args)
        with _acting(args.as_agent):  # the operations judge the agent, not each command
            code = args.func(args, out)
        return int(code or EXIT_OK)
    except (KnowledgeError, UsageError) as exc:
        return _fail(out, exc, exit_code_for(exc))
    except TemporaryFailure as exc:
        return _fail(out, exc, EXIT_TEMPFAIL)
    except ImportError as exc:  # a bundled library is missing or its shared library will not load
        return _fail(out, missing_component(exc), EXIT_OTHER)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last line of defence: a message, not a traceback
        logging.getLogger("quire").debug("unexpected error", exc_info=True)
        return _fail(out, exc, EXIT_OTHER)


def store_location(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The team store and queue URLs, from the options or the environment (``None``: the data directory)."""
    from urllib.parse import urlsplit

    from knowledge.store.postgres import is_store_url, redacted

    store = getattr(args, "store", None) or os.environ.get(STORE_ENV) or None
    queue = getattr(args, "queue", None) or os.environ.get(QUEUE_ENV) or None
    if store is not None and not is_store_url(store):
        raise UsageError(
            f"--store takes a PostgreSQL URL (postgresql://…), not {redacted(store)!r}; a directory is --data-dir"
        )
    if queue is not None:
        if store is None:
            raise UsageError("--queue carries a team store's wake-ups: give the store too (--store or QUIRE_STORE)")
        if urlsplit(queue).scheme.lower() not in QUEUE_SCHEMES:
            raise UsageError(f"--queue takes a Redis URL (redis://…), not {redacted(queue)!r}")
    return store, queue


def _acting(agent: str | None) -> contextlib.AbstractContextManager[object]:
    from knowledge.principal import Principal, acting_as

    return acting_as(Principal.agent(agent)) if agent else contextlib.nullcontext()


def missing_component(exc: ImportError) -> MissingComponent:
    """An import failed: the installation is incomplete (its loader text goes to the debug log only).

    Names the top-level package; libraries that re-raise with advice of their own (numpy) keep the
    failed module's name on the ImportError they chain from.
    """
    logging.getLogger("quire").debug("import failed", exc_info=exc)
    cause: BaseException | None = exc
    while cause is not None:
        name = getattr(cause, "name", None)
        if isinstance(cause, ImportError) and name:
            return MissingComponent(name.split(".")[0])
        cause = cause.__cause__ or cause.__context__
    return MissingComponent("one of its libraries")


def _fail(out: Output, exc: BaseException, code: int) -> int:
    message = str(exc) or type(exc).__name__
    kind = getattr(exc, "code", type(exc).__name__)
    if out.as_json:
        print(json.dumps({"error": {"code": kind, "message": message, "exit_code": code}}))
    print(f"quire: {message}", file=sys.stderr)
    return code


def run() -> NoReturn:
    """The ``quire`` program (its console script and ``python -m app.cli``)."""
    as_program()
    sys.exit(main())
