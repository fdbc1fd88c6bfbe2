"""A model's weights by their digest, and Quire's per-user cache directory.

A base's material is stamped with the digest of the model's weight files (not only its name): new weights under
the same id are a new model. The digest is remembered in the cache directory, where converted models live too
(:mod:`knowledge.ingest.openvino_backend`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from pathlib import Path

from knowledge.errors import InvalidInput
from knowledge.ingest.embedding import ModelSpec

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx")


def cache_dir() -> Path:
    """Quire's per-user cache (converted models, remembered digests): ``QUIRE_CACHE_DIR``, else the platform's."""
    folder = os.environ.get("QUIRE_CACHE_DIR")
    if folder:
        return Path(folder)
    import platformdirs

    return Path(platformdirs.user_cache_dir("Quire", appauthor=False))


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
    return cache_dir() / "weights-digests.json"


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
