"""The CLI skeleton: doctor on a fresh data directory, usage errors, JSON everywhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from app.cli.main import main
from tests.conftest import REPO, quire_cli


def test_doctor_json_on_a_fresh_data_directory(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh"
    result = quire_cli("--json", "doctor", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["integrity"] == "ok"
    assert report["journal_mode"] == "wal"
    assert report["sqlite_vec"].startswith("v0.1")
    assert report["data_dir"] == str(data_dir.resolve())
    assert "0001_initial" in report["migrations"]
    assert Path(report["model_path"], "config.json").exists()
    assert (data_dir / "quire.sqlite3").exists()
    components = {c["name"]: c for c in report["components"]}
    assert list(components) == [
        "apsw", "sqlite-vec", "huey", "torch", "transformers", "sentence-transformers", "openvino", "model",
        "multilingual model", "OCR (tesserocr)", "pypdfium2", "watchfiles", "mcp", "psycopg", "PySide6",
    ]  # fmt: skip
    assert "eng" in components["OCR (tesserocr)"]["detail"]
    assert components["openvino"]["detail"] == "CPU plugin, IR and PyTorch frontends"
    assert all(c["loaded"] and c["version"] for c in components.values()), components
    assert components["sqlite-vec"]["version"] == report["sqlite_vec"]
    assert components["model"]["detail"] == "all-MiniLM-L6-v2, 384 dimensions"
    assert components["PySide6"]["detail"].startswith("Qt 6.")
    assert components["psycopg"]["detail"].startswith("libpq ")


def test_usage_error_exits_2(tmp_path: Path) -> None:
    result = quire_cli("no-such-command", data_dir=tmp_path)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_bad_option_value_exits_2(tmp_path: Path) -> None:
    result = quire_cli("jobs", "--status", "nonsense", data_dir=tmp_path)
    assert result.returncode == 2


def test_jobs_json_lists_nothing_on_a_fresh_directory(tmp_path: Path) -> None:
    result = quire_cli("jobs", "--json", data_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"jobs": [], "next": None}


def test_worker_until_idle_returns(tmp_path: Path) -> None:
    result = quire_cli("worker", "--until-idle", "--json", data_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["jobs_finished"] == 0


def test_data_dir_from_environment(tmp_path: Path, monkeypatch: object) -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "QUIRE_DATA_DIR": str(tmp_path / "envdir")}
    out = subprocess.run([sys.executable, "-m", "app.cli", "--json", "doctor"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["data_dir"] == str((tmp_path / "envdir").resolve())


def test_main_called_in_a_process_leaves_its_signal_handling_alone(tmp_path: Path) -> None:
    """A test runner calls ``main`` in its own process: SIGPIPE's default action set there would end the runner
    without a word the next time any thread writes to a socket its peer closed."""
    before = signal.getsignal(signal.SIGPIPE)
    assert main(["--data-dir", str(tmp_path / "data"), "--json", "base", "list"]) == 0
    assert signal.getsignal(signal.SIGPIPE) == before


def test_the_program_ends_quietly_when_its_reader_goes_away(tmp_path: Path) -> None:
    """``quire … | head``: the output's reader is gone; the program ends by SIGPIPE, with no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "app.cli", "--data-dir", str(tmp_path / "data"), "--help"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == -signal.SIGPIPE, result.stderr
    assert result.stderr == ""
