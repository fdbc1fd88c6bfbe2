"""Encoder tests with the real all-MiniLM-L6-v2 model (tests that load it are marked ``model``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from knowledge.ingest.embedding import (
    DEFAULT_MODEL_ID,
    Encoder,
    ModelSpec,
    QueryEncoder,
    bf16_supported,
    default_model_spec,
    plan_batches,
)

REPO = Path(__file__).resolve().parents[1]

SENTENCES = [
    "Vitamin D supplementation reduces the risk of respiratory infections.",
    "The mitochondrial membrane potential collapses during apoptosis.",
    "Quire keeps every knowledge base on your own machine.",
    "A cat sat on the mat.",
    "Randomised controlled trials are the gold standard for evaluating treatments, but observational "
    "cohorts reveal long-term harms that short trials cannot detect.",
    "CD4+ T cells orchestrate adaptive immune responses.",
    "Ok.",
    "Long " + "text about protein folding and chaperones " * 60,  # > 256 tokens: truncated by the model
]


@pytest.fixture(scope="module")
def spec() -> ModelSpec:
    return default_model_spec()


@pytest.fixture(scope="module")
def fp32(spec: ModelSpec) -> Encoder:
    return Encoder(spec, precision="fp32", threads=2)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_default_model_spec(spec: ModelSpec) -> None:
    assert spec.model_id == DEFAULT_MODEL_ID
    assert spec.dimension == 384
    assert (Path(spec.path) / "model.safetensors").is_file()


def test_invalid_arguments_raise(spec: ModelSpec) -> None:
    with pytest.raises(ValueError):
        Encoder(spec, precision="fp16")
    with pytest.raises(ValueError):
        Encoder(spec, threads=0)


def test_empty_input_does_not_load_the_model(spec: ModelSpec) -> None:
    enc = Encoder(spec, precision="fp32")
    out = enc.encode_documents([])
    assert out.shape == (0, 384) and out.dtype == np.float32
    assert enc.model is None
    assert enc.calls == 0 and enc.encoded_texts == 0


def test_forced_precision_is_in_the_fingerprint(spec: ModelSpec) -> None:
    assert Encoder(spec, precision="fp32").fingerprint == "all-MiniLM-L6-v2:384:fp32"
    assert Encoder(spec, precision="bf16").fingerprint == "all-MiniLM-L6-v2:384:bf16"


def test_auto_precision_follows_cpu_support(spec: ModelSpec) -> None:
    enc = Encoder(spec)  # resolving "auto" may import torch, but never loads the model
    assert enc.precision == ("bf16" if bf16_supported() else "fp32")
    assert enc.model is None


def test_plan_batches_sorts_and_respects_the_budget() -> None:
    counts = [300, 5, 120, 40, 40, 254, 7, 90, 1000, 3]
    batches = plan_batches(counts, batch_tokens=512, max_batch_size=3, max_tokens=256)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(counts)))
    lengths = [min(counts[i] + 2, 256) for i in flat]
    assert lengths == sorted(lengths)  # shortest first: little padding
    for b in batches:
        assert len(b) <= 3
        padded = len(b) * max(min(counts[i] + 2, 256) for i in b)
        assert padded <= 512 or len(b) == 1  # one text alone may exceed the budget


@pytest.mark.model
def test_documents_are_normalised_and_keep_their_order(spec: ModelSpec) -> None:
    # A small token budget forces several batches, so the restore-order step is exercised.
    enc = Encoder(spec, precision="fp32", threads=2, batch_tokens=300, max_batch_size=3)
    vectors = enc.encode_documents(SENTENCES)
    assert vectors.shape == (len(SENTENCES), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    batches = enc.calls
    assert batches >= 3 and enc.encoded_texts == len(SENTENCES)
    assert enc.truncated_texts == 1
    for text, vector in zip(SENTENCES, vectors, strict=True):
        alone = enc.encode_documents([text])[0]
        assert cosine(alone, vector) > 0.999
    assert enc.calls == batches + len(SENTENCES)
    assert enc.encoded_texts == 2 * len(SENTENCES)


@pytest.mark.model
def test_query_vector(spec: ModelSpec, fp32: Encoder) -> None:
    query = "does vitamin D prevent colds?"
    vector = fp32.encode_query(query)
    assert vector.shape == (384,) and vector.dtype == np.float32
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    assert cosine(vector, fp32.encode_documents([query])[0]) > 0.999
    docs = fp32.encode_documents(SENTENCES)
    assert int(np.argmax(docs @ vector)) == 0  # the vitamin D sentence


@pytest.mark.model
def test_query_encoder_uses_one_thread(spec: ModelSpec, fp32: Encoder) -> None:
    import torch

    queries = QueryEncoder(spec, precision="fp32")
    assert queries.threads == 1 and queries.fingerprint == fp32.fingerprint
    vector = queries.encode_query("mitochondria and apoptosis")
    assert torch.get_num_threads() == 1
    assert queries.calls == 0  # queries are not document batches
    assert cosine(vector, fp32.encode_query("mitochondria and apoptosis")) > 0.999
    assert torch.get_num_threads() == 2  # each encoder applies its own setting per call


@pytest.mark.model
def test_one_encoder_can_be_shared_between_threads(fp32: Encoder) -> None:
    expected = fp32.encode_documents(SENTENCES[:4])
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = fp32.encode_query(SENTENCES[i % 4])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, vector in results.items():
        assert cosine(vector, expected[i % 4]) > 0.999
    assert len(results) == 8


@pytest.mark.model
def test_bf16_stays_close_to_fp32(spec: ModelSpec, fp32: Encoder) -> None:
    if not bf16_supported():
        pytest.skip("CPU has no bf16 fast path")
    bf16 = Encoder(spec, precision="bf16", threads=2)
    assert bf16.fingerprint.endswith(":bf16")
    low = bf16.encode_documents(SENTENCES)
    assert low.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(low, axis=1), 1.0, atol=1e-5)
    full = fp32.encode_documents(SENTENCES)
    assert float(np.min(np.sum(low * full, axis=1))) >= 0.99


# Run in a fresh interpreter whose environment has no offline flags: the encoder must set them itself
# before the first Hugging Face import, and loading + encoding must not so much as resolve a host name.
_OFFLINE_PROBE = """
import json, os, sys
events = []
NETWORK = ("socket.connect", "socket.getaddrinfo")
sys.addaudithook(lambda event, args: events.append(event) if event in NETWORK else None)
from knowledge.ingest.embedding import Encoder, default_model_spec
v = Encoder(default_model_spec(), precision='fp32', threads=1).encode_query('hello')
import huggingface_hub.constants
print(json.dumps({
    "shape": list(v.shape),
    "env": [os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE")],
    "hub_offline": huggingface_hub.constants.HF_HUB_OFFLINE,
    "network": events,
}))
"""


@pytest.mark.model
def test_model_loads_without_any_network() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # a dead endpoint, should anything still try the Hub
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE_PROBE], cwd=REPO, env=env, timeout=120, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["shape"] == [384]
    assert probe["env"] == ["1", "1"]  # set by the encoder, not inherited: the test removed them
    assert probe["hub_offline"] is True  # and set early enough for huggingface_hub to read them at import
    assert probe["network"] == []  # no socket was connected, no host name looked up
