"""The one argv builder for Quire's own commands: frozen and not, and the MCP configuration that uses it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from app import self_command, worker_launch
from app.cli.main import main as cli_main
from tests.agents.helpers import run
from tests.conftest import REPO, quire_cli

# the window's worker: its own log, no progress line (the status bar shows the same numbers)
WORKER_ARGS = ["--log", "--progress-every", "0"]

FROZEN_EXE = "/opt/Quire/Quire"


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", FROZEN_EXE)
    return FROZEN_EXE


def test_a_source_checkout_runs_the_modules_with_this_interpreter() -> None:
    assert not self_command.is_frozen()
    assert self_command.quire_command("--data-dir", "D", "mcp") == [
        sys.executable,
        "-m",
        "app.cli",
        "--data-dir",
        "D",
        "mcp",
    ]
    expected = [sys.executable, "-m", "app.cli", "--data-dir", "D", "worker", *WORKER_ARGS]
    assert worker_launch.worker_argv("D") == expected
    assert self_command.worker_launcher_command(7, "D") == [sys.executable, "-m", "app.worker_launch", "7", "D"]


def test_the_frozen_app_takes_role_words_never_dash_m(frozen: str) -> None:
    assert self_command.quire_command("--data-dir", "D", "mcp") == [frozen, "cli", "--data-dir", "D", "mcp"]
    assert worker_launch.worker_argv("D") == [frozen, "cli", "--data-dir", "D", "worker", *WORKER_ARGS]
    assert self_command.worker_launcher_command(7, "D") == [frozen, "worker-launch", "7", "D"]


def test_the_frozen_apps_printed_agent_config_runs_its_cli_role(
    frozen: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["--data-dir", str(data_dir), "--json", "mcp", "--print-config", "--agent", "desk"]) == 0
    config = json.loads(capsys.readouterr().out)
    server = config["mcpServers"]["quire"]
    assert server["command"] == frozen and "-m" not in server["args"]
    assert server["args"] == ["cli", "--data-dir", str(data_dir), "mcp", "--agent", "desk"]
    assert config["http"]["command"].startswith(f"{frozen} cli --data-dir ")


def test_the_printed_config_starts_the_mcp_server_for_a_real_stdio_client(data_dir: Path) -> None:
    assert quire_cli("mcp", "--enable", data_dir=data_dir).returncode == 0
    shown = quire_cli("--json", "mcp", "--print-config", data_dir=data_dir)
    assert shown.returncode == 0, shown.stderr
    server = json.loads(shown.stdout)["mcpServers"]["quire"]
    params = StdioServerParameters(
        command=server["command"],
        args=server["args"],
        cwd=str(REPO),
        env={"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
    )

    async def tools() -> set[str]:
        async with Client(params, read_timeout_seconds=120) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert {"list_bases", "search", "read"} <= run(tools)
