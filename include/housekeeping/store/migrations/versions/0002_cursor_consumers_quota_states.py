"""Connected consumers per subscription (message-expiry guard) and the backlog-quota state of topics.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

NAME = 700


def upgrade() -> None:
    with op.batch_alter_table("cursors") as batch:
        batch.add_column(sa.Column("consumers", sa.Integer, nullable=False, server_default="0"))
    op.create_table(
        "backlog_quota_states",
        sa.Column("topic", sa.String(NAME), sa.ForeignKey("topics.name"), primary_key=True),
        sa.Column("quota_type", sa.String(40), primary_key=True),
        sa.Column("policy", sa.String(40), nullable=False),
        sa.Column("exceeded", sa.Boolean, nullable=False),
        sa.Column("limit_value", sa.BigInteger, nullable=False),
        sa.Column("measured_value", sa.BigInteger, nullable=True),
        sa.Column("exceeded_since_ms", sa.BigInteger, nullable=True),
        sa.Column("cleared_at_ms", sa.BigInteger, nullable=True),
        sa.Column("as_of_ms", sa.BigInteger, nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("backlog_quota_states")
    with op.batch_alter_table("cursors") as batch:
        batch.drop_column("consumers")
