"""The contract between the library and the Spark apps (housekeeping.engine.contract): one definition per table that
refuses what it does not define, its columns and types, and a topic's bucket fixed by its name. The run directory,
the writers and the readers are tested beside it (test_run_dir.py, test_parquet_rows.py, test_snapshot_reads.py)."""

from __future__ import annotations

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine import contract
from housekeeping.mechanisms.compaction.tables import COMPACTION_DECISIONS

pytestmark = pytest.mark.unit


def test_a_row_is_written_in_column_order_with_absent_nullable_columns_as_null():
    row = contract.NAMESPACES.row({"topicCount": 3, "namespace": "public/default", "storedBytes": 10})
    assert list(row) == ["namespace", "storedBytes", "topicCount"]
    ledger = contract.LEDGERS.row(
        {
            "topic": "persistent://a/b/t",
            "ledgerId": 1,
            "entries": 2,
            "size": 3,
            "entriesStored": True,
            "offloadAttempted": False,
            "offloadComplete": False,
            "localDeleted": False,
        }
    )
    assert ledger["closedAtMs"] is None and ledger["minEntryTsMs"] is None and ledger["offloadedAtMs"] is None


def test_a_required_column_left_out_or_none_is_refused():
    with pytest.raises(ValueError, match=r"table cursors: required column\(s\) markDeleteEntry"):
        contract.CURSORS.row(
            {
                "topic": "t",
                "name": "s",
                "durable": True,
                "markDeleteLedger": 1,
                "markDeleteEntry": None,
                "consumers": 0,
            }
        )


def test_reading_back_fills_absent_columns_and_refuses_a_file_of_another_table():
    read = contract.BLOCKERS.read_row({"topic": "t", "kind": "cursor"}, "plan/blockers/part-0.json")
    assert read == dict.fromkeys(contract.BLOCKERS.names) | {"topic": "t", "kind": "cursor"}
    with pytest.raises(InputError, match=r"plan/blockers/part-0.json: column\(s\) ledgerId are not in table"):
        contract.BLOCKERS.read_row({"ledgerId": 4}, "plan/blockers/part-0.json")


def test_ddl_names_every_column_once_with_its_type():
    for table in [*contract.SNAPSHOT_TABLES.values(), contract.ACTIONS, contract.BLOCKERS]:
        assert len(set(table.names)) == len(table.names), table.name
        assert table.ddl().count("`") == 2 * len(table.names)
    assert COMPACTION_DECISIONS.ddl().endswith("`retentionTimeMs` bigint")
    assert "`rawLedgerIds` array<bigint>" in COMPACTION_DECISIONS.ddl()


def test_select_keeps_the_named_columns_in_the_asked_order():
    picked = contract.TOPICS.select("version", "topic")
    assert picked.names == ("version", "topic") and picked.name == "topics"
    with pytest.raises(KeyError):
        contract.TOPICS.select("no_such_column")


def test_a_topic_s_bucket_is_fixed_by_its_name():
    """The bucket is part of the snapshot's layout (a sweep's points read one another's tables by it): a hash fixed
    by the name alone, not Python's per-process ``hash``."""
    names = ("persistent://a/b/c", "", "persistent://t/ns/topic-1")
    assert [contract.topic_bucket(name, 8) for name in names] == [7, 0, 2]
