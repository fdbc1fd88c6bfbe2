"""Embedding models Quire can use, by stable id. Only packaged, offline models: nothing is downloaded."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from knowledge.errors import InvalidInput
from knowledge.ingest.embedding import DEFAULT_MODEL_ID, ModelSpec, bf16_supported, default_model_spec

if TYPE_CHECKING:
    from knowledge.library.bases import Base

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx")


def model_spec(model_id: str) -> ModelSpec:
    if model_id == DEFAULT_MODEL_ID:
        return default_model_spec()
    raise InvalidInput(f"unknown embedding model {model_id!r}; available: {DEFAULT_MODEL_ID}")


def default_precision() -> str:
    """bf16 where the CPU has it (measured: same retrieval quality, ~2.5x the throughput), else fp32."""
    return "bf16" if bf16_supported() else "fp32"


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
