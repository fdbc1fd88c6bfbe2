"""Agent proposals: the table of migration ``0008_agent_proposals`` (frozen DDL + a mirror for queries).

An agent (an MCP client) never writes knowledge; it files a *proposal* a person accepts or dismisses.
The database keeps a proposal's identity (who proposed what, where, when) immutable and its status
moving only ``pending → accepted | dismissed``, so no code path can re-open or rewrite one.
"""

from __future__ import annotations

from sqlalchemy import Column, Connection, Float, Integer, MetaData, String, Table, Text

metadata = MetaData()

PROPOSAL_KINDS = ("folder_run", "note")
PROPOSAL_STATUSES = ("pending", "accepted", "dismissed")

agent_proposals = Table(
    "agent_proposals",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", String, nullable=False),
    Column("base_id", Integer, nullable=False),
    Column("base_name", Text, nullable=False),  # as it was when proposed (a base may be renamed)
    Column("proposed_by", String, nullable=False),  # the agent principal's label, agent:NAME
    Column("folder", Text),  # folder_run: the resolved folder
    Column("note_title", Text),
    Column("note_text", Text),
    Column("preview", Text, nullable=False),  # JSON: the folder-run preview or the note's summary
    Column("status", String, nullable=False),
    Column("decided_by", String),  # the person who accepted or dismissed it
    Column("run_id", Integer),  # the run an accepted folder_run started
    Column("item_id", Integer),  # the note an accepted note became
    Column("created_at", Float, nullable=False),
    Column("decided_at", Float),
    # migration 0034: the proposer's account (``Principal.account``), which the per-agent cap counts under;
    # NULL in rows filed before it, whose ``proposed_by`` was their account
    Column("account", String),
)

AGENT_PROPOSALS_DDL = (
    """CREATE TABLE agent_proposals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL CHECK (kind IN ('folder_run', 'note')),
        base_id INTEGER NOT NULL,
        base_name TEXT NOT NULL,
        proposed_by TEXT NOT NULL,
        folder TEXT,
        note_title TEXT,
        note_text TEXT,
        preview TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'dismissed')),
        decided_by TEXT,
        run_id INTEGER,
        item_id INTEGER,
        created_at REAL NOT NULL,
        decided_at REAL
    )""",
    "CREATE INDEX agent_proposals_status ON agent_proposals (status, id)",
    """CREATE TRIGGER agent_proposals_frozen BEFORE UPDATE ON agent_proposals
    WHEN OLD.status != 'pending' OR NEW.status = 'pending'
      OR NEW.kind IS NOT OLD.kind OR NEW.base_id IS NOT OLD.base_id OR NEW.proposed_by IS NOT OLD.proposed_by
      OR NEW.folder IS NOT OLD.folder OR NEW.note_text IS NOT OLD.note_text OR NEW.preview IS NOT OLD.preview
      OR NEW.created_at IS NOT OLD.created_at
    BEGIN SELECT RAISE(ABORT, 'a proposal is decided once and never rewritten'); END""",
)

# Migration 0034_agent_proposal_account. A team store's baseline (compiled from the mirror above) already has
# the column, so its step must be safe to run again.
PROPOSAL_ACCOUNT_DDL = "ALTER TABLE agent_proposals ADD COLUMN account TEXT"
PROPOSAL_ACCOUNT_PG_DDL = "ALTER TABLE agent_proposals ADD COLUMN IF NOT EXISTS account TEXT"


def add_account(conn: Connection) -> None:
    conn.exec_driver_sql(PROPOSAL_ACCOUNT_DDL)


def add_account_postgres(conn: Connection) -> None:
    conn.exec_driver_sql(PROPOSAL_ACCOUNT_PG_DDL)
