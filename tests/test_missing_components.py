"""A missing or unloadable native part is one readable sentence; ``doctor`` says which part did not load.

The CLI runs in-process here (``app.cli.main.main``) so a test can point sqlite-vec's extension
at a missing or broken file (``knowledge.store.native.vec_extension_path``) or block a library's import.
The packaged build checks the same message for real (packaging/check_package.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import EXIT_OTHER, main, missing_component
from knowledge import components
from knowledge.errors import MissingComponent
from knowledge.store import native
from knowledge.store.database import Database
from tests.conftest import REPO

UNREADABLE = ("http", "Traceback", "sqlalchemy", "OperationalError", "ExtensionLoadingError", "/")


def point_vec_extension_at(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    monkeypatch.setattr(native, "vec_extension_path", lambda: str(path))


def assert_one_readable_sentence(message: str, component: str) -> None:
    assert "\n" not in message.strip(), message
    assert component in message and "installation is incomplete" in message, message
    for bad in UNREADABLE:
        assert bad not in message.removeprefix("quire: "), f"{bad!r} in {message!r}"


def test_a_missing_extension_fails_opening_the_database_with_missing_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_vec_extension_at(monkeypatch, tmp_path / "nowhere" / "vec0")
    db = Database.in_dir(tmp_path / "data")
    try:
        with pytest.raises(MissingComponent) as raised, db.read():
            pass
    finally:
        db.dispose()
    assert raised.value.code == "missing_component"
    assert_one_readable_sentence(str(raised.value), "sqlite-vec")


@pytest.mark.parametrize("broken", ["missing", "not_a_library"])
def test_the_cli_reports_a_broken_extension_in_one_sentence(
    broken: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extension = tmp_path / "ext" / "vec0"
    if broken == "not_a_library":  # present but unloadable: a truncated download, a wrong platform
        extension.parent.mkdir()
        extension.with_suffix(".so").write_bytes(b"not an ELF file")
        extension.write_bytes(b"not an ELF file")
    point_vec_extension_at(monkeypatch, extension)

    code = main(["--data-dir", str(tmp_path / "data"), "base", "list"])

    captured = capsys.readouterr()
    assert code == EXIT_OTHER
    assert captured.out == ""
    assert_one_readable_sentence(captured.err, "sqlite-vec")


def test_the_json_error_names_the_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    point_vec_extension_at(monkeypatch, tmp_path / "nowhere" / "vec0")

    code = main(["--data-dir", str(tmp_path / "data"), "--json", "jobs"])

    error = json.loads(capsys.readouterr().out)["error"]
    assert code == EXIT_OTHER
    assert error["code"] == "missing_component"
    assert_one_readable_sentence(error["message"], "sqlite-vec")


def test_a_library_that_will_not_import_is_named(tmp_path: Path) -> None:
    """apsw is imported while the CLI builds its parser: a missing apsw must still give the sentence."""
    code = (
        "import sys\n"
        "sys.modules['apsw'] = None  # `import apsw` now raises ModuleNotFoundError, as in a broken bundle\n"
        "from app.cli.main import main\n"
        f"sys.exit(main(['--data-dir', {str(tmp_path / 'data')!r}, 'base', 'list']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == EXIT_OTHER, result.stderr
    assert_one_readable_sentence(result.stderr, "apsw")


def test_doctor_lists_the_component_that_did_not_load_and_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only the store's components here (fast); the full list is checked in test_cli_core's doctor test.
    monkeypatch.setattr(components, "PROBES", {k: components.PROBES[k] for k in ("apsw", "sqlite-vec", "huey")})
    point_vec_extension_at(monkeypatch, tmp_path / "nowhere" / "vec0")

    code = main(["--data-dir", str(tmp_path / "data"), "--json", "doctor"])

    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["ok"] is False
    by_name = {c["name"]: c for c in report["components"]}
    assert by_name["apsw"]["loaded"] is True and by_name["apsw"]["version"]
    assert by_name["huey"]["loaded"] is True and by_name["huey"]["version"]
    assert by_name["sqlite-vec"] == {
        "name": "sqlite-vec",
        "version": None,
        "loaded": False,
        "detail": f"MissingComponent: {MissingComponent(native.VEC_COMPONENT)}",
        "installed": True,  # part of this installation, and broken: not an optional part left out
    }
    assert_one_readable_sentence(report["database_error"], "sqlite-vec")
    assert "integrity" not in report  # the database could not be opened, so nothing was checked


def test_doctor_text_marks_a_component_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> tuple[str, str]:
        raise ImportError("libtorch_cpu.so: cannot open shared object file", name="torch")

    monkeypatch.setattr(components, "PROBES", {"apsw": components.PROBES["apsw"], "torch": broken})

    code = main(["--data-dir", str(tmp_path / "data"), "doctor"])

    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    torch_line = next(line for line in lines if line.split()[:1] == ["torch"])
    assert "NOT LOADED" in torch_line and "ImportError" in torch_line
    apsw_line = next(line for line in lines if line.split()[:1] == ["apsw"])
    assert " loaded " in apsw_line


def test_a_frozen_app_looks_for_the_extension_inside_its_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path / "Quire" / "_internal"), raising=False)

    assert native.vec_extension_path() == str(tmp_path / "Quire" / "_internal" / "sqlite_vec" / "vec0")


def test_an_import_error_without_a_name_is_named_by_its_cause() -> None:
    """numpy re-raises a failed C-extension import as a bare ImportError with advice and a web link."""
    try:
        try:
            raise ImportError("libscipy_openblas64_.so: ELF load command", name="numpy._core._multiarray_umath")
        except ImportError as inner:
            raise ImportError(
                "IMPORTANT: PLEASE READ THIS ... https://numpy.org/devdocs/user/troubleshooting"
            ) from inner
    except ImportError as outer:
        error = missing_component(outer)

    assert_one_readable_sentence(str(error), "numpy")
