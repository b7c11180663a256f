"""Holds (``housekeeping hold``: a namespace or topic no deleting or cursor-moving action may touch), and who
did each journaled action.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

NAME = 700


def upgrade() -> None:
    op.create_table(
        "holds",
        sa.Column("target", sa.String(NAME), primary_key=True),
        sa.Column("scope", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_by", sa.String(250), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
    )
    with op.batch_alter_table("journal") as batch:
        batch.add_column(sa.Column("actor", sa.String(250), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("journal") as batch:
        batch.drop_column("actor")
    op.drop_table("holds")
