"""The query encoder's direct path (transformer + mean pooling) gives the vectors SentenceTransformer.encode gives."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.ingest import embedding
from knowledge.ingest.embedding import Encoder, QueryEncoder, default_model_spec
from tests.support.queries import QUERIES


@pytest.mark.model
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_direct_query_vectors_match_sentence_transformers(precision: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = default_model_spec()
    direct = QueryEncoder(spec, precision=precision)
    vectors = np.stack([direct.encode_query(q) for q in QUERIES])
    reference = np.stack([Encoder.encode_query(direct, q) for q in QUERIES])  # SentenceTransformer.encode
    assert vectors.dtype == np.float32 and vectors.shape == (len(QUERIES), spec.dimension)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (np.sum(vectors * reference, axis=1) > 0.9999).all()
    monkeypatch.setattr(embedding, "_mean_pooled_transformer", lambda model: None)  # any other pipeline
    assert np.allclose(direct.encode_query(QUERIES[0]), reference[0], atol=1e-6)
