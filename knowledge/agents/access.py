"""Agent access for a data directory: on/off (off by default), client configuration, recent calls.

* The setting ``agents.mcp_enabled`` is a person's decision (:func:`set_enabled` refuses an agent) and is
  audited (``agent.access.changed``). ``quire mcp`` refuses to serve while it is off.
* :func:`client_config` is what a person pastes into an MCP client: the stdio command (what Claude
  Desktop and editors launch; the app hands it in, spelled for a source checkout or the frozen app) and,
  for HTTP, the URL and the bearer token.
* :func:`record_call` files one ``agent.call`` audit entry per tool call (tool name and outcome only:
  never arguments, which may carry a person's query text, never a token); :func:`recent_calls` reads the
  newest entries back for the Agent access page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, select

from knowledge.agents import tokens
from knowledge.errors import InvalidInput
from knowledge.library import audit
from knowledge.principal import Principal, require_person
from knowledge.store.schema import settings
from knowledge.store.schema_runs import audit_log

if TYPE_CHECKING:
    from knowledge.runtime import Quire

ENABLED_SETTING = "agents.mcp_enabled"
DEFAULT_HTTP_PORT = 8765


def is_enabled(quire: Quire) -> bool:
    with quire.db.read() as conn:
        row = conn.execute(select(settings.c.value).where(settings.c.key == ENABLED_SETTING)).first()
    return row is not None and row.value == "1"


def set_enabled(quire: Quire, principal: Principal, enabled: bool) -> bool:
    """Turn agent access on or off for this data directory (a person only); returns the new state."""
    require_person("turn agent access on or off", principal)
    with quire.db.write() as conn:
        conn.execute(settings.delete().where(settings.c.key == ENABLED_SETTING))
        conn.execute(insert(settings).values(key=ENABLED_SETTING, value="1" if enabled else "0"))
        audit.append(conn, audit.AGENT_ACCESS_CHANGED, principal.label, payload={"enabled": enabled})
    if enabled:
        tokens.ensure_token(quire.data_dir)
    return enabled


def revoke_token(quire: Quire, principal: Principal) -> str:
    """Replace the HTTP token: every client holding the old one is refused at once. Returns the new one."""
    require_person("revoke the agent token", principal)
    had = tokens.revoke(quire.data_dir)
    with quire.db.write() as conn:
        audit.append(conn, audit.AGENT_TOKEN_REVOKED, principal.label, payload={"had_token": had})
    return tokens.ensure_token(quire.data_dir)


def client_config(
    data_dir: Path, command: list[str], *, port: int = DEFAULT_HTTP_PORT, agent: str | None = None
) -> dict[str, Any]:
    """Ready-to-paste configuration: Claude Desktop's ``mcpServers`` entry (stdio) and the HTTP endpoint.

    ``command`` is ``quire --data-dir DIR mcp`` as this installation spells it (the app builds it:
    ``app.self_command``; a frozen app has no ``python -m``)."""
    command = [*command, *(["--agent", agent] if agent else [])]
    token = tokens.ensure_token(data_dir)
    return {
        "mcpServers": {"quire": {"command": command[0], "args": command[1:]}},
        "http": {
            "command": " ".join([*command, "--http", str(port)]),
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": {"Authorization": f"Bearer {token}"},
        },
    }


@dataclass(frozen=True)
class Call:
    at: float
    actor: str
    action: str
    tool: str | None
    ok: bool | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def record_call(quire: Quire, principal: Principal, tool: str, ok: bool, base_id: int | None = None) -> None:
    with quire.db.write() as conn:
        audit.append(conn, audit.AGENT_CALL, principal.label, base_id=base_id, payload={"tool": tool, "ok": ok})


def recent_calls(quire: Quire, *, limit: int = 50) -> list[Call]:
    """The newest agent entries (calls, proposals and decisions), newest first."""
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    query = (
        select(audit_log)
        .where(audit_log.c.action.in_(sorted(audit.AGENT_ACTIONS)))
        .order_by(audit_log.c.id.desc())
        .limit(limit)
    )
    with quire.db.read() as conn:
        entries = [audit.Entry.from_row(r) for r in conn.execute(query).all()]
    return [Call(e.at, e.actor, e.action, e.payload.get("tool"), e.payload.get("ok")) for e in entries]


def clients(calls: list[Call]) -> list[str]:
    """The agents seen in ``calls`` (newest first, each once)."""
    seen: list[str] = []
    for call in calls:
        if call.actor.startswith("agent:") and call.actor not in seen:
            seen.append(call.actor)
    return seen
