"""Key erasure requests (``housekeeping erase request``): forget one key in a topic or a namespace.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

NAME = 700


def upgrade() -> None:
    op.create_table(
        "erasure_requests",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("scope", sa.String(20), nullable=False),
        sa.Column("target", sa.String(NAME), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("requested_at_ms", sa.BigInteger, nullable=False),
        sa.Column("requested_by", sa.String(250), nullable=False),
        sa.Column("recorded_at_ms", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("state_detail", sa.Text, nullable=True),
        sa.Column("run_id", sa.String(250), nullable=True),
        sa.Column("updated_as_of_ms", sa.BigInteger, nullable=True),
    )
    op.create_index("ix_erasure_requests_state", "erasure_requests", ["state", "requested_at_ms"])


def downgrade() -> None:
    op.drop_index("ix_erasure_requests_state", table_name="erasure_requests")
    op.drop_table("erasure_requests")
