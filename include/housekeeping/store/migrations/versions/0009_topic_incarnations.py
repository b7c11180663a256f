"""A topic's incarnation: which creation of a name a row is.

- ``topics.incarnation``: set when the topic is created (a load, a client's create, a restore brings back the one it
  had). A topic deleted and created again under the same name starts at version 1 again, so the version alone would
  let a plan made on the deleted topic pass apply's compare-and-set on the new one; the pair (incarnation, version)
  cannot repeat. NULL for topics created before this revision (a re-created one always differs from it).
- ``pending_deletions.topic_incarnation``: the incarnation the logged ledger belonged to, so restore never puts a
  ledger of a deleted topic into a new topic of the same name.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


# Plain ALTER TABLE for topics, not a batch: SQLite's batch copies the table, and dropping the old copy fails while
# ledgers, cursors and the other children reference it (SQLite 3.35 and later drop a column in place).
def upgrade() -> None:
    op.add_column("topics", sa.Column("incarnation", sa.String(32), nullable=True))
    with op.batch_alter_table("pending_deletions") as batch:
        batch.add_column(sa.Column("topic_incarnation", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pending_deletions") as batch:
        batch.drop_column("topic_incarnation")
    op.drop_column("topics", "incarnation")
