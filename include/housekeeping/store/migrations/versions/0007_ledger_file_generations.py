"""Ledger file generations (key erasure rewrites a ledger's files without touching its id), restore refusal of
files an erasure covers, and erasure requests that keep only the key's SHA-256.

- ``ledgers.files_generation``, ``compacted_ledgers.files_generation``: which directory holds the ledger's entries
  (0: ``<ledgerId>``, n > 0: ``<ledgerId>.<n>``). A rewrite writes generation n + 1 beside n and switches the row in
  one metadata transaction; the old directory goes to the pending-deletion log.
- ``pending_deletions.erased_by``: the erasure run whose request covers the files; restore refuses them.
- ``erasure_requests.key_sha256`` replaces ``key``: the store (whose SQLite file lies under the store root) never
  keeps a key it was asked to forget; entries are matched by the digest of their key.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("ledgers", "compacted_ledgers"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("files_generation", sa.BigInteger, nullable=False, server_default="0"))
    with op.batch_alter_table("pending_deletions") as batch:
        batch.add_column(sa.Column("erased_by", sa.String(250), nullable=True))
    with op.batch_alter_table("erasure_requests") as batch:
        batch.add_column(sa.Column("key_sha256", sa.String(64), nullable=True))
    connection = op.get_bind()
    requests = sa.table(
        "erasure_requests", sa.column("id", sa.Integer), sa.column("key", sa.Text), sa.column("key_sha256")
    )
    for row in connection.execute(sa.select(requests.c.id, requests.c.key)).all():
        digest = hashlib.sha256(row.key.encode("utf-8")).hexdigest()
        connection.execute(requests.update().where(requests.c.id == row.id).values(key_sha256=digest))
    with op.batch_alter_table("erasure_requests") as batch:
        batch.alter_column("key_sha256", existing_type=sa.String(64), nullable=False)
        batch.drop_column("key")


def downgrade() -> None:
    # The keys are gone for good (that is the point): a downgraded request carries its digest as its key.
    with op.batch_alter_table("erasure_requests") as batch:
        batch.add_column(sa.Column("key", sa.Text, nullable=True))
    connection = op.get_bind()
    connection.execute(sa.text("UPDATE erasure_requests SET key = key_sha256"))
    with op.batch_alter_table("erasure_requests") as batch:
        batch.alter_column("key", existing_type=sa.Text, nullable=False)
        batch.drop_column("key_sha256")
    with op.batch_alter_table("pending_deletions") as batch:
        batch.drop_column("erased_by")
    for table in ("ledgers", "compacted_ledgers"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("files_generation")
