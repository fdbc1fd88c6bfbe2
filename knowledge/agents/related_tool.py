"""The MCP tool ``related`` (see also), registered on the server by :class:`knowledge.agents.server.QuireMCP`
through its ``_call`` (rate limit, the agent principal, the audit), as every read tool is."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context, MCPServer

from knowledge.agents import reads

if TYPE_CHECKING:
    from knowledge.runtime import Quire

DESCRIPTION = (
    "Documents related to an item (see also): the documents of a base nearest in meaning to item (a file, note or "
    "folder id; a folder: its documents together), best first, never the item or anything inside it. limit: 1-25. "
    "subtree: only documents under this item. Each has its item, score and why: the best matching pair of passages "
    "(the item's and the related document's) as citations with short snippets. An item with nothing indexed yet is "
    "an error (not_indexed)."
)

Call = Callable[[Context[Any, Any] | None, str, Callable[[], dict[str, Any]]], dict[str, Any]]


def add_related_tool(mcp: MCPServer[Any], call: Call, quire: Quire) -> None:
    @mcp.tool(description=DESCRIPTION)
    def related(
        ctx: Context[Any, Any], base: str, item: int, limit: int = 10, subtree: int | None = None
    ) -> dict[str, Any]:
        return call(ctx, "related", lambda: reads.related_documents(quire, base, item, limit=limit, subtree=subtree))
