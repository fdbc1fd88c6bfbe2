"""The ``quire`` command line: the same operations the GUI calls, for scripting and tests."""

from app.cli.main import main

__all__ = ["main"]
