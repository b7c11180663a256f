"""Tiered storage: a ledger's offload context (Pulsar's ``OffloadContext``) and tier objects in the pending-deletion
log.

- ``ledgers.offload_uuid``: the UUID of the current or last offload attempt, written before the upload starts, so
  an attempt that never completed is always named by the metadata (its object is
  ``<ledgerId>-<uuid>.parquet`` in the tier); ``offload_complete``: set only after the upload was read back
  whole and the UUID still matched; ``offloaded_at_ms``: when completion was recorded (the run's logical time;
  the offload-deletion lag counts from it); ``local_deleted``: Pulsar's ``bookkeeperDeleted``, the local copy is
  gone and the ledger is read from the tier.
- ``pending_deletions.tier_key``: the tier object a purge deletes with (or instead of) the local files. A row
  without local files (an abandoned attempt's object) has an empty ``path``.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ledgers") as batch:
        batch.add_column(sa.Column("offload_uuid", sa.String(36), nullable=True))
        batch.add_column(sa.Column("offload_complete", sa.Boolean, nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("offloaded_at_ms", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("local_deleted", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("pending_deletions") as batch:
        batch.add_column(sa.Column("tier_key", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pending_deletions") as batch:
        batch.drop_column("tier_key")
    with op.batch_alter_table("ledgers") as batch:
        for name in ("local_deleted", "offloaded_at_ms", "offload_complete", "offload_uuid"):
            batch.drop_column(name)
