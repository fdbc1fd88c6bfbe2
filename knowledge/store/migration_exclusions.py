"""Migration ``0035_agent_exclusions``: the table of items a person keeps from agents (``schema.agent_exclusions``).

Frozen DDL, the same text on both engines; safe to run again (a team store created after it has the table from
its baseline, without the index).
"""

from __future__ import annotations

from sqlalchemy import Connection

AGENT_EXCLUSIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS agent_exclusions (item_id INTEGER NOT NULL PRIMARY KEY "
    "REFERENCES items(id) ON DELETE CASCADE, base_id INTEGER NOT NULL, created_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS agent_exclusions_base ON agent_exclusions (base_id)",
)


def agent_exclusions(conn: Connection) -> None:
    for statement in AGENT_EXCLUSIONS_DDL:
        conn.exec_driver_sql(statement)
