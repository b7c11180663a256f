"""Compacted ledgers (topic compaction), and the kind of a pending deletion (a ledger of the topic's ledger
list, or a compacted ledger).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

NAME = 700


def upgrade() -> None:
    op.create_table(
        "compacted_ledgers",
        sa.Column("topic", sa.String(NAME), sa.ForeignKey("topics.name"), primary_key=True),
        sa.Column("ledger_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("horizon_ledger", sa.BigInteger, nullable=False),
        sa.Column("horizon_entry", sa.BigInteger, nullable=False),
        sa.Column("entries", sa.BigInteger, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("min_entry_ts_ms", sa.BigInteger, nullable=True),
        sa.Column("max_entry_ts_ms", sa.BigInteger, nullable=True),
        sa.Column("tombstones", sa.BigInteger, nullable=False),
        sa.Column("oldest_tombstone_ts_ms", sa.BigInteger, nullable=True),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("compacted_as_of_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_compacted_ledgers_status", "compacted_ledgers", ["topic", "status"])
    with op.batch_alter_table("pending_deletions") as batch:
        batch.add_column(sa.Column("kind", sa.String(20), nullable=False, server_default="ledger"))


def downgrade() -> None:
    with op.batch_alter_table("pending_deletions") as batch:
        batch.drop_column("kind")
    op.drop_index("ix_compacted_ledgers_status", "compacted_ledgers")
    op.drop_table("compacted_ledgers")
