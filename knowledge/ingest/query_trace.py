"""The query encoder's transformer as a TorchScript trace: the same operations without Python's per-module
dispatch, which is a third of a one-thread query's time on a small model (measured on SciFact claims, bf16,
interleaved with the eager model in one run: p50 19.5 → 14.1 ms, p95 34.9 → 23.6 ms).

The trace shares the model's weights (it is not frozen, so no second copy is held). A trace records one
path through the model's Python; for a single unpadded query that path is the same at every length, and
the trace is checked against the eager model on probes of several lengths, up to the model's limit, before
it is used. If tracing fails or any probe differs (cosine < ``MIN_COSINE``), queries stay on the eager path.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

MIN_COSINE = 0.99999
_EXAMPLE = "how are proteins folded in the cell"
_PROBES = ("insulin", "a claim about the effect of a drug on blood pressure in older adults", "word " * 600)

Body = Callable[[dict[str, Any]], Any]  # tokenizer output -> last hidden state of the one query, (tokens, dim)


def eager_body(transformer: Any) -> Body:
    def body(tokens: dict[str, Any]) -> Any:
        return transformer(**tokens).last_hidden_state[0]

    return body


def traced_body(transformer: Any, tokenize: Callable[[str], dict[str, Any]]) -> Body | None:
    """A traced ``body`` that matches the eager one on every probe, or None. Call in inference mode."""
    import torch

    try:
        example = tokenize(_EXAMPLE)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on Python branches it recorded once
            module = torch.jit.trace(  # type: ignore[no-untyped-call]
                transformer, (example["input_ids"], example["attention_mask"]), strict=False, check_trace=False
            )
    except Exception:  # an architecture the tracer cannot follow: the eager path is always right
        log.info("the query model could not be traced; queries use the eager model", exc_info=True)
        return None

    def body(tokens: dict[str, Any]) -> Any:
        out = module(tokens["input_ids"], tokens["attention_mask"])
        hidden = out["last_hidden_state"] if isinstance(out, dict) else out[0]
        return hidden[0]

    eager = eager_body(transformer)
    for probe in _PROBES:
        tokens = tokenize(probe)
        a, b = eager(tokens).float().mean(dim=0), body(tokens).float().mean(dim=0)
        cosine = float(torch.nn.functional.cosine_similarity(a, b, dim=0))
        if cosine < MIN_COSINE:
            log.warning("the traced query model differs from the eager one (cosine %.6f); not used", cosine)
            return None
    return body
