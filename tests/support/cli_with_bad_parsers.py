"""``python -m tests.support.cli_with_bad_parsers ARGS`` is ``quire ARGS`` with the test parsers of
:mod:`tests.support.bad_parsers` registered first (a test-only entry; the product never reads it)."""

from __future__ import annotations

import sys

from app.cli.main import main
from tests.support import bad_parsers

if __name__ == "__main__":
    bad_parsers.register()
    sys.exit(main(sys.argv[1:]))
