"""Who a run acts for: a person may start and revert runs (an agent only previews and reads),
and the items a run writes belong to the base's ingest-agent identity."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy import Connection, and_, select

from jobs.errors import HandBack
from knowledge.principal import Principal, require_person
from knowledge.store.schema import identities

if TYPE_CHECKING:
    from knowledge.runtime import Quire

log = logging.getLogger(__name__)


def require_person_for_run(principal: Principal, action: str) -> None:
    """Only a person starts or reverts a run (an agent named here or acting in the context is refused)."""
    require_person(f"{action} a folder run", principal)


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
