"""What a compaction task does with one topic's input in Arrow (spark_apps.compaction.entries.topic_input_parts,
spark_apps.compaction.apply.kept_entries, kept_ledger_facts): functions on files and tables, no Spark session."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from housekeeping.mechanisms.compaction.tables import COMPACTION_KEPT
from housekeeping.store.entries import ENTRY_SCHEMA, write_ledger
from spark_apps.compaction.apply import kept_entries, kept_ledger_facts
from spark_apps.compaction.entries import topic_input_parts

pytestmark = pytest.mark.unit

T = "persistent://t/ns/table"


def _ledger(ledger_id: int, entry_ids: list[int], *, key: str = "k") -> pa.Table:
    n = len(entry_ids)
    return pa.table(
        {
            "topic": [T] * n,
            "ledgerId": [ledger_id] * n,
            "entryId": entry_ids,
            "publishTime": [1000 + e for e in entry_ids],
            "brokerTimestamp": [None if e % 2 else 5000 + e for e in entry_ids],
            "key": [f"{key}{e}" for e in entry_ids],
            "value": [b"v%d" % e for e in entry_ids],
            "size": [2] * n,
            "properties": [[("p", str(e))] for e in entry_ids],
        },
        schema=ENTRY_SCHEMA,
    )


def test_a_topics_input_is_its_compacted_ledger_and_the_raw_entries_after_its_horizon_up_to_the_run(tmp_path):
    paths = {}
    for ledger_id, table in {
        7: _ledger(7, [0, 3]),
        1: _ledger(1, [0, 1, 2]),
        2: _ledger(2, [0, 1, 2]),
    }.items():
        write_ledger(tmp_path / str(ledger_id), table)
        paths[ledger_id] = [str(p) for p in sorted((tmp_path / str(ledger_id)).glob("*.parquet"))]
    source = {
        "compactedFiles": paths[7],
        "rawFiles": paths[1] + paths[2],
        "rawTierObjects": [],
        "fromLedger": 1,
        "fromEntry": 0,  # the previous horizon: 1:0 was compacted already
        "horizonLedger": 2,
        "horizonEntry": 1,  # 2:2 arrived after the snapshot
    }
    names = ["ledgerId", "entryId", "publishTime", "brokerTimestamp", "key", "size"]
    parts = list(topic_input_parts(source, names))
    assert len(parts) == 3  # a part per file
    rows = sorted(
        (r["source"], r["ledgerId"], r["entryId"], r["entryTs"]) for p in parts for r in p.to_pylist()
    )
    assert rows == [
        ("compacted", 7, 0, 5000),
        ("compacted", 7, 3, 1003),  # no broker timestamp: the publish time
        ("raw", 1, 1, 1001),
        ("raw", 1, 2, 5002),
        ("raw", 2, 0, 5000),
        ("raw", 2, 1, 1001),
    ]
    assert parts[0].column_names == [*names, "source", "entryTs"]


def test_the_kept_entries_are_copied_whole_in_position_order_from_parts_in_any_order():
    big = 1 << 30  # no packing: positions are matched per ledger
    parts = [_ledger(2, [5, 0, big]), _ledger(3, []), _ledger(1, [0, 1, 2, 5])]  # a part may be empty
    kept = pa.table({"ledgerId": [2, 1, 2], "entryId": [big, 5, 0]})  # as the task gets them
    rows = kept_entries(iter(parts), kept)
    assert rows.schema.equals(ENTRY_SCHEMA)
    assert [(r["ledgerId"], r["entryId"]) for r in rows.to_pylist()] == [(1, 5), (2, 0), (2, big)]
    assert rows.to_pylist()[0] == _ledger(1, [5]).to_pylist()[0]  # payload, key and properties as read
    assert kept_entries(iter(parts), kept.slice(0, 0)).num_rows == 0
    assert kept_entries(iter(parts), None).num_rows == 0  # a topic without kept rows
    assert kept_entries(iter([]), kept).num_rows == 0


def test_a_new_compacted_ledgers_facts_come_from_the_kept_entries_of_every_part(tmp_path):
    schema = COMPACTION_KEPT.arrow_schema()

    def kept(rows: list[tuple]) -> pa.Table:
        names = ("topic", "ledgerId", "entryId", "keyDigest", "entryTs", "size", "source")
        return pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows], schema)

    # Topic "a" spans two parts and two row groups; a keyless empty entry is no tombstone.
    pq.write_table(
        kept(
            [("a", 1, 0, "k1", 50, 0, "raw"), ("a", 1, 1, "k2", 10, 3, "raw"), ("a", 1, 2, None, 5, 0, "raw")]
        ),
        tmp_path / "part-00000.parquet",
        row_group_size=2,
    )
    pq.write_table(
        kept([("a", 2, 0, "k3", 70, 0, "raw"), ("b", 1, 0, "k1", 20, 4, "raw")]),
        tmp_path / "part-00001.parquet",
    )
    facts = kept_ledger_facts(tmp_path)
    assert facts == {
        "a": {"minTs": 5, "maxTs": 70, "tombstones": 2, "oldestTombstone": 50},
        "b": {"minTs": 20, "maxTs": 20, "tombstones": 0, "oldestTombstone": None},
    }
