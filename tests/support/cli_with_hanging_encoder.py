"""``python -m tests.support.cli_with_hanging_encoder ARGS`` is ``quire ARGS`` whose document encoder is the
real model, except that a text holding ``HANG`` never comes back (``tests.support.encoders``; a test-only
entry, the product never reads it). The model is loaded before the command runs, so an innocent encode
call under a short ``QUIRE_ENCODE_TIMEOUT`` pays no model load.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from app.cli.main import main
from knowledge.runtime import Quire
from tests.support.encoders import CountingEncoder, install

HANG = "HANG"


def _with_hanging_encoder(encoder: CountingEncoder) -> None:
    opening = Quire.open.__func__  # type: ignore[attr-defined]

    def open_with_encoder(cls: type[Quire], data_dir: Path, **kwargs: Any) -> Quire:
        quire: Quire = opening(cls, data_dir, **kwargs)
        install(quire, encoder)
        return quire

    Quire.open = classmethod(open_with_encoder)  # type: ignore[method-assign, assignment]


if __name__ == "__main__":
    encoder = CountingEncoder(hang=HANG)
    encoder.encode_documents(["load the model now"])
    _with_hanging_encoder(encoder)
    sys.exit(main(sys.argv[1:]))
