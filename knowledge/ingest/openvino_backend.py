"""The OpenVINO encoder backend: the packaged model's transformer, converted once to OpenVINO IR and cached.

Why: on this CPU class OpenVINO runs the same graph faster than torch at the same precision and keeps
layer norm and softmax in fp32, so its bf16 vectors stay closer to fp32 than torch's (cosine >= 0.99997;
``tests/benchmarks/bench_encoders.py``, docs/BENCHMARKS.md). A worker on this backend never imports
torch once the IR is cached: it starts in about a second, not three.

Conversion (:func:`model_ir`): an IR shipped with the installation (:func:`shipped_dir`, where the packaged app
keeps the one ``make package`` converted and checked at build time, :func:`convert_into`) is used as it is, so
the packaged app needs no torch at all. Otherwise the first encoder of a model converts its transformer, in a
child process, with
``openvino.convert_model`` (the PyTorch frontend, via torch; ~4 s), checks the converted graph against the
eager torch model on probe texts, and saves it under ``<cache dir>/openvino/<model>-<weights hash>-<openvino
version>-<converter version>/``. The directory is written under a temporary name and renamed into place, so
a reader sees a whole IR or none; two processes converting at once each write their own and the first
rename wins. New weights, a new OpenVINO or a changed conversion get a new directory.

Precision is always an explicit hint (``INFERENCE_PRECISION_HINT``): OpenVINO's CPU default is bf16 on
CPUs that have it, and a base's vectors must be made at the precision stamped on them.

Weights are stored as fp16 in the IR (half the bytes: 45 MB, not 90) and widened when the model is compiled, so
the computation runs at the hinted precision either way. Measured on the SciFact quick subset (1,000 documents,
150 queries): fp32 inference on fp16 weights gives the fp32 IR's vectors at cosine >= 0.999999 and the same
nDCG@10 (0.8132 both), bf16 inference 0.8136 against 0.8143, so the stamp stays the weights' and the precision's.
A development install converts the same way as ``make package``, so both run the same IR.

Documents: two streams of one thread each (``PERFORMANCE_HINT=THROUGHPUT``; measured on 2 cores: ~10 % more
chunks/s than one two-thread stream, with smaller batches: 2,048 padded tokens). Batches are started in order on
:data:`REQUESTS_PER_STREAM` requests per stream, and the oldest is collected and its request refilled as soon as
it is done, instead of two batches started and collected together (where both streams waited for the slower
one and then for this thread, which needs the interpreter's lock while the job's thread writes). 2,000 SciFact
chunks beside a busy Python thread: 43.3 / 44.9 chunks/s together, 48.9 refilled with one request per stream, 51.5
with two; alone 66.8 / 67.9, 70.2 and 68.2. One per stream is what the whole SciFact ingest measured (182.6 s
before, 172.8 s after, in turn); two were not measured end to end. Queries: one stream of one thread
(``LATENCY``).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib.util
import json
import os
import shutil
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from knowledge.errors import ModelUnavailable
from knowledge.ingest.embedding import MODEL_LOCK, Encoder, ModelSpec, Vectors, cpu_lists_bf16, normalise, plan_batches
from knowledge.ingest.memory import release_free_memory
from knowledge.ingest.weights import cache_dir, weights_digest

OPENVINO_BATCH_TOKENS = 2048  # padded tokens per batch, two batches in flight (see the module docstring)
CONVERTER_VERSION = "ov2"  # bump when the conversion below changes what it writes (ov2: fp16 weights)
IR_NAME = "model.xml"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Converted graph vs eager torch (both fp32) on the probes: pooled cosine at least this.
MATCH_COSINE = 0.99999
REQUESTS_PER_STREAM = 1  # requests per stream, refilled oldest first (see the module docstring)
PROBES = (
    "a",
    "The quick brown fox jumps over the lazy dog.",
    "Mitochondrial DNA variants modulate the risk of type 2 diabetes in a large cohort. " * 12,  # > 256 tokens
)

Feeds = dict[str, np.ndarray]


def available() -> bool:
    """Whether the OpenVINO runtime is installed (it is a dependency; a source install may lack it)."""
    return importlib.util.find_spec("openvino") is not None


@functools.cache
def bf16_supported() -> bool:
    """Linux, the CPU lists AMX or AVX-512 BF16, and OpenVINO's CPU plugin reports BF16 (no torch import)."""
    if not cpu_lists_bf16():
        return False
    import openvino as ov

    try:
        return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    except RuntimeError:
        return False


def shipped_dir() -> Path:
    """Where an installation keeps IRs converted when it was built: ``<prefix>/share/quire/openvino`` (in the
    packaged app the prefix is the bundle's folder, as for Tesseract's data; a virtualenv has none there)."""
    return Path(sys.prefix) / "share" / "quire" / "openvino"


def ir_name(spec: ModelSpec) -> str:
    """The IR's directory name: the model, its weights, the OpenVINO version and the conversion's version, so
    new weights, a new OpenVINO or a changed conversion never load an old IR."""
    import openvino as ov

    return f"{spec.model_id}-{weights_digest(spec)}-{ov.__version__.split('-')[0]}-{CONVERTER_VERSION}"


def model_ir(spec: ModelSpec) -> Path:
    """The IR of ``spec``'s transformer: the shipped one, else the cached one, converted (and checked) now if
    it is not there yet."""
    name = ir_name(spec)
    shipped = shipped_dir() / name / IR_NAME
    if shipped.is_file():
        return shipped
    target = cache_dir() / "openvino" / name
    if not (target / IR_NAME).is_file():
        if importlib.util.find_spec("torch") is None:  # the packaged app: its IR is shipped, or it is broken
            from knowledge.errors import MissingComponent

            raise MissingComponent(f"the converted model {name} (no PyTorch here to convert it)")
        _convert_elsewhere(spec, target)
    return target / IR_NAME


def convert_into(folder: Path, spec: ModelSpec | None = None) -> tuple[Path, float | None]:
    """Convert and check ``spec``'s transformer (default: the packaged model) into ``folder/<ir_name>/`` now,
    in this process: what a build ships under :func:`shipped_dir`. Returns that directory and the checked
    cosine to torch, or None when an IR was already there (its name says it is the same weights, OpenVINO and
    conversion)."""
    from knowledge.ingest.embedding import default_model_spec

    spec = spec or default_model_spec()
    target = folder / ir_name(spec)
    if (target / IR_NAME).is_file():
        return target, None
    folder.mkdir(parents=True, exist_ok=True)
    return target, _convert(spec, target, MATCH_COSINE)


def _convert_elsewhere(spec: ModelSpec, target: Path) -> None:
    """Convert in a child process: torch (~300 MB) is needed once per machine and must not stay resident in a
    long-lived worker afterwards. A daemonic process (the window's query process) may have no children, so
    it converts itself."""
    import multiprocessing

    if multiprocessing.current_process().daemon:
        _convert(spec, target, MATCH_COSINE)
        return
    from knowledge.ingest.parse_worker import start_child

    proc, parent = start_child(_convert_child, spec, target, MATCH_COSINE, name="quire-convert")
    try:
        status, message = parent.recv()
    except EOFError:
        status, message = "error", "the conversion process ended without an answer"
    finally:
        parent.close()
        proc.join()
    if status != "ok":
        raise RuntimeError(message)


def _convert_child(conn: Any, spec: ModelSpec, target: Path, match: float) -> None:
    try:
        _convert(spec, target, match)
    except Exception as exc:  # the parent raises it with this message
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    else:
        conn.send(("ok", ""))
    conn.close()


def _convert(spec: ModelSpec, target: Path, match: float) -> float:
    """Convert, check against eager torch (the lowest pooled cosine on the probes must reach ``match``) and
    rename into ``target``; returns that cosine."""
    import openvino as ov
    import torch

    module = last_hidden_module(spec)
    tokenize = Tokenize(spec)
    feeds = tokenize(list(PROBES))
    example = tuple(torch.from_numpy(feeds[k]) for k in INPUT_NAMES)
    shapes = [(k, [-1, -1], ov.Type.i64) for k in INPUT_NAMES]
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python conditions in the model's code
        converted = ov.convert_model(module, example_input=example, input=shapes)
        expected = mean_pooled(module(*example).numpy(), feeds["attention_mask"])
    staging = target.with_name(f"{target.name}.part-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    ov.save_model(converted, staging / IR_NAME, compress_to_fp16=True)  # fp16 weights (module docstring)
    # Compiled outside the process's cache: the staging copy is checked once, then renamed or removed.
    checked = _compile(staging / IR_NAME, "fp32", query=False, threads=1).create_infer_request().infer(feeds)[0]
    got = mean_pooled(checked, feeds["attention_mask"])
    cosine = (normalise(got) * normalise(expected)).sum(axis=1).min()
    if not cosine >= match:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"the OpenVINO conversion of {spec.model_id} does not match torch (cosine {cosine:.6f})")
    try:
        staging.rename(target)
    except OSError:  # another process renamed its copy first
        if not (target / IR_NAME).is_file():
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return float(cosine)


def last_hidden_module(spec: ModelSpec) -> Any:
    """The model's transformer as a torch module from positional inputs (``INPUT_NAMES``) to its last hidden
    state, in eval mode: what graph converters and exporters trace (transformers 5 takes keywords only)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    # Its load report and progress bar are not news to the person adding a file.
    transformers_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = AutoModel.from_pretrained(spec.path)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    return LastHidden().eval()


class Tokenize:
    """The model's fast tokenizer as sentence-transformers feeds it to the transformer: special tokens,
    truncation at the model's maximum length, padding to the batch's longest (rounded up to a multiple)."""

    def __init__(self, spec: ModelSpec, pad_multiple: int | None = None) -> None:
        from tokenizers import Tokenizer

        from knowledge.ingest.chunking import model_max_tokens

        model_dir = Path(spec.path)
        self._tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.max_length = model_max_tokens(model_dir)
        self._tok.enable_truncation(self.max_length)
        pad = self._tok.padding or {}
        multiple = pad_multiple if pad_multiple and self.max_length % pad_multiple == 0 else None
        self._tok.enable_padding(
            pad_id=pad.get("pad_id", 0),
            pad_type_id=pad.get("pad_type_id", 0),
            pad_token=pad.get("pad_token", "[PAD]"),
            pad_to_multiple_of=multiple,
        )
        config = model_dir / "sentence_bert_config.json"
        settings = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
        self._lower = bool(settings.get("do_lower_case", False))

    def __call__(self, texts: Sequence[str]) -> Feeds:
        encodings = self._tok.encode_batch([t.lower() for t in texts] if self._lower else list(texts))
        return {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }


def mean_pooled(hidden: np.ndarray, attention_mask: np.ndarray) -> Vectors:
    """Masked mean of the token vectors, summed in float32 (sentence-transformers' mean pooling)."""
    mask = attention_mask[..., None].astype(np.float32)
    pooled: Vectors = (hidden.astype(np.float32, copy=False) * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
    return pooled


def _compile(ir: Path, precision: str, *, query: bool, threads: int) -> Any:
    """The IR compiled for the CPU at ``precision`` ("fp32" | "bf16"), for documents or for queries."""
    import openvino as ov

    config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32"}
    if query or threads < 2:
        config |= {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1 if query else threads}
    else:
        config |= {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": threads}
    compiled = _compiled_cache()
    if compiled is not None:  # OpenVINO keys its blobs by the model, the device and this config
        config["CACHE_DIR"] = str(compiled)
    return ov.Core().compile_model(str(ir), "CPU", config)


def _compiled_cache() -> Path | None:
    """Where OpenVINO keeps the models it compiled, so the next process loads the blob instead of compiling
    again (a query process's model ready ~3x sooner: 1.6 -> 0.5 s measured at load 18 on 2 cores); None
    when that folder cannot be made (compiling still works, only slower)."""
    folder = cache_dir() / "openvino-compiled"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder


_COMPILED: dict[tuple[str, str, bool, int], Any] = {}


def compiled_model(ir: Path, precision: str, *, query: bool, threads: int) -> Any:
    """:func:`_compile`, once per process and setting (callers hold the encoder lock)."""
    key = (str(ir), precision, query, threads)
    if key not in _COMPILED:
        _COMPILED[key] = _compile(ir, precision, query=query, threads=threads)
    return _COMPILED[key]


def streams(compiled: Any) -> int:
    return int(compiled.get_property("NUM_STREAMS"))


class OpenVinoEncoder(Encoder):
    """An :class:`Encoder` whose transformer runs on OpenVINO: the same batching (length-sorted, padded to a
    multiple of 32), the same masked mean pooling and normalisation, no torch once the IR is cached.

    ``query=True`` makes the search encoder (one thread, latency hint). Document batches are started and
    collected under the process-wide :data:`~knowledge.ingest.embedding.MODEL_LOCK`, one at a time, so a query
    of this process waits for one step, not a whole call (the queued batches run on meanwhile).
    """

    backend = "openvino"

    def __init__(self, spec: ModelSpec, *, precision: str = "auto", threads: int | None = None, query: bool = False):
        super().__init__(spec, precision=precision, threads=1 if query else threads, batch_tokens=OPENVINO_BATCH_TOKENS)
        self.query = query
        self._tokenize: Tokenize | None = None
        self._requests: list[Any] = []
        # One document call at a time owns the requests (the encoder stage and a warm-up may call at once): a
        # call refills them as they finish, outside the model lock, so a second call must not start on them.
        self._documents = threading.Lock()

    @property
    def precision(self) -> str:
        if self._precision is None:
            requested = self._requested_precision
            self._precision = ("bf16" if bf16_supported() else "fp32") if requested == "auto" else requested
        return self._precision

    def encode_documents(self, texts: Sequence[str]) -> Vectors:
        """float32 array (len(texts), dimension), L2-normalised rows, in input order."""
        if not texts:
            return np.zeros((0, self.spec.dimension), dtype=np.float32)
        counts = self.tokenizer.token_counts(texts)
        limit = self.tokenizer.max_content_tokens
        plan = plan_batches(
            counts,
            batch_tokens=self.batch_tokens,
            max_batch_size=self.max_batch_size,
            max_tokens=limit + 2,
            pad_multiple=self.pad_multiple,
        )
        out = np.empty((len(texts), self.spec.dimension), dtype=np.float32)
        with self._documents:
            self._encode_plan(texts, plan, counts, out)
        if self.trim_memory:
            release_free_memory()
        return normalise(out)

    def _encode_plan(self, texts: Sequence[str], plan: list[list[int]], counts: list[int], out: np.ndarray) -> None:
        """Start the plan's batches in order, each request refilled as soon as its batch is collected (oldest
        first); pool every batch's rows into ``out``."""
        limit = self.tokenizer.max_content_tokens
        tokenize = self._tokenizer()
        running: collections.deque[tuple[Any, Feeds, list[int]]] = collections.deque()
        with MODEL_LOCK:  # the first call loads the model once
            free = list(self._loaded_requests())  # this call's alone while it holds self._documents
        try:
            for batch in plan:
                feed = tokenize([texts[i] for i in batch])
                with MODEL_LOCK:  # a query in this process waits for one step
                    if not free:
                        free.append(self._collect(running.popleft(), out))
                    request = free.pop()
                    request.start_async(feed)
                    running.append((request, feed, batch))
                self.calls += 1
                self.encoded_texts += len(batch)
                self.truncated_texts += sum(1 for i in batch if counts[i] > limit)
            with MODEL_LOCK:
                while running:
                    self._collect(running.popleft(), out)
        finally:  # after a fault, no request of this call is left running into the next call
            for request, _feed, _batch in running:
                with contextlib.suppress(Exception):
                    request.wait()

    @staticmethod
    def _collect(started: tuple[Any, Feeds, list[int]], out: np.ndarray) -> Any:
        """Wait for the oldest batch in flight, pool its rows into ``out``; answer its request, free again."""
        request, feed, batch = started
        request.wait()
        out[batch] = mean_pooled(request.get_output_tensor(0).data, feed["attention_mask"])
        return request

    def encode_query(self, text: str) -> Vectors:
        """float32 vector (dimension,), L2-normalised."""
        feed = self._tokenizer()([text])
        with MODEL_LOCK:
            request = self._loaded_requests()[0]
            hidden = request.infer(feed)[0]
            pooled = mean_pooled(hidden, feed["attention_mask"])
        vector: Vectors = normalise(pooled)[0]
        return vector

    def _tokenizer(self) -> Tokenize:
        if self._tokenize is None:
            # Documents pad to a multiple (few shapes); a lone query needs no padding at all.
            self._tokenize = Tokenize(self.spec, None if self.query else self.pad_multiple)
        return self._tokenize

    def _loaded_requests(self) -> list[Any]:
        # Called with MODEL_LOCK held, so concurrent first calls convert and compile once.
        if not self._requests:
            try:
                compiled = compiled_model(model_ir(self.spec), self.precision, query=self.query, threads=self.threads)
            except (OSError, RuntimeError, ValueError) as exc:  # a damaged IR or cache: not a bug, search degrades
                raise ModelUnavailable(f"the embedding model {self.spec.model_id} could not be loaded") from exc
            self._model = compiled
            self._requests = [compiled.create_infer_request() for _ in range(REQUESTS_PER_STREAM * streams(compiled))]
        return self._requests
