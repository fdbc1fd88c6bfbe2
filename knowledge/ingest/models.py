"""Embedding models Quire can use, by stable id. Only packaged, offline models: nothing is downloaded."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from knowledge.errors import InvalidInput
from knowledge.ingest import openvino_backend
from knowledge.ingest.embedding import DEFAULT_MODEL_ID, Encoder, ModelSpec, QueryEncoder, default_model_spec
from knowledge.ingest.embedding import bf16_supported as torch_bf16_supported

if TYPE_CHECKING:
    from knowledge.library.bases import Base

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx")
# What runs the packaged model's transformer. A base keeps the backend it was created with: the two make
# slightly different numbers (cosine ~0.9999), and a base's vectors never mix.
BACKENDS = ("torch", "openvino")


def model_spec(model_id: str) -> ModelSpec:
    if model_id == DEFAULT_MODEL_ID:
        return default_model_spec()
    raise InvalidInput(f"unknown embedding model {model_id!r}; available: {DEFAULT_MODEL_ID}")


def default_backend() -> str:
    """OpenVINO where it is installed (measured: faster than torch at the same precision, closer to fp32, less
    memory; docs/BENCHMARKS.md), else torch."""
    return "openvino" if openvino_backend.available() else "torch"


def default_precision(backend: str = "torch") -> str:
    """bf16 where the CPU (and the backend) has it (measured: same retrieval quality, ~2x the throughput),
    else fp32."""
    supported = openvino_backend.bf16_supported if backend == "openvino" else torch_bf16_supported
    return "bf16" if supported() else "fp32"


def check_backend(backend: str) -> str:
    """``backend`` if it is known and can run here, else a clear refusal."""
    if backend not in BACKENDS:
        raise InvalidInput(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "openvino" and not openvino_backend.available():
        raise InvalidInput("the openvino backend is not installed here (pip install openvino)")
    return backend


def chosen_encoder(precision: str = "auto", backend: str = "auto") -> tuple[str, str]:
    """A new base's (precision, backend) from the user's choices; "auto" is what this machine does best."""
    backend = default_backend() if backend == "auto" else check_backend(backend)
    return (default_precision(backend) if precision == "auto" else precision), backend


class EncoderChoice(NamedTuple):
    """What a base's vectors are made with: the packaged model, its precision and the backend that runs it."""

    model_id: str
    precision: str
    backend: str


def make_encoder(choice: EncoderChoice, *, query: bool) -> Encoder:
    """The encoder of a base's model, precision and backend: for documents (all cores) or queries (one)."""
    spec = model_spec(choice.model_id)
    if choice.backend == "openvino":
        return openvino_backend.OpenVinoEncoder(spec, precision=choice.precision, query=query)
    return QueryEncoder(spec, precision=choice.precision) if query else Encoder(spec, precision=choice.precision)


def weights_digest(spec: ModelSpec) -> str:
    """A hash of the model's weight files (not only its name): new weights under the same id are a new model."""
    files = sorted(f for f in Path(spec.path).iterdir() if f.suffix in WEIGHT_SUFFIXES and f.is_file())
    return _digest(tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))


@functools.cache
def _digest(files: tuple[tuple[str, int, int], ...]) -> str:
    """Hashed once per process and file version (~90 MB take a fraction of a second)."""
    h = hashlib.sha256()
    for name, _size, _mtime in files:
        h.update(Path(name).name.encode("utf-8"))
        with open(name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def model_stamp(base: Base) -> str:
    """Today's model stamp for a base's material: id, dimension, precision and the weights' hash (packaged
    model), or the remote model's fingerprint. Material stamped otherwise is stale."""
    if base.embedder is not None:
        return base.model_fingerprint
    return f"{base.model_fingerprint}:w{weights_digest(model_spec(base.model_id))}"
