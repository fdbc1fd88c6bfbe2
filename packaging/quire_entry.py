"""The one executable of a frozen (PyInstaller) build: the window, the CLI, or the worker launcher.

``Quire`` opens the window; ``Quire cli ARGS`` is ``quire ARGS``; ``Quire worker-launch PID DIR`` is what
the window runs to start its worker process (``app.worker_launch``), which then execs ``Quire cli …
worker``. A frozen build has no ``python -m``, so the app asks ``sys.frozen`` and uses these words.
Child processes of ``multiprocessing`` (the parse process) run this executable too; ``freeze_support``
hands them to multiprocessing.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    # Everything the app needs is inside the bundle: the model libraries never try the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = sys.argv[1:]
    if args[:1] == ["cli"]:
        from app.cli.main import as_program
        from app.cli.main import main as cli_main

        as_program()
        return cli_main(args[1:])
    if args[:1] == ["worker-launch"]:
        from app.worker_launch import main as launch

        return launch(args[1:])
    from app.main import main as gui_main

    return gui_main()


if __name__ == "__main__":
    # The parse process (knowledge.ingest.parse_worker) and multiprocessing's resource tracker start this
    # same executable with multiprocessing's own arguments: let multiprocessing take those runs over
    # before the app reads its arguments.
    import multiprocessing

    multiprocessing.freeze_support()
    sys.exit(main())
