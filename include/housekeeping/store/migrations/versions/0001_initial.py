"""Initial metadata store schema: namespaces, topics, ledgers, cursors, journal, pending deletions.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

NAME = 700


def upgrade() -> None:
    op.create_table(
        "store_settings",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "namespaces",
        sa.Column("name", sa.String(NAME), primary_key=True),
        sa.Column("policies", sa.Text, nullable=False),
    )
    op.create_table(
        "topics",
        sa.Column("name", sa.String(NAME), primary_key=True),
        sa.Column("namespace", sa.String(NAME), sa.ForeignKey("namespaces.name"), nullable=False),
        sa.Column("policies", sa.Text, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("producers", sa.Integer, nullable=False),
        sa.Column("consumers", sa.Integer, nullable=False),
        sa.Column("last_active_ms", sa.BigInteger, nullable=True),
    )
    op.create_table(
        "ledgers",
        sa.Column("topic", sa.String(NAME), sa.ForeignKey("topics.name"), primary_key=True),
        sa.Column("ledger_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("entries", sa.BigInteger, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("closed_at_ms", sa.BigInteger, nullable=True),
        sa.Column("min_entry_ts_ms", sa.BigInteger, nullable=True),
        sa.Column("max_entry_ts_ms", sa.BigInteger, nullable=True),
        sa.Column("entries_stored", sa.Boolean, nullable=False),
    )
    op.create_table(
        "cursors",
        sa.Column("topic", sa.String(NAME), sa.ForeignKey("topics.name"), primary_key=True),
        sa.Column("name", sa.String(NAME), primary_key=True),
        sa.Column("durable", sa.Boolean, nullable=False),
        sa.Column("mark_delete_ledger", sa.BigInteger, nullable=False),
        sa.Column("mark_delete_entry", sa.BigInteger, nullable=False),
        sa.Column("last_active_ms", sa.BigInteger, nullable=True),
    )
    op.create_table(
        "journal",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("mechanism", sa.String(40), nullable=False),
        sa.Column("topic", sa.String(NAME), nullable=True),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("status", sa.String(40), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("as_of_ms", sa.BigInteger, nullable=False),
        sa.Column("recorded_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_journal_run", "journal", ["run_id", "topic"])
    op.create_table(
        "pending_deletions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("topic", sa.String(NAME), nullable=False),
        sa.Column("ledger_id", sa.BigInteger, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("ledger_row", sa.Text, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("deleted_as_of_ms", sa.BigInteger, nullable=False),
        sa.Column("purge_after_ms", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("finished_as_of_ms", sa.BigInteger, nullable=True),
    )
    op.create_index("ix_pending_status", "pending_deletions", ["status", "purge_after_ms"])
