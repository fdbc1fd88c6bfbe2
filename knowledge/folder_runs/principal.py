"""Who asks: a person may start and revert runs; an agent may only preview and read (seed 000)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Connection, and_, select

from jobs.errors import HandBack
from knowledge.errors import Forbidden
from knowledge.store.schema import identities

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


# -- principals --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    """Who asks: a person (the GUI, the CLI in a terminal) or an agent (local API, MCP tools, automation)."""

    kind: Literal["person", "agent"]
    name: str

    @classmethod
    def person(cls, name: str) -> Principal:
        return cls("person", name)

    @classmethod
    def agent(cls, name: str) -> Principal:
        return cls("agent", name)

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"


def require_person(principal: Principal, action: str) -> None:
    if principal.kind != "person":
        raise Forbidden(f"an agent may not {action} a folder run; a person has to approve it")


def ingest_agent(quire: Quire, base_id: int, conn: Connection | None = None) -> str:
    """The base's enabled ingest-agent identity, or ``HandBack``: nothing is written under no one's name."""

    def find(c: Connection) -> str | None:
        row = c.execute(
            select(identities.c.name)
            .where(
                and_(identities.c.base_id == base_id, identities.c.kind == "ingest_agent", identities.c.disabled == 0)
            )
            .order_by(identities.c.id)
            .limit(1)
        ).first()
        return None if row is None else str(row.name)

    if conn is not None:
        name = find(conn)
    else:
        with quire.db.read() as c:
            name = find(c)
    if name is None:
        raise HandBack("the knowledge base's ingest agent identity is missing or disabled; the run waits for it")
    return name
