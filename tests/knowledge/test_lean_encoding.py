"""The worker's lean document path: batches padded to a multiple of 32 straight through the transformer
give the vectors ``SentenceTransformer.encode`` gives, every text once, in input order."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.ingest import embedding
from knowledge.ingest.embedding import Encoder, default_model_spec, padded_length, plan_batches

TEXTS = [
    "Vitamin D supplementation reduces the risk of respiratory infections.",
    "Ok.",
    "The mitochondrial membrane potential collapses during apoptosis, releasing cytochrome c.",
    "ÜPPER case, accents and punctuation — all in one line!",
    "Long " + "text about protein folding and chaperones " * 60,  # > 256 tokens: truncated by the model
    "CD4+ T cells orchestrate adaptive immune responses " * 5,
    "   leading and trailing spaces   ",
]


def test_padded_length_rounds_up_within_the_model_limit() -> None:
    assert padded_length(5, max_tokens=256) == 7  # two special tokens, no rounding
    assert padded_length(5, max_tokens=256, pad_multiple=32) == 32
    assert padded_length(30, max_tokens=256, pad_multiple=32) == 32
    assert padded_length(31, max_tokens=256, pad_multiple=32) == 64
    assert padded_length(1000, max_tokens=256, pad_multiple=32) == 256
    assert padded_length(250, max_tokens=250, pad_multiple=32) == 250  # never above the model's limit


@pytest.mark.parametrize("pad_multiple", [1, 16, 32])
def test_padded_batches_cover_every_text_once_within_the_budget(pad_multiple: int) -> None:
    counts = [300, 5, 120, 40, 40, 254, 7, 90, 1000, 3, 31, 33, 64, 62]
    batches = plan_batches(counts, batch_tokens=512, max_batch_size=3, max_tokens=256, pad_multiple=pad_multiple)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(counts)))
    lengths = [padded_length(counts[i], max_tokens=256, pad_multiple=pad_multiple) for i in flat]
    assert lengths == sorted(lengths)
    for b in batches:
        assert len(b) <= 3
        longest = max(padded_length(counts[i], max_tokens=256, pad_multiple=pad_multiple) for i in b)
        assert len(b) * longest <= 512 or len(b) == 1
    if pad_multiple > 1:
        assert {padded_length(counts[i], max_tokens=256, pad_multiple=pad_multiple) % pad_multiple for i in flat} == {0}


@pytest.mark.model
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_padded_direct_batches_give_sentence_transformers_vectors(
    precision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = default_model_spec()
    # A small budget makes several batches of different padded lengths, so order restoring is exercised.
    lean = Encoder(spec, precision=precision, threads=2, batch_tokens=300, max_batch_size=3)
    vectors = lean.encode_documents(TEXTS)
    assert lean.calls >= 3 and lean.encoded_texts == len(TEXTS) and lean.truncated_texts == 1
    assert vectors.shape == (len(TEXTS), spec.dimension) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)

    # The reference: SentenceTransformer.encode on each text alone (no padding at all), as before.
    monkeypatch.setattr(embedding, "_mean_pooled_transformer", lambda model: None)
    reference = np.stack([lean.encode_documents([t])[0] for t in TEXTS])
    cosines = np.sum(vectors * reference, axis=1)
    # fp32: the same numbers up to float rounding. bf16: padding to 32 changes how the bf16 kernels
    # accumulate (measured worst 0.99990 on "Ok."), far inside bf16's own distance to fp32 (>= 0.9965).
    threshold = 0.99999 if precision == "fp32" else 0.9998
    assert (cosines > threshold).all(), cosines
