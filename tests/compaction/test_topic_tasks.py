"""What a compaction task does with one topic's input in Arrow (spark_apps.compaction.entries.topic_input_parts,
spark_apps.compaction.apply.kept_entries), and how it finds its topics' plan rows and writes its own part files
(TopicRows, TaskParts): functions on files and tables, no Spark session."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from housekeeping.mechanisms.compaction.tables import COMPACTION_KEPT
from housekeeping.store.entries import ENTRY_SCHEMA, write_ledger
from spark_apps.compaction.apply import kept_entries, kept_ledger_facts
from spark_apps.compaction.entries import (
    TaskParts,
    TopicRows,
    finish_parts,
    prepare_parts,
    topic_input_parts,
    topic_tasks,
)

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


@pytest.mark.parametrize(
    ("topics", "partitions", "tasks"), [(40, "8", 8), (3, "8", 3), (0, "8", 1), (40, "200", 40)]
)
def test_topics_spread_over_at_most_the_sessions_shuffle_partitions(topics, partitions, tasks):
    from types import SimpleNamespace

    session = SimpleNamespace(
        conf=SimpleNamespace(get=lambda key: {"spark.sql.shuffle.partitions": partitions}[key])
    )
    assert topic_tasks(SimpleNamespace(sparkSession=session), topics) == tasks


POSITIONS = pa.schema(
    [pa.field("topic", pa.string()), pa.field("ledgerId", pa.int64()), pa.field("entryId", pa.int64())]
)


def _rows(topic: str, ledger_id: int, entries: int) -> pa.Table:
    return pa.table(
        {"topic": [topic] * entries, "ledgerId": [ledger_id] * entries, "entryId": list(range(entries))},
        schema=POSITIONS,
    )


def _positions(table: pa.Table) -> list[tuple]:
    return [(r["ledgerId"], r["entryId"]) for r in table.to_pylist()]


def test_a_topics_rows_are_found_in_the_row_groups_that_can_hold_them(tmp_path):
    # Two part files sorted by topic, row groups of 3 rows: topic "b" spans row groups and files.
    pq.write_table(
        pa.concat_tables([_rows("a", 1, 4), _rows("b", 2, 5)]),
        tmp_path / "part-00000.parquet",
        row_group_size=3,
    )
    pq.write_table(
        pa.concat_tables([_rows("b", 3, 2), _rows("d", 4, 3)]),
        tmp_path / "part-00001.parquet",
        row_group_size=3,
    )
    (tmp_path / ".part-00002-0.parquet").write_bytes(b"a task still writing")  # hidden: not a part
    wanted = pa.schema([POSITIONS.field("ledgerId"), POSITIONS.field("entryId")])
    rows = TopicRows(str(tmp_path), wanted)
    assert _positions(rows.of("a")) == [(1, e) for e in range(4)]
    assert _positions(rows.of("b")) == [(2, e) for e in range(5)] + [(3, 0), (3, 1)]
    assert _positions(rows.of("d")) == [(4, e) for e in range(3)]
    for absent in ("", "c", "e"):  # before, between and after the topics held
        assert rows.of(absent).num_rows == 0 and rows.of(absent).schema.equals(wanted)
    assert rows.of("a").schema.equals(wanted)


def test_a_part_out_of_topic_order_or_without_statistics_is_searched_whole(tmp_path):
    unsorted = pa.concat_tables([_rows("b", 2, 3), _rows("a", 1, 3), _rows("b", 5, 3)])
    pq.write_table(unsorted, tmp_path / "part-00000.parquet", row_group_size=3)
    pq.write_table(_rows("a", 9, 2), tmp_path / "part-00001.parquet", write_statistics=False)
    rows = TopicRows(str(tmp_path), POSITIONS)
    assert _positions(rows.of("b")) == [(2, e) for e in range(3)] + [(5, e) for e in range(3)]
    assert _positions(rows.of("a")) == [(1, e) for e in range(3)] + [(9, 0), (9, 1)]
    assert TopicRows(str(tmp_path / "none"), POSITIONS).of("a").num_rows == 0  # a table without parts


def test_a_tasks_parts_appear_whole_when_its_input_ends_and_an_empty_table_gets_one_empty_part(tmp_path):
    kept, dropped = tmp_path / "kept", tmp_path / "dropped"
    tables = {"kept": (str(kept), POSITIONS), "dropped": (str(dropped), POSITIONS)}
    kept.mkdir()
    (kept / "part-00009.parquet").write_bytes(b"an earlier plan's part")
    prepare_parts(tables, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dropped", "kept"] and not any(kept.iterdir())
    written = TaskParts(tables)
    written.write("kept", _rows("a", 1, 2))
    written.write("kept", _rows("b", 2, 1))
    written.write("dropped", _rows("a", 1, 0))  # no rows: no part
    assert [p.name for p in kept.iterdir()] == [".part-00000-0.parquet"]  # not a part until the task ends
    written.close()
    assert [p.name for p in kept.iterdir()] == ["part-00000.parquet"] and not any(dropped.iterdir())
    assert _positions(pq.read_table(kept / "part-00000.parquet")) == [(1, 0), (1, 1), (2, 0)]
    finish_parts(tables)
    assert [p.name for p in dropped.iterdir()] == ["part-00000.parquet"]
    empty = pq.read_table(dropped / "part-00000.parquet")
    assert empty.num_rows == 0 and empty.schema.equals(POSITIONS)
    assert [p.name for p in kept.iterdir()] == ["part-00000.parquet"]  # a table with rows keeps its parts


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


def test_rows_without_a_topic_and_files_not_named_part_are_found_as_spark_reads_them(tmp_path):
    pq.write_table(
        pa.Table.from_pylist(
            [{"topic": None, "ledgerId": 7, "entryId": 0}, {"topic": "a", "ledgerId": 1, "entryId": 0}],
            POSITIONS,
        ),
        tmp_path / "edited.parquet",
    )
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / ".edited.parquet.crc").write_bytes(b"not parquet")
    rows = TopicRows(str(tmp_path), POSITIONS)
    assert _positions(rows.of(None)) == [(7, 0)]
    assert _positions(rows.of("a")) == [(1, 0)]
