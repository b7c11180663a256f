"""Partitioned-topic metadata, and deleted topics kept for restore during the purge grace period.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

NAME = 700


def upgrade() -> None:
    op.create_table(
        "partitioned_topics",
        sa.Column("name", sa.String(NAME), primary_key=True),
        sa.Column("namespace", sa.String(NAME), sa.ForeignKey("namespaces.name"), nullable=False),
        sa.Column("partitions", sa.Integer, nullable=False),
    )
    op.create_table(
        "deleted_topics",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("topic", sa.String(NAME), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("saved_rows", sa.Text, nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("deleted_as_of_ms", sa.BigInteger, nullable=False),
        sa.Column("purge_after_ms", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("finished_as_of_ms", sa.BigInteger, nullable=True),
    )
    op.create_index("ix_deleted_topics_topic", "deleted_topics", ["topic", "status"])
    op.create_index("ix_pending_deletions_topic", "pending_deletions", ["topic", "status"])


def downgrade() -> None:
    op.drop_index("ix_pending_deletions_topic", "pending_deletions")
    op.drop_index("ix_deleted_topics_topic", "deleted_topics")
    op.drop_table("deleted_topics")
    op.drop_table("partitioned_topics")
