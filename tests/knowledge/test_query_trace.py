"""The traced query path is used only where it gives the eager model's numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from transformers.modeling_outputs import BaseModelOutput

from knowledge.ingest.embedding import QueryEncoder, default_model_spec
from knowledge.ingest.query_trace import eager_body, traced_body


def _tokenize(text: str) -> dict[str, Any]:
    ids = torch.tensor([[1 + (ord(c) % 50) for c in text[:64]]])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


class LengthBranching(torch.nn.Module):
    """Python control flow on the input's length: a trace records one branch and is wrong on the other."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(64, 8)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        hidden = self.embed(input_ids)
        if input_ids.shape[1] > 20:  # recorded as a constant by the tracer
            hidden = -hidden
        return BaseModelOutput(last_hidden_state=hidden)  # what a Hugging Face model returns


class Plain(LengthBranching):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        return BaseModelOutput(last_hidden_state=self.embed(input_ids) * attention_mask[..., None])


def test_a_trace_that_differs_on_some_length_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    with torch.inference_mode():
        assert traced_body(LengthBranching().eval(), _tokenize) is None
    assert "differs from the eager one" in caplog.text  # refused by the probes, not by a failed trace


def test_a_trace_that_matches_is_used() -> None:
    model = Plain().eval()
    with torch.inference_mode():
        body = traced_body(model, _tokenize)
        assert body is not None
        tokens = _tokenize("some query text")
        expected = model(**tokens).last_hidden_state[0]
        assert torch.allclose(body(tokens), expected)
        assert torch.equal(eager_body(model)(tokens), expected)  # what a refused trace falls back to


@pytest.mark.model
def test_the_packaged_model_is_traced_and_matches_eager() -> None:
    encoder = QueryEncoder(default_model_spec(), precision="fp32")
    first = encoder.encode_query("Vitamin D deficiency is associated with depression.")
    assert encoder.traced
    model = encoder.model
    tokens = dict(model.tokenizer("vitamin d deficiency is associated with depression.", return_tensors="pt"))
    with torch.inference_mode():
        eager = model[0].auto_model(**tokens).last_hidden_state[0].float().mean(dim=0).numpy()
    eager /= np.linalg.norm(eager)
    assert float(first @ eager) > 0.99999
