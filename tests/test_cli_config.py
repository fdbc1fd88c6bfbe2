"""``quire config get/set/list``: typed values, defaults, validation (exit 2), and the preferences used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledge import paths, preferences
from knowledge.folder_runs.rules import CAP_SETTING
from knowledge.ingest.walk import walk
from knowledge.runtime import Quire
from tests.conftest import quire_cli


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "config"
    monkeypatch.setenv(paths.CONFIG_ENV_VAR, str(folder))  # the CLI subprocesses inherit it
    return folder


def test_set_then_get_round_trips_typed_values(data_dir: Path, quire: Quire) -> None:
    assert quire_cli("config", "set", "worker.threads", "3", data_dir=data_dir).returncode == 0
    got = quire_cli("--json", "config", "get", "worker.threads", data_dir=data_dir)
    assert json.loads(got.stdout)["value"] == 3
    assert preferences.get(quire.db, "worker.threads") == 3  # the same value the dialog reads

    listed = json.loads(quire_cli("--json", "config", "list", data_dir=data_dir).stdout)["preferences"]
    by_key = {row["key"]: row for row in listed}
    assert set(by_key) == set(preferences.PREFERENCES)
    assert by_key["worker.nice"]["value"] == by_key["worker.nice"]["default"] == 10


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("worker.threads", "0", "between 1 and 16"),
        ("worker.nice", "lots", "whole number"),
        ("bases.default_precision", "fp8", "one of auto, fp32, bf16"),
        ("ocr.language", "English", "Tesseract language codes"),
        ("data_dir", "relative/path", "absolute path"),
    ],
)
def test_a_bad_value_exits_2_with_a_clear_message_and_stores_nothing(
    data_dir: Path, quire: Quire, key: str, value: str, message: str
) -> None:
    before = preferences.get(quire.db, key)
    result = quire_cli("config", "set", key, value, data_dir=data_dir)
    assert result.returncode == 2
    assert message in result.stderr
    assert preferences.get(quire.db, key) == before


def test_an_unknown_key_is_a_usage_error(data_dir: Path) -> None:
    result = quire_cli("config", "get", "no.such.key", data_dir=data_dir)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_the_folder_run_cap_is_the_existing_setting(data_dir: Path, quire: Quire) -> None:
    from knowledge.folder_runs.judging import descendant_cap

    assert CAP_SETTING in preferences.PREFERENCES
    assert quire_cli("config", "set", CAP_SETTING, "7", data_dir=data_dir).returncode == 0
    with quire.db.read() as conn:
        assert descendant_cap(conn) == 7


def test_data_dir_goes_to_the_user_config_file_and_applies_on_restart(
    data_dir: Path, tmp_path: Path, own_config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "elsewhere"
    result = quire_cli("config", "set", "data_dir", str(target), data_dir=data_dir)
    assert result.returncode == 0 and "on restart" in result.stdout
    assert json.loads((own_config_dir / "config.json").read_text())["data_dir"] == str(target)
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    assert paths.resolve_data_dir() == target.resolve()


def test_base_create_uses_the_default_precision_and_chunk_size(data_dir: Path) -> None:
    assert quire_cli("config", "set", "bases.default_precision", "fp32", data_dir=data_dir).returncode == 0
    assert quire_cli("config", "set", "bases.default_chunk_size", "100", data_dir=data_dir).returncode == 0
    created = json.loads(quire_cli("--json", "base", "create", "notes", data_dir=data_dir).stdout)
    assert (created["precision"], created["chunk_size"]) == ("fp32", 100)


def test_global_ignore_patterns_exclude_files_in_the_walk(tmp_path: Path, data_dir: Path, quire: Quire) -> None:
    folder = tmp_path / "folder"
    (folder / "build").mkdir(parents=True)
    (folder / "keep.md").write_text("kept")
    (folder / "draft.tmp").write_text("left out")
    (folder / "build" / "out.md").write_text("left out")
    assert quire_cli("config", "set", "ingest.ignore_patterns", "*.tmp\nbuild/", data_dir=data_dir).returncode == 0
    with quire.db.read() as conn:
        patterns = preferences.ignore_patterns(conn)
    found = walk(folder, ignore=patterns)
    reasons = {e.relative: e.excluded for e in found.entries}
    assert reasons["keep.md"] is None
    assert reasons["draft.tmp"] == reasons["build"] == "excluded by the global ignore patterns"


def test_the_battery_rule_pauses_on_battery_and_resumes_only_its_own_pause(data_dir: Path, quire: Quire) -> None:
    db = quire.db
    assert preferences.apply_battery_rule(db, True) is None  # off by default: nothing happens
    assert not preferences.is_paused(db)
    assert preferences.apply_battery_rule(db, False) is None
    assert quire_cli("config", "set", "worker.pause_on_battery", "yes", data_dir=data_dir).returncode == 0
    assert preferences.apply_battery_rule(db, True) is True
    assert preferences.is_paused(db)
    assert preferences.apply_battery_rule(db, True) is None  # no switch, no write
    assert preferences.apply_battery_rule(db, False) is False
    assert not preferences.is_paused(db)
    assert preferences.apply_battery_rule(db, None) is None  # no battery reported

    preferences.set_paused(db, True)  # a person's pause is not undone by going back to mains
    assert preferences.apply_battery_rule(db, True) is None
    assert preferences.apply_battery_rule(db, False) is None
    assert preferences.is_paused(db)
