"""The ``quire`` command line: the same operations the GUI calls, for scripting and tests."""

from knowledge.cli.main import main

__all__ = ["main"]
