"""Agents see only what a person allowed: folders inside the allowed roots, bounded proposals, rate limits
per connection and in all (never per client-chosen name), resource reads as the agent, and an HTTP
endpoint that refuses a foreign Host or Origin.

Crafted inputs: folders outside the allowed roots (missing, too large, a file, a FIFO and an unreadable
folder inside, a link from an allowed root pointing out, a ``..`` path), a flood of client names, 500
pending proposals, requests with a rebinding page's Host and Origin.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from app.cli.main import exit_code_for
from knowledge import folder_runs
from knowledge.agents import access, proposals, tokens
from knowledge.agents.server import QuireMCP, RateLimit
from knowledge.errors import Forbidden, NotFound
from knowledge.folder_runs.rules import FolderTooLarge
from knowledge.library import audit
from knowledge.principal import Principal
from knowledge.runtime import Quire
from tests.agents.helpers import INITIALIZE, error_text, free_port, listening, run
from tests.conftest import python_proc, quire_cli, wait_until
from tests.knowledge.helpers import make_base
from tests.support.files import write_tree
from tests.support.fswatch import Inotify, tree_state

AGENT = Principal.agent("claude")
PERSON = Principal.person("tester")
CAP = 5  # the folder-run cap for these tests: "big" folders have more


@pytest.fixture
def places(quire: Quire, tmp_path: Path) -> dict[str, Path]:
    """An allowed root and, beside it, folders an agent must not see into."""
    make_base(quire, "kb")
    folder_runs.set_descendant_cap(quire, CAP)
    allowed = write_tree(tmp_path / "allowed", {"ok/a.md": "alpha", **{f"big/{n}.md": "x" for n in range(CAP + 3)}})
    outside = write_tree(
        tmp_path / "outside",
        {
            "small/a.md": "alpha",
            "secret.md": "a secret",
            "odd/x.md": "x",
            **{f"big/{n}.md": "x" for n in range(CAP + 3)},
        },
    )
    os.mkfifo(outside / "odd" / "pipe")  # reading it would hang: a walk that opened it would never return
    locked = outside / "odd" / "locked"
    locked.mkdir()
    (locked / "inside.md").write_text("hidden")
    locked.chmod(0)
    (allowed / "escape").symlink_to(outside / "small")  # inside the root, pointing out
    access.allow_root(quire, PERSON, allowed)
    return {"allowed": allowed, "outside": outside}


def _refusal(quire: Quire, folder: str | Path) -> Forbidden:
    with pytest.raises(Forbidden) as refused:
        proposals.propose_folder_run(quire, AGENT, "kb", folder)
    return refused.value


def test_outside_the_allowed_roots_is_forbidden_with_one_answer_and_nothing_is_looked_at(
    quire: Quire, places: dict[str, Path], tmp_path: Path, data_dir: Path
) -> None:
    allowed, outside = places["allowed"], places["outside"]
    crafted = [
        outside / "small",
        outside / "big",  # too large
        outside / "missing",  # not there
        outside / "secret.md",  # a file
        outside / "odd",  # a FIFO and an unreadable folder inside
        allowed / "escape",  # a link inside the root to a folder outside
        f"{allowed}/../outside/small",  # climbing out lexically
        "/",
    ]
    before = tree_state(tmp_path, skip=data_dir)
    watch = Inotify(outside)
    try:
        refusals = [_refusal(quire, folder) for folder in crafted]
        server = QuireMCP(quire, agent="claude").server

        async def session() -> list[str]:
            async with Client(server) as client:
                return [
                    error_text(await client.call_tool("propose_folder_run", {"base": "kb", "folder": str(f)}))
                    for f in (outside / "missing", outside / "big", outside / "secret.md")
                ]

        over_mcp = run(session)
        assert watch.events() == []  # nothing outside was listed, opened or read
        after = tree_state(tmp_path, skip=data_dir)
        # the proof is not vacuous: a person's preview of the same folder does list and read it
        folder_runs.preview(quire, PERSON, "kb", outside / "small")
        seen = watch.events()
        assert any(e.path == outside / "small" / "a.md" and "open" in e.what for e in seen), seen
    finally:
        watch.close()
        (outside / "odd" / "locked").chmod(0o700)
    # one answer, whatever is (or is not) there: no oracle for existence or size
    assert {str(r) for r in refusals} == {access.OUTSIDE_ALLOWED_ROOTS}
    assert {exit_code_for(r) for r in refusals} == {5}
    assert len(set(over_mcp)) == 1 and over_mcp[0].endswith(f"forbidden: {access.OUTSIDE_ALLOWED_ROOTS}")
    assert after == before  # nothing created or changed outside the data directory
    assert proposals.list_proposals(quire, status=None) == []
    # inside the allowed root the folder is judged as a preview judges it (different answers, by design)
    with pytest.raises(NotFound, match="folder not found"):
        proposals.propose_folder_run(quire, AGENT, "kb", allowed / "missing")
    with pytest.raises(FolderTooLarge):
        proposals.propose_folder_run(quire, AGENT, "kb", allowed / "big")
    filed, plan = proposals.propose_folder_run(quire, AGENT, "kb", allowed / "ok")
    assert filed.status == "pending" and [e.relative for e in plan.eligible] == ["a.md"]
    # taken off the list: the same folder is forbidden from now on
    access.disallow_root(quire, PERSON, allowed)
    assert str(_refusal(quire, allowed / "ok")) == access.OUTSIDE_ALLOWED_ROOTS


def test_only_a_person_changes_the_allowed_roots(data_dir: Path, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "papers", {"a.md": "alpha"})
    before = tree_state(tmp_path, skip=data_dir)
    refused = quire_cli("--as-agent", "bot", "mcp", "--allow-root", str(folder), data_dir=data_dir)
    assert refused.returncode == 5 and "an agent may not" in refused.stderr
    missing = quire_cli("mcp", "--allow-root", str(tmp_path / "nope"), data_dir=data_dir)
    assert missing.returncode == 3 and "is not a folder" in missing.stderr
    assert quire_cli("mcp", "--allow-root", str(folder), data_dir=data_dir).returncode == 0
    status = quire_cli("--json", "mcp", "--status", data_dir=data_dir)
    assert status.returncode == 0 and str(folder) in status.stdout and '"enabled": false' in status.stdout
    not_listed = quire_cli("mcp", "--disallow-root", str(tmp_path), data_dir=data_dir)
    assert not_listed.returncode == 3
    assert quire_cli("mcp", "--disallow-root", str(folder), data_dir=data_dir).returncode == 0
    assert "none (agents cannot propose folder runs)" in quire_cli("mcp", "--status", data_dir=data_dir).stdout
    assert tree_state(tmp_path, skip=data_dir) == before


def test_pending_proposals_are_capped_per_agent_and_in_all(quire: Quire, places: dict[str, Path]) -> None:
    for n in range(proposals.MAX_PENDING_PER_AGENT):
        proposals.propose_note(quire, AGENT, "kb", f"note {n}")
    with pytest.raises(proposals.TooManyProposals, match="already has 50 proposals waiting") as one:
        proposals.propose_note(quire, AGENT, "kb", "one too many")
    assert exit_code_for(one.value) == 4
    with pytest.raises(proposals.TooManyProposals):  # refused before the folder is walked
        proposals.propose_folder_run(quire, AGENT, "kb", places["allowed"] / "ok")
    server = QuireMCP(quire, agent="claude").server

    async def refused_over_mcp() -> str:
        async with Client(server) as client:
            return error_text(await client.call_tool("propose_note", {"base": "kb", "text": "again"}))

    assert "too_many_proposals: claude already has 50 proposals waiting" in run(refused_over_mcp)
    # many agents together: the total is capped too
    agents = proposals.MAX_PENDING // proposals.MAX_PENDING_PER_AGENT
    for a in range(1, agents):
        for n in range(proposals.MAX_PENDING_PER_AGENT):
            proposals.propose_note(quire, Principal.agent(f"agent-{a}"), "kb", f"note {n}")
    with pytest.raises(proposals.TooManyProposals, match="500 proposals are waiting"):
        proposals.propose_note(quire, Principal.agent("newcomer"), "kb", "hello")
    assert len(proposals.list_proposals(quire, limit=1000)) == proposals.MAX_PENDING
    # a person deciding one makes room again
    oldest = proposals.list_proposals(quire, limit=1000)[-1]
    proposals.dismiss_proposal(quire, PERSON, oldest.id)
    assert proposals.propose_note(quire, Principal.agent("newcomer"), "kb", "hello").status == "pending"


def test_a_flood_of_client_names_gets_no_fresh_buckets(quire: Quire) -> None:
    make_base(quire, "kb")
    rate = RateLimit(per_second=0.001, burst=3, global_per_second=0.001, global_burst=100)
    server = QuireMCP(quire, rate=rate).server  # no --agent: each client names itself

    async def flood() -> list[tuple[str, str | None]]:
        answers = []
        for n in range(20):
            async with Client(server, client_info=Implementation(name=f"bot-{n}", version="1")) as client:
                result = await client.call_tool("list_bases", {})
                answers.append((f"bot-{n}", error_text(result) if result.is_error else None))
        return answers

    answers = run(flood)
    served = [name for name, error in answers if error is None]
    assert served == ["bot-0", "bot-1", "bot-2"]  # one connection's burst, whatever the names
    assert all(error is not None and "rate_limited: " in error for _name, error in answers[3:])
    actors = [e.actor for e in audit.list_entries(quire.db, actions=[audit.AGENT_CALL])]
    assert sorted(actors) == ["agent:bot-0", "agent:bot-1", "agent:bot-2"]  # calls are still named and audited


def test_the_global_bucket_caps_a_flood_of_connections() -> None:
    rate = RateLimit(per_second=1.0, burst=5, global_per_second=0.001, global_burst=8, max_connections=16)
    granted = [rate.take(("http-peer", "127.0.0.1", port), now=0.0) == 0.0 for port in range(1000, 1100)]
    assert sum(granted) == 8  # a hundred fresh connections share one global bucket
    assert len(rate._buckets) == 16  # and the per-connection table stays bounded
    assert rate.take(("http-peer", "127.0.0.1", 1000), now=1.0) > 0  # the global bucket refills slowly


def test_resource_reads_are_rate_limited_and_audited_as_the_agent(quire: Quire) -> None:
    base = make_base(quire, "kb")
    server = QuireMCP(quire, rate=RateLimit(per_second=0.001, burst=2)).server

    async def reads() -> tuple[list[str], str]:
        async with Client(server, client_info=Implementation(name="reader", version="1")) as client:
            got = [
                (await client.read_resource("quire://bases")).contents[0].text,  # type: ignore[union-attr]
                (await client.read_resource(f"quire://bases/{base.id}")).contents[0].text,  # type: ignore[union-attr]
            ]
            try:
                await client.read_resource("quire://bases")
                third = ""
            except MCPError as exc:
                third = str(exc)
            return got, third

    got, third = run(reads)
    assert '"kb"' in got[0] and '"kb"' in got[1]
    assert "rate_limited" in third
    entries = audit.list_entries(quire.db, actions=[audit.AGENT_CALL])
    assert sorted((e.actor, e.payload["tool"], e.payload["ok"]) for e in entries) == [
        ("agent:reader", "resource:bases", True),
        ("agent:reader", "resource:bases", True),
    ]


def test_http_refuses_a_foreign_host_or_origin(quire: Quire, data_dir: Path, tmp_path: Path) -> None:
    make_base(quire, "kb")
    access.set_enabled(quire, PERSON, True)
    token = tokens.ensure_token(data_dir)
    port = free_port()
    before = tree_state(tmp_path, skip=data_dir)
    proc = python_proc("-m", "app.cli", "--data-dir", str(data_dir), "mcp", "--http", str(port))
    try:
        wait_until(lambda: listening(port) or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        url = f"http://127.0.0.1:{port}/mcp"
        init = INITIALIZE
        base_headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}

        def post(**headers: str) -> int:
            return int(httpx.post(url, json=init, headers={**base_headers, **headers}).status_code)

        assert post(Host=f"evil.example:{port}") == 421  # a rebinding page's own name
        assert post(Host=f"127.0.0.1:{port + 1}") == 421  # only this port (the SDK's default takes any)
        assert post(Host=f"localhost:{port}", Origin="http://evil.example") == 403
        assert post(Host=f"localhost:{port}", Origin=f"http://localhost:{port}") == 200
        assert post() == 200  # 127.0.0.1:PORT, no Origin: a local client
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    assert tree_state(tmp_path, skip=data_dir) == before
