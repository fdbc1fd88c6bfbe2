"""``quire mcp`` as a real child process: stdio (the SDK's stdio client) and Streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from knowledge.agents import access, tokens
from knowledge.principal import Principal
from knowledge.runtime import Quire
from tests.agents.helpers import INITIALIZE, error_text, free_port, indexed_base, listening, payload, run
from tests.conftest import REPO, python_proc, quire_cli, wait_until
from tests.knowledge.helpers import make_base

PERSON = Principal.person("tester")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.mark.model
def test_stdio_child_process_lists_searches_and_reads(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    base, _ids = indexed_base(quire, tmp_path)
    access.set_enabled(quire, PERSON, True)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app.cli", "--data-dir", str(data_dir), "mcp", "--agent", "desktop"],
        cwd=str(REPO),
        env=_env(),
    )

    async def session() -> tuple[set[str], dict[str, object], dict[str, object]]:
        async with Client(params, read_timeout_seconds=120) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            found = payload(await client.call_tool("search", {"base": "kb", "query": "volcano lava", "limit": 3}))
            hit = found["hits"][0]  # type: ignore[index]
            chunk = payload(await client.call_tool("read", {"base": "kb", "chunk": hit["chunk_id"]}))
            return tools, found, chunk

    tools, found, chunk = run(session)
    assert {"search", "read", "propose_folder_run"} <= tools
    assert found["hits"][0]["item"]["name"] == "volcano.md"  # type: ignore[index]
    assert "Magma" in chunk["chunk"]["text"] and chunk["base"]["id"] == base.id  # type: ignore[index]
    from knowledge.library import audit

    actors = {e.actor for e in audit.list_entries(quire.db, actions=[audit.AGENT_CALL])}
    assert actors == {"agent:desktop"}


def test_turning_access_off_stops_a_running_stdio_server(quire: Quire, data_dir: Path) -> None:
    make_base(quire, "kb")
    access.set_enabled(quire, PERSON, True)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app.cli", "--data-dir", str(data_dir), "mcp"],
        cwd=str(REPO),
        env=_env(),
    )

    async def session() -> tuple[list[str], str]:
        async with Client(params, read_timeout_seconds=60) as client:
            before = payload(await client.call_tool("list_bases", {}))
            access.set_enabled(quire, PERSON, False)  # a person turns it off while the client is connected
            after = error_text(await client.call_tool("list_bases", {}))
            return [b["name"] for b in before["bases"]], after  # type: ignore[index]

    names, refused = run(session)
    assert names == ["kb"]
    assert "forbidden" in refused and "agent access is off" in refused


def test_mcp_refuses_while_agent_access_is_off(data_dir: Path) -> None:
    done = quire_cli("mcp", data_dir=data_dir, input="")
    assert done.returncode == 5 and "agent access is off" in done.stderr
    assert quire_cli("--as-agent", "bot", "mcp", "--enable", data_dir=data_dir).returncode == 5
    assert quire_cli("mcp", "--enable", data_dir=data_dir).returncode == 0


def test_http_binds_loopback_only_and_requires_the_token(quire: Quire, data_dir: Path) -> None:
    make_base(quire, "kb")
    access.set_enabled(quire, PERSON, True)
    port = free_port()
    proc = python_proc("-m", "app.cli", "--data-dir", str(data_dir), "mcp", "--http", str(port))
    try:
        wait_until(lambda: listening(port) or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert listening(port) == ["0100007F"]  # 127.0.0.1 only: no 0.0.0.0, no IPv6 wildcard
        url = f"http://127.0.0.1:{port}/mcp"
        init = INITIALIZE
        headers = {"Accept": "application/json, text/event-stream"}
        assert httpx.post(url, json=init, headers=headers).status_code == 401
        wrong = {**headers, "Authorization": "Bearer not-the-token"}
        assert httpx.post(url, json=init, headers=wrong).status_code == 401

        token = tokens.read_token(data_dir)
        assert token

        async def listed(bearer: str) -> list[str]:
            async with (
                httpx.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                got = payload(await client.call_tool("list_bases", {}))
                return [b["name"] for b in got["bases"]]  # type: ignore[index]

        assert run(lambda: listed(token)) == ["kb"]
        new_token = access.revoke_token(quire, PERSON)  # a running server refuses the old token at once
        assert new_token != token
        ok_headers = {**headers, "Authorization": f"Bearer {token}"}
        assert httpx.post(url, json=init, headers=ok_headers).status_code == 401
        assert run(lambda: listed(new_token)) == ["kb"]
    finally:
        proc.terminate()
        try:
            _out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
    assert token not in err and new_token not in err  # never logged


def test_token_is_owner_only_and_printed_only_by_print_config(data_dir: Path) -> None:
    assert quire_cli("mcp", "--enable", data_dir=data_dir).returncode == 0
    path = tokens.token_path(data_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    token = path.read_text().strip()
    enabled = quire_cli("mcp", "--enable", data_dir=data_dir)
    assert token not in enabled.stdout + enabled.stderr
    shown = quire_cli("--json", "mcp", "--print-config", "--http", "9911", data_dir=data_dir)
    assert shown.returncode == 0
    import json

    config = json.loads(shown.stdout)
    assert config["http"]["url"] == "http://127.0.0.1:9911/mcp"
    assert config["http"]["headers"]["Authorization"] == f"Bearer {token}"
    server = config["mcpServers"]["quire"]
    assert server["args"][-1] == "mcp" and str(data_dir) in server["args"]
