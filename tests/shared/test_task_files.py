"""The files a Spark task reads and writes itself (spark_apps.shared.task_files): a plan table's rows of a topic
found by its row groups' topic ranges, a task's own part files, and how many tasks share the topics. Functions on
files, no Spark session."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_apps.shared.task_files import TaskParts, TopicRows, finish_parts, prepare_parts, topic_tasks

pytestmark = pytest.mark.unit


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
