"""The per-topic gate checks are plain Python booleans: they read a snapshot column without a guard only where the
contract declares it non-null, and the snapshot's writer refuses a null there (so those rows have none); what may be
unknown (a topic, ledger or cursor the snapshot lacks, a nullable column, any column of a plan row) is guarded where
it is read. The mechanisms' test_checks.py show a null in a plan row failing a check, never raising."""

from __future__ import annotations

import pytest

from housekeeping.engine.contract import CURSORS, LEDGERS, TOPICS
from housekeeping.engine.parquet_rows import write_parquet
from tests.conftest import topic_row

pytestmark = pytest.mark.unit

# What the checks of trim, expiry, backlog, GC and offload (and the shared move checks) read of a known row
# without a None guard.
READ_UNGUARDED = {
    TOPICS: (
        "topic", "namespace", "isSystemTopic", "producers", "consumers", "retentionSource", "retentionTimeMs",
        "retentionSizeBytes", "messageTtlSeconds", "sizeQuotaLimitBytes", "timeQuotaLimitSeconds", "offloader",
    ),
    LEDGERS: ("topic", "ledgerId", "entries", "size", "entriesStored", "offloadComplete", "localDeleted"),
    CURSORS: ("topic", "name", "durable", "markDeleteLedger", "markDeleteEntry", "consumers"),
}  # fmt: skip


@pytest.mark.parametrize("table", list(READ_UNGUARDED), ids=lambda table: table.name)
def test_every_column_the_checks_read_unguarded_is_declared_non_null(table):
    nullable = sorted(set(READ_UNGUARDED[table]) - set(table._required))
    assert nullable == [], (
        f"{table.name}: the checks read {nullable} unguarded, but the contract lets them be null"
    )


def test_the_snapshot_writer_refuses_a_null_where_the_contract_says_non_null(tmp_path):
    row = topic_row("persistent://t/ns/a", retentionTimeMs=0, retentionSizeBytes=0)
    write_parquet(tmp_path / "topics.parquet", TOPICS, [row])
    for column in READ_UNGUARDED[TOPICS]:
        with pytest.raises(ValueError, match=f"required column\\(s\\) {column} missing"):
            write_parquet(tmp_path / "bad.parquet", TOPICS, [{**row, column: None}])
    assert not (tmp_path / "bad.parquet").exists()
