"""``quire mcp``: the knowledge bases served to AI agents over MCP (official SDK, ``mcp`` 2.x).

Contract
* Every tool call and resource read acts as an **agent principal** (``--agent NAME``, else the name the
  client gives, else ``mcp-client``) inside :func:`acting_as`, so the operations layer refuses any
  write whatever a handler does; there is no way to act as a person through this server. The only
  things an agent can file are proposals (``knowledge.agents.proposals``), which a person decides. The
  agent's credential, which its proposal cap counts under, is ``--agent NAME`` or else ``mcp-client``:
  what a person configured, never the name a client gives.
* Answers are bounded (``reads.LIMITS``). Every tool call **and resource read** is rate-limited by two
  token buckets — one per connection (:func:`_connection_key`), one shared by all of them — never by the
  name a client gives (a client choosing a fresh name per call gets no fresh bucket; a flood of new
  connections meets the shared one), and audited as ``agent.call`` under the agent principal (tool or
  ``resource:<kind>`` and outcome, never arguments).
* Errors are clear MCP errors: a knowledge error becomes a tool error (``isError``) or a resource error
  carrying its code and message; anything unexpected is logged here and answered with a generic
  message, so no stack trace and no path of another base ever reaches the client.
* HTTP (:func:`serve_http`) binds 127.0.0.1 only and requires the data directory's bearer token
  (``knowledge.agents.tokens``), re-read on every request so revocation applies at once. Its Host and
  Origin checks (DNS-rebinding protection) are configured here, not inherited from the SDK: only
  ``127.0.0.1:PORT`` and ``localhost:PORT`` (421 otherwise), origins ``http://`` of the same (403).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.transport_security import TransportSecuritySettings

from knowledge.agents import access, proposals, reads
from knowledge.agents.related_tool import add_related_tool
from knowledge.errors import Forbidden, KnowledgeError, NotFound
from knowledge.library.bases import list_bases
from knowledge.principal import Principal, acting_as

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from knowledge.runtime import Quire

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_AGENT = "mcp-client"
HOST = "127.0.0.1"
INSTRUCTIONS = (
    "Quire's local knowledge bases. Read with list_bases, search, related, read, list_items and status; cite "
    "chunks by their citation id. You cannot change anything: propose_folder_run and propose_note file a proposal that "
    "a person accepts or dismisses in Quire."
)


@dataclass
class RateLimit:
    """Token buckets: one per connection (``burst`` calls at once, refilled at ``per_second``), bounded in
    number (least recently used forgotten first), and one global bucket every call also takes from."""

    per_second: float = 10.0
    burst: int = 40
    global_per_second: float = 40.0
    global_burst: int = 160
    max_connections: int = 1024
    _buckets: OrderedDict[Hashable, tuple[float, float]] = field(default_factory=OrderedDict)
    _global: tuple[float, float] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def _refill(state: tuple[float, float] | None, burst: int, rate: float, now: float) -> float:
        tokens, last = state if state is not None else (float(burst), now)
        return min(float(burst), tokens + (now - last) * rate)

    def take(self, connection: Hashable, now: float | None = None) -> float:
        """0 if the call may go ahead (a token is taken from both buckets), else the seconds to wait."""
        now = time.monotonic() if now is None else now
        with self._lock:
            mine = self._refill(self._buckets.get(connection), self.burst, self.per_second, now)
            shared = self._refill(self._global, self.global_burst, self.global_per_second, now)
            wait = max(
                0.0 if mine >= 1.0 else (1.0 - mine) / self.per_second,
                0.0 if shared >= 1.0 else (1.0 - shared) / self.global_per_second,
            )
            if wait == 0.0:
                mine, shared = mine - 1.0, shared - 1.0
            self._buckets[connection] = (mine, now)
            self._buckets.move_to_end(connection)
            while len(self._buckets) > self.max_connections:
                self._buckets.popitem(last=False)
            self._global = (shared, now)
            return wait


def clean_agent_name(name: str | None) -> str:
    """A short, printable agent name (it ends up in audit entries and the window)."""
    cleaned = re.sub(r"[^A-Za-z0-9 ._@-]+", "-", (name or "").strip())[:64].strip(" -")
    return cleaned or DEFAULT_AGENT


def _client_name(ctx: Context[Any, Any] | None) -> str | None:
    """The name the client gave in its handshake, when the transport carries one."""
    try:
        params = ctx.session.client_params if ctx is not None else None
    except Exception:  # outside a request, or a transport without a session handshake
        return None
    info = getattr(params, "client_info", None)
    return getattr(info, "name", None)


def _connection_key(ctx: Context[Any, Any] | None) -> Hashable:
    """The connection a request came on, for its rate limit — never the name the client gives.

    Over HTTP: the MCP session (``mcp-session-id``) when the client holds one, else its TCP connection
    (address and port). Over stdio (or in process) this server serves the one client at the other end
    of its stream: one key. The SDK makes a fresh session object per request on current protocol
    versions, so the object itself cannot be the key.
    """
    try:
        request = ctx.request_context.request if ctx is not None else None
    except Exception:  # outside a request
        request = None
    headers = getattr(request, "headers", None)
    if headers is None:
        return ("stream",)
    session = headers.get("mcp-session-id")
    if session:
        return ("http-session", str(session)[:128])
    client = getattr(request, "client", None)
    return ("http-peer", getattr(client, "host", None), getattr(client, "port", None))


def _resource_kind(uri: object) -> str:
    """``resource:items`` for ``quire://items/…``: what was read, without the ids (never arguments)."""
    text = str(uri)
    kind = text.split("://", 1)[-1].split("/", 1)[0]
    return "resource:" + (kind if kind in {"bases", "items", "chunks"} else "other")


def _knowledge_message(exc: KnowledgeError) -> str:
    return f"{exc.code}: {exc}"


class QuireMCP:
    """The MCP server of one open data directory."""

    def __init__(
        self,
        quire: Quire,
        *,
        agent: str | None = None,
        rate: RateLimit | None = None,
        require_enabled: bool = False,
        **server_options: Any,
    ) -> None:
        """``require_enabled``: refuse every call while agent access is off (``quire mcp`` sets it, so
        turning access off in the window stops a running server too)."""
        self.quire = quire
        self.require_enabled = require_enabled
        self.agent = clean_agent_name(agent) if agent else None
        self.rate = rate or RateLimit()
        self.server: MCPServer[Any] = _GuardedServer(
            self, "quire", instructions=INSTRUCTIONS, log_level="WARNING", **server_options
        )
        self._add_tools()
        self._add_resources()

    # -- plumbing ----------------------------------------------------------------------------------

    def principal(self, ctx: Context[Any, Any] | None) -> Principal:
        """Named by ``--agent`` or else by the client; its credential (what its proposal cap is kept
        under) is what a person configured — ``--agent``, else ``mcp-client`` — never the client's name."""
        return Principal.agent(self.agent or clean_agent_name(_client_name(ctx)), self.agent or DEFAULT_AGENT)

    def _refuse_if_off(self) -> None:
        if self.require_enabled and not access.is_enabled(self.quire):
            raise Forbidden("agent access is off for this data directory; a person can turn it on in Quire")

    def _call(self, ctx: Context[Any, Any] | None, tool: str, fn: Callable[[], T]) -> T:
        who = self.principal(ctx)
        wait = self.rate.take(_connection_key(ctx))
        if wait > 0:
            raise ToolError(f"rate_limited: too many calls from {who.name}; retry in {wait:.1f} s")
        try:
            self._refuse_if_off()
        except KnowledgeError as exc:
            raise ToolError(_knowledge_message(exc)) from None
        ok = False
        try:
            with acting_as(who):
                result = fn()
            ok = True
            return result
        except KnowledgeError as exc:
            raise ToolError(_knowledge_message(exc)) from None
        except ToolError:
            raise
        except Exception:
            log.exception("MCP tool %s failed", tool)
            raise ToolError("internal_error: Quire could not answer this call; its log has the details") from None
        finally:
            self.audit_call(who, tool, ok)

    def audit_call(self, who: Principal, tool: str, ok: bool) -> None:
        try:
            access.record_call(self.quire, who, tool, ok)
        except Exception:  # an audit hiccup (a busy database) must not turn an answer into an error
            log.warning("could not record an agent call in the audit log", exc_info=True)

    def _read(self, fn: Callable[[], dict[str, Any]]) -> str:
        """A resource's answer; runs inside :meth:`_GuardedServer.read_resource` (rate limit, principal, audit)."""
        try:
            self._refuse_if_off()
            return json.dumps(fn(), default=str)
        except NotFound as exc:
            raise ResourceNotFoundError(_knowledge_message(exc)) from None
        except KnowledgeError as exc:
            raise ResourceError(_knowledge_message(exc)) from None
        except Exception:
            log.exception("MCP resource read failed")
            raise ResourceError("internal_error: Quire could not read this resource") from None

    # -- tools -------------------------------------------------------------------------------------

    def _add_tools(self) -> None:
        q = self.quire
        mcp = self.server
        add_related_tool(mcp, self._call, q)  # related (see also)

        @mcp.tool(description="The knowledge bases: id, name, status (ok/failed), locked, item counts.")
        def list_bases(ctx: Context[Any, Any]) -> dict[str, Any]:
            return self._call(ctx, "list_bases", lambda: {"bases": reads.bases_overview(q)})

        @mcp.tool(
            description=(
                "Search one knowledge base. mode: hybrid (default: both rankings, fused as fitted on judged queries), "
                "hybrid-rrf (both, by reciprocal-rank fusion), vector or keyword. limit: 1-25. subtree: an "
                "item id (a folder) to search under. The query takes the syntax of README 'Search syntax': "
                '"exact phrase" (required), -word (leave out documents with it), type:pdf, in:"folder name", '
                "tag:project (note tags), from:ana (mail sender), after:2024-01, before:2025 (file modification "
                "date; a message's Date), and identifiers (10.1000/xyz123, ABC-1234, report_v2.pdf, parse_query) "
                "matched exactly; filters alone (tag:project) list the documents they match, newest first, one hit "
                "each (mode: filter); a malformed query is an error saying why. Each hit has the chunk text, its item, "
                "source path, page/line location, score, a stable citation id and linked_from (notes whose "
                "[[wiki links]] name its document). When meaning search is unavailable (the model will not load, "
                "the base's embedding endpoint is down, its vector index unreadable) a hybrid or vector search "
                'answers by keyword and says so in degraded: {"mode": "keyword", "code", "message"}.'
            )
        )
        def search(
            ctx: Context[Any, Any],
            base: str,
            query: str,
            mode: str = "hybrid",
            limit: int = 10,
            subtree: int | None = None,
        ) -> dict[str, Any]:
            return self._call(
                ctx, "search", lambda: reads.search_base(q, base, query, mode=mode, limit=limit, subtree=subtree)
            )

        @mcp.tool(
            description=(
                "Read from a knowledge base: give chunk (a chunk id from search) to get it with up to `neighbours` "
                "(0-3) chunks on each side, or item (a completed file or note) to get its text one page at a time."
            )
        )
        def read(
            ctx: Context[Any, Any],
            base: str,
            chunk: int | None = None,
            item: int | None = None,
            neighbours: int = 1,
            page: int = 0,
        ) -> dict[str, Any]:
            def answer() -> dict[str, Any]:
                if (chunk is None) == (item is None):
                    raise ToolError("invalid_input: give exactly one of chunk or item")
                if chunk is not None:
                    return reads.read_chunk(q, base, chunk, neighbours=neighbours)
                assert item is not None
                return reads.read_item_text(q, base, item, page=page)

            return self._call(ctx, "read", answer)

        @mcp.tool(
            description=(
                "A folder's children (folder: an item id; none for the top level) with status and failure reason, "
                "folders first then by name. limit 1-100; pass next_cursor back as cursor for the next page."
            )
        )
        def list_items(
            ctx: Context[Any, Any], base: str, folder: int | None = None, cursor: str | None = None, limit: int = 50
        ) -> dict[str, Any]:
            return self._call(
                ctx, "list_items", lambda: reads.list_children(q, base, folder=folder, cursor=cursor, limit=limit)
            )

        @mcp.tool(description="Jobs in flight and failed items with reasons, for one base or all of them.")
        def status(ctx: Context[Any, Any], base: str | None = None) -> dict[str, Any]:
            return self._call(ctx, "status", lambda: reads.status(q, base))

        @mcp.tool(
            description=(
                "Propose ingesting a local folder into a base as one folder run. Returns the preview (eligible and "
                "ineligible files with reasons, the cap) and files a pending proposal; nothing is added until a "
                "person starts the run in Quire."
            )
        )
        def propose_folder_run(ctx: Context[Any, Any], base: str, folder: str) -> dict[str, Any]:
            def answer() -> dict[str, Any]:
                proposal, plan = proposals.propose_folder_run(q, self.principal(ctx), base, folder)
                preview = proposals.agent_preview(plan.as_dict())
                return {"proposal_id": proposal.id, "status": proposal.status, "preview": preview}

            return self._call(ctx, "propose_folder_run", answer)

        @mcp.tool(description="Propose adding a text note to a base; a person accepts or dismisses it in Quire.")
        def propose_note(ctx: Context[Any, Any], base: str, text: str, title: str | None = None) -> dict[str, Any]:
            def answer() -> dict[str, Any]:
                proposal = proposals.propose_note(q, self.principal(ctx), base, text, title)
                return {"proposal_id": proposal.id, "status": proposal.status, "preview": proposal.preview}

            return self._call(ctx, "propose_note", answer)

    # -- resources ---------------------------------------------------------------------------------

    def _add_resources(self) -> None:
        q = self.quire
        mcp = self.server

        @mcp.resource("quire://bases", name="bases", mime_type="application/json", description="All bases")
        def bases_resource() -> str:
            return self._read(lambda: {"bases": [reads.base_view(b) for b in list_bases(q.db)]})

        @mcp.resource("quire://bases/{base}", name="base", mime_type="application/json", description="One base")
        def base_resource(base: str) -> str:
            return self._read(lambda: reads.base_resource(q, base))

        @mcp.resource("quire://items/{base}/{item}", name="item", mime_type="application/json", description="One item")
        def item_resource(base: str, item: str) -> str:
            return self._read(lambda: reads.item_resource(q, base, _as_id(item, "item")))

        @mcp.resource(
            "quire://chunks/{base}/{chunk}",
            name="chunk",
            mime_type="application/json",
            description="One chunk with its neighbours",
        )
        def chunk_resource(base: str, chunk: str) -> str:
            return self._read(lambda: reads.read_chunk(q, base, _as_id(chunk, "chunk"), neighbours=1))


class _GuardedServer(MCPServer[Any]):
    """The SDK's server, with every resource read rate-limited, run as the agent and audited like a tool
    call (static resources get no ``Context`` of their own, so this is the one place that sees them all)."""

    def __init__(self, holder: QuireMCP, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.holder = holder

    async def read_resource(self, uri: Any, context: Context[Any, Any] | None = None) -> Any:
        holder = self.holder
        who = holder.principal(context)
        tool = _resource_kind(uri)
        wait = holder.rate.take(_connection_key(context))
        if wait > 0:
            raise ResourceError(f"rate_limited: too many calls; retry in {wait:.1f} s")
        ok = False
        try:
            with acting_as(who):  # a context variable: it follows the read into the SDK's worker thread
                result = await super().read_resource(uri, context)
            ok = True
            return result
        finally:
            holder.audit_call(who, tool, ok)


def _as_id(text: str, what: str) -> int:
    if not text.isdigit():
        raise NotFound(f"{what} {text!r} not found")
    return int(text)


# -- HTTP ----------------------------------------------------------------------------------------


class DataDirTokenVerifier:
    """Bearer tokens checked against the data directory's token file on every request."""

    def __init__(self, quire: Quire) -> None:
        self.quire = quire

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        from knowledge.agents import tokens

        if not tokens.verify(self.quire.data_dir, token):
            return None
        return AccessToken(token="<redacted>", client_id="quire-http", scopes=[])


def transport_security(port: int) -> TransportSecuritySettings:
    """Host and Origin checks for a server on 127.0.0.1:``port``: a page in a browser that rebinds a
    name of its own to 127.0.0.1 sends its own Host (refused, 421) and Origin (refused, 403)."""
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )


def http_app(quire: Quire, port: int, *, agent: str | None = None, rate: RateLimit | None = None) -> Starlette:
    """The Streamable HTTP app: bearer token required, for a server bound to 127.0.0.1."""
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    url = f"http://{HOST}:{port}"
    security = transport_security(port)
    holder = QuireMCP(
        quire,
        agent=agent,
        rate=rate,
        require_enabled=True,
        token_verifier=DataDirTokenVerifier(quire),
        auth=AuthSettings(issuer_url=AnyHttpUrl(url), resource_server_url=AnyHttpUrl(f"{url}/mcp")),
    )
    return holder.server.streamable_http_app(host=HOST, transport_security=security)


def serve_http(quire: Quire, port: int, *, agent: str | None = None) -> None:
    """Serve until interrupted, on 127.0.0.1 only (never another interface)."""
    import uvicorn

    from knowledge.agents import tokens

    tokens.ensure_token(quire.data_dir)  # a token file removed by hand is replaced, never "no token needed"
    app = http_app(quire, port, agent=agent)
    log.warning("Quire MCP server on http://%s:%d/mcp (bearer token required)", HOST, port)
    uvicorn.run(app, host=HOST, port=port, log_level="warning", access_log=False)
