"""Who asks: a person or an agent, as a typed value the operations judge (only a person writes).

Contract
* :class:`Principal` is the caller of an operation. Operations that take one judge it explicitly.
* :func:`acting_as` marks everything a block of code calls as done *for* that principal (a context
  variable, so it follows the call into every operation without threading a parameter through
  layers). The MCP server runs each tool call inside ``acting_as(agent)``; the CLI does the same for
  ``--as-agent``.
* :func:`require_person` is the guard every public write operation calls first. It refuses an agent
  named explicitly **or** found in the context, so code running for an agent cannot become a person by
  passing ``Principal.person(...)``. Only proposals (``knowledge.agents.proposals``) are open to agents.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from knowledge.errors import Forbidden


@dataclass(frozen=True)
class Principal:
    """A person (the GUI, the CLI in a terminal) or an agent (MCP tools, automation)."""

    kind: Literal["person", "agent"]
    name: str

    @classmethod
    def person(cls, name: str) -> Principal:
        return cls("person", name)

    @classmethod
    def agent(cls, name: str) -> Principal:
        return cls("agent", name)

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"


_acting: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("quire_acting_principal", default=None)


@contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    """Everything called inside the block is done for ``principal`` (an agent cannot be overridden)."""
    token = _acting.set(principal)
    try:
        yield principal
    finally:
        _acting.reset(token)


def acting_principal() -> Principal | None:
    """The principal set by the innermost :func:`acting_as`, if any."""
    return _acting.get()


def require_person(action: str, principal: Principal | None = None) -> None:
    """Refuse (``Forbidden``) when an agent asks, named here or acting in the context."""
    for who in (principal, _acting.get()):
        if who is not None and who.is_agent:
            raise Forbidden(f"an agent may not {action}; a person has to approve it")
