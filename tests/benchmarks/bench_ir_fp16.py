"""The OpenVINO IR's weights stored as fp16 (what the packaged app ships and a development install converts)
against the same IR with fp32 weights: vectors and retrieval on SciFact's quick subset (1,000 documents, 150
training queries), at both inference precisions a base can be made with.

    python -m tests.benchmarks.bench_ir_fp16            # -> tests/benchmarks/results/ir_fp16.json

The packaged model is converted here as the backend converts it and saved with fp32 and with fp16 weights; each
document is its title and text, encoded whole
(truncated at 256 tokens, as every chunk is), and a query's top 10 by cosine are scored with nDCG@10. Not part
of ``make bench``: it answers one question, asked when the conversion changes.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from tests.benchmarks.common import Result, log, run_benchmark, target
from tests.benchmarks.corpus import SciFact, load

TOLERANCE = 0.005  # |nDCG@10 change| a new encoding may cost at most (the encoders benchmark's rule)


def ndcg_at_10(data: SciFact, ids: list[str], docs: np.ndarray, queries: np.ndarray) -> float:
    scores, total = queries @ docs.T, 0.0
    for row, (qid, _text) in enumerate(data.queries):
        relevant = data.qrels[qid]
        top = np.argsort(-scores[row])[:10]
        dcg = sum(relevant.get(ids[d], 0) / math.log2(rank + 2) for rank, d in enumerate(top))
        ideal = sum(g / math.log2(rank + 2) for rank, g in enumerate(sorted(relevant.values(), reverse=True)[:10]))
        total += dcg / ideal if ideal else 0.0
    return total / len(data.queries)


def _irs(folder: Path) -> dict[str, Path]:
    """The packaged model's transformer converted as ``openvino_backend._convert`` does, saved twice: with fp32
    weights (what the conversion wrote before) and with fp16 weights (what it writes now)."""
    import openvino as ov
    import torch

    from knowledge.ingest import openvino_backend as ovb
    from knowledge.ingest.embedding import default_model_spec

    spec = default_model_spec()
    module = ovb.last_hidden_module(spec)
    feeds = ovb.Tokenize(spec)(list(ovb.PROBES))
    example = tuple(torch.from_numpy(feeds[k]) for k in ovb.INPUT_NAMES)
    shapes = [(k, [-1, -1], ov.Type.i64) for k in ovb.INPUT_NAMES]
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python conditions in the model's code
        converted = ov.convert_model(module, example_input=example, input=shapes)
    irs = {"fp32": folder / "fp32" / ovb.IR_NAME, "fp16": folder / "fp16" / ovb.IR_NAME}
    for weights, ir in irs.items():
        ov.save_model(converted, ir, compress_to_fp16=weights == "fp16")
    return irs


def _run(result: Result) -> None:
    from knowledge.ingest import openvino_backend as ovb
    from knowledge.ingest.embedding import default_model_spec

    data = load(quick=True)
    ids = list(data.docs)
    texts = [data.body(d) for d in ids]
    spec = default_model_spec()
    vectors: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    with tempfile.TemporaryDirectory(prefix="quire-ir-fp16-") as tmp:
        irs = _irs(Path(tmp))
        result.data["ir_bytes"] = {name: ir.with_suffix(".bin").stat().st_size for name, ir in irs.items()}
        for precision in ("fp32", "bf16"):
            for weights, ir in irs.items():
                ovb.model_ir = lambda _spec, ir=ir: ir  # this process only: the IR under test
                started = time.monotonic()
                docs = ovb.OpenVinoEncoder(spec, precision=precision, threads=2).encode_documents(texts)
                query = ovb.OpenVinoEncoder(spec, precision=precision, query=True)
                queries = np.stack([query.encode_query(text) for _qid, text in data.queries])
                vectors[(precision, weights)] = (docs, queries)
                log(f"{precision} inference, {weights} weights: {time.monotonic() - started:.0f} s")
    for precision in ("fp32", "bf16"):
        (d32, q32), (d16, q16) = vectors[(precision, "fp32")], vectors[(precision, "fp16")]
        before, after = ndcg_at_10(data, ids, d32, q32), ndcg_at_10(data, ids, d16, q16)
        cosine = float(min((d32 * d16).sum(axis=1).min(), (q32 * q16).sum(axis=1).min()))
        result.data[precision] = {"ndcg@10_fp32_weights": before, "ndcg@10_fp16_weights": after, "min_cosine": cosine}
        log(f"{precision}: nDCG@10 {before:.4f} -> {after:.4f}, lowest cosine {cosine:.6f}")
        name = f"{precision} inference: |nDCG@10 fp16 weights - fp32 weights|"
        result.targets.append(target(name, abs(after - before), at_most=TOLERANCE))
        name = f"{precision} inference: cosine to fp32 weights (lowest)"
        result.targets.append(target(name, cosine, at_least=0.9999))


def run(quick: bool = False) -> Result:
    return run_benchmark("ir_fp16", quick, _run)


if __name__ == "__main__":
    run()
    sys.exit(0)
