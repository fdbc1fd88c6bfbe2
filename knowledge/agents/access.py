"""Agent access for a data directory: on/off (off by default), client configuration, recent calls.

* The setting ``agents.mcp_enabled`` is a person's decision (:func:`set_enabled` refuses an agent) and is
  audited (``agent.access.changed``). ``quire mcp`` refuses to serve while it is off.
* :func:`client_config` is what a person pastes into an MCP client: the stdio command (what Claude
  Desktop and editors launch; the app hands it in, spelled for a source checkout or the frozen app) and,
  for HTTP, the URL and the bearer token.
* :func:`record_call` files one ``agent.call`` audit entry per tool call (tool name and outcome only:
  never arguments, which may carry a person's query text, never a token); :func:`recent_calls` reads the
  newest entries back for the Agent access page.
* **Allowed roots** (setting ``agents.allowed_roots``, a person's list, empty by default): the only
  folders an agent may propose runs over. :func:`check_agent_folder` judges a folder *lexically first*
  (its absolute, normalised path against the listed roots), so a folder outside them is refused
  (``Forbidden``) before any system call touches it — nothing is listed, opened or hashed, and a missing
  folder gets the very answer an existing or too large one gets. Inside, its real path (links resolved)
  must stay inside a root's real path too.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select

from knowledge.agents import tokens
from knowledge.errors import Forbidden, InvalidInput, NotFound
from knowledge.library import audit
from knowledge.principal import Principal, require_person
from knowledge.store import settings
from knowledge.store.schema_runs import audit_log

if TYPE_CHECKING:
    from knowledge.runtime import Quire

ENABLED_SETTING = "agents.mcp_enabled"
ROOTS_SETTING = "agents.allowed_roots"
MAX_ALLOWED_ROOTS = 100
DEFAULT_HTTP_PORT = 8765
OUTSIDE_ALLOWED_ROOTS = (
    "agents may only propose folders inside the folders a person allowed on the Agent access page "
    "(or with `quire mcp --allow-root PATH`)"
)


def is_enabled(quire: Quire) -> bool:
    with quire.db.read() as conn:
        return settings.get(conn, ENABLED_SETTING) == "1"


def set_enabled(quire: Quire, principal: Principal, enabled: bool) -> bool:
    """Turn agent access on or off for this data directory (a person only); returns the new state."""
    require_person("turn agent access on or off", principal)
    with quire.db.write() as conn:
        settings.put(conn, ENABLED_SETTING, "1" if enabled else "0")
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


# -- allowed roots ------------------------------------------------------------------------------


def allowed_roots(quire: Quire) -> list[Path]:
    """The folders agents may propose runs over (absolute, as a person chose them), in the order added."""
    with quire.db.read() as conn:
        raw = settings.get(conn, ROOTS_SETTING)
    try:
        listed = json.loads(raw) if raw is not None else []
    except ValueError:
        return []
    return [Path(p) for p in listed if isinstance(p, str) and os.path.isabs(p)] if isinstance(listed, list) else []


def _write_roots(conn: Connection, principal: Principal, roots: list[Path], change: str) -> list[Path]:
    settings.put(conn, ROOTS_SETTING, json.dumps([str(r) for r in roots]))
    # no path in the entry: the audit log says that the list changed and how long it is now
    payload = {"allowed_roots": change, "count": len(roots)}
    audit.append(conn, audit.AGENT_ACCESS_CHANGED, principal.label, payload=payload)
    return roots


def allow_root(quire: Quire, principal: Principal, folder: str | os.PathLike[str]) -> list[Path]:
    """Let agents propose runs over ``folder`` and everything under it (a person only); the new list."""
    require_person("change which folders agents may propose", principal)
    path = Path(os.path.realpath(os.path.abspath(os.fspath(folder))))
    if not path.is_dir():
        raise NotFound(f"{os.fspath(folder)!r} is not a folder")
    roots = allowed_roots(quire)
    if path in roots:
        return roots
    if len(roots) >= MAX_ALLOWED_ROOTS:
        raise InvalidInput(f"at most {MAX_ALLOWED_ROOTS} folders can be allowed; remove one first")
    with quire.db.write() as conn:
        return _write_roots(conn, principal, [*roots, path], "added")


def disallow_root(quire: Quire, principal: Principal, folder: str | os.PathLike[str]) -> list[Path]:
    """Take ``folder`` off the list (a person only); the new list. Pending proposals stay for a person."""
    require_person("change which folders agents may propose", principal)
    given = Path(os.path.abspath(os.fspath(folder)))
    real = Path(os.path.realpath(given))
    roots = allowed_roots(quire)
    kept = [r for r in roots if r not in (given, real)]
    if len(kept) == len(roots):
        raise NotFound(f"{os.fspath(folder)!r} is not among the folders agents may propose")
    with quire.db.write() as conn:
        return _write_roots(conn, principal, kept, "removed")


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def check_agent_folder(quire: Quire, folder: str | os.PathLike[str]) -> None:
    """Refuse (``Forbidden``, always the same message) a folder outside the allowed roots.

    The first judgement is lexical and makes no system call on ``folder``: outside the roots nothing about
    it is looked at, so the answer cannot tell whether it exists, is a file, or is too large.
    """
    text = os.fspath(folder)
    if "\x00" in text or not os.path.isabs(text):
        raise InvalidInput("give the folder as an absolute path")
    lexical = Path(os.path.normpath(text))
    roots = allowed_roots(quire)
    real_roots = [Path(os.path.realpath(r)) for r in roots]
    if not _within(lexical, roots + real_roots):
        raise Forbidden(OUTSIDE_ALLOWED_ROOTS)
    if not _within(Path(os.path.realpath(lexical)), real_roots):  # a link inside pointing out
        raise Forbidden(OUTSIDE_ALLOWED_ROOTS)


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
