"""The one counting encoder of the tests: the real model, recording what reaches it.

``CountingEncoder`` keeps every text it embeds (``texts_seen``) and the size of every call (``sizes``);
texts holding a ``refuse`` word make the call fail, as a model that cannot embed some text would, and
texts holding a ``hang`` word make it never return, as a stuck native call would.
:func:`install` makes it a Quire's document encoder (queries keep the plain model).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from knowledge.ingest.embedding import Encoder
from knowledge.ingest.models import model_spec
from knowledge.runtime import Quire

MODEL = "all-MiniLM-L6-v2"


class CountingEncoder(Encoder):
    def __init__(self, precision: str = "fp32", *, refuse: str | None = None, hang: str | None = None) -> None:
        super().__init__(model_spec(MODEL), precision=precision)
        self.refuse = refuse
        self.hang = hang
        self.texts_seen: list[str] = []
        self.sizes: list[int] = []

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.sizes.append(len(texts))
        if self.refuse is not None and any(self.refuse in t for t in texts):
            raise RuntimeError("the model cannot embed this text")
        if self.hang is not None and any(self.hang in t for t in texts):
            threading.Event().wait()  # never set: only the encode watch ends this call (by ending the process)
        self.texts_seen.extend(texts)
        return super().encode_documents(texts)


def install(quire: Quire, encoder: CountingEncoder) -> CountingEncoder:
    quire.encoder_factory = lambda choice, query: (
        Encoder(model_spec(MODEL), precision=choice.precision) if query else encoder
    )
    return encoder
