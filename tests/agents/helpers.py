"""Helpers for the MCP tests: a real indexed base, and a way to call the SDK client from sync tests."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp_types import CallToolResult

from knowledge.library.bases import Base
from knowledge.lifecycle import operations
from knowledge.runtime import Quire
from tests.knowledge.helpers import drain, make_base
from tests.support.files import write_tree

T = TypeVar("T")

# Three short documents on different subjects, and one long one that is cut into several chunks.
PARAGRAPHS = [
    f"Section {n}. The lighthouse keeper logged the tide at dawn number {n}; gulls circled the lamp room "
    + "while the foghorn sounded over the harbour and the ferry waited for calmer water. " * 6
    for n in range(1, 7)
]
DOCS: dict[str, str] = {
    "docs/volcano.md": "# Volcanoes\n\nMagma rises through the crust and erupts as lava from the volcano's vent.\n",
    "docs/bread.md": "# Baking\n\nSourdough bread needs a starter, flour, water and a long slow proof overnight.\n",
    "docs/orbits.md": "# Orbits\n\nA satellite in low earth orbit circles the planet about every ninety minutes.\n",
    "logbook.md": "# Lighthouse logbook\n\n" + "\n\n".join(PARAGRAPHS) + "\n",
}


def indexed_base(quire: Quire, root: Path, name: str = "kb") -> tuple[Base, dict[str, int]]:
    """A base with ``DOCS`` added as a folder and fully indexed by an in-process worker (real model)."""
    base = make_base(quire, name)
    folder = write_tree(root / f"src-{name}", DOCS)
    operations.add_items(quire, base.id, [operations.PathInput(folder)])
    drain(quire)
    ids = {i.relative_path or i.name: i.id for i in operations.list_items(quire, base.id, flat=True)}
    return base, ids


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def payload(result: CallToolResult) -> dict[str, Any]:
    """A successful tool call's structured answer."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))  # type: ignore[union-attr]


def error_text(result: CallToolResult) -> str:
    assert result.is_error, f"expected an error, got {result.structured_content}"
    return str(result.content[0].text)  # type: ignore[union-attr]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> list[str]:
    """Local addresses (hex, as the kernel lists them) of sockets listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append(address)
    return found


# The first request of an MCP session over Streamable HTTP (what a client sends to open it).
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
