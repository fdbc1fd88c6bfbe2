"""Who asks: a person or an agent, as a typed value the operations judge (only a person writes).

Contract
* :class:`Principal` is the caller of an operation. Operations that take one judge it explicitly.
* :func:`acting_as` marks everything a block of code calls as done *for* that principal (a context
  variable, so it follows the call into every operation without threading a parameter through
  layers). The MCP server runs each tool call inside ``acting_as(agent)``; the CLI does the same for
  ``--as-agent``.
* An agent's ``credential`` is what it connected with, which the client cannot choose (the MCP server's
  ``--agent`` name, else the server's default); its :attr:`~Principal.account` is what per-agent limits
  are kept under, so a client naming itself afresh on every call stays the one agent it is. Without a
  credential (a name a person gave: ``--as-agent``, in-process callers) the name is the account.
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
    credential: str | None = None  # an agent's: what it connected with, not the name it gives itself

    @classmethod
    def person(cls, name: str) -> Principal:
        return cls("person", name)

    @classmethod
    def agent(cls, name: str, credential: str | None = None) -> Principal:
        return cls("agent", name, credential)

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def account(self) -> str:
        """What per-agent limits are kept under: the credential, else the name (``agent:mcp-client``)."""
        return f"{self.kind}:{self.credential or self.name}"

    @property
    def described(self) -> str:
        """The name, and the credential when the name is not it (the client chose the name)."""
        if self.credential is None or self.credential == self.name:
            return self.name
        return f"{self.credential} (calling itself {self.name})"


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
