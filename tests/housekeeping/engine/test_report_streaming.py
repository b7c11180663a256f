"""A report's per-topic list is produced while ``report.json`` is written (``StreamedList``), so a report of 100,000
topics never holds every entry at once; what is written is what a plain list would write."""

from __future__ import annotations

import json

import pytest

from housekeeping.engine.contract import write_json
from housekeeping.engine.report import MAX_TOPICS_IN_MARKDOWN, StreamedList, render_markdown

pytestmark = pytest.mark.unit


def _entries(n: int) -> list[dict]:
    return [
        {"topic": f"persistent://t/ns/{i:05d}", "decisions": [{"ledgerId": i, "reason": "kept"}]}
        for i in range(n)
    ]


def test_it_writes_what_the_list_would_and_produces_entries_only_when_iterated(tmp_path):
    plain = _entries(7)
    produced: list[int] = []

    def produce():
        for i, entry in enumerate(plain):
            produced.append(i)
            yield entry

    streamed = StreamedList(len(plain), produce)
    assert produced == [], "nothing is built before the report is written"
    write_json(tmp_path / "streamed.json", {"topics": streamed, "n": 1})
    write_json(tmp_path / "plain.json", {"topics": plain, "n": 1})
    assert (tmp_path / "streamed.json").read_bytes() == (tmp_path / "plain.json").read_bytes()
    assert len(streamed) == 7 and streamed and streamed == plain
    assert streamed[2] == plain[2] and streamed[-1] == plain[-1] and streamed[1:3] == plain[1:3]
    with pytest.raises(IndexError):
        streamed[7]
    empty = StreamedList(0, lambda: iter(()))
    assert not empty and json.dumps(empty) == "[]"


def test_the_page_renders_the_first_topics_of_a_long_streamed_list(tmp_path):
    template = tmp_path / "page.md.j2"
    template.write_text(
        "{{ r.topics | length }} topics\n{% for tp in r.topics %}{{ tp.topic }}\n{% endfor %}"
    )
    n = MAX_TOPICS_IN_MARKDOWN + 5
    page = render_markdown({"topics": StreamedList(n, lambda: iter(_entries(n)))}, template)
    lines = page.splitlines()
    assert (
        lines[1] == "persistent://t/ns/00000"
        and f"persistent://t/ns/{MAX_TOPICS_IN_MARKDOWN - 1:05d}" in page
    )
    assert f"persistent://t/ns/{MAX_TOPICS_IN_MARKDOWN:05d}" not in page
    assert page.rstrip().endswith("_5 more topics are in report.json._")


def test_entries_per_topic_group_a_decisions_table_by_topic_in_ledger_order():
    import pyarrow as pa

    from housekeeping.engine.report import entries_per_topic

    schema = pa.schema([("topic", pa.string()), ("ledgerId", pa.int64())])
    rows = [("b", 2), ("a", 5), ("b", 1), ("c", 0), ("a", 3)]
    table = pa.Table.from_pylist([{"topic": t, "ledgerId": i} for t, i in rows], schema=schema)
    entries = entries_per_topic(table, lambda rows: (rows[0]["topic"], [r["ledgerId"] for r in rows]))
    assert len(entries) == 3
    assert list(entries) == [("a", [3, 5]), ("b", [1, 2]), ("c", [0])]
    assert list(entries) == list(entries), "the same entries each time the list is written"
    assert list(entries_per_topic(schema.empty_table(), lambda rows: rows)) == []


def _decisions(rows: list[tuple[str, int]]):
    import pyarrow as pa

    return pa.table(
        {
            "topic": [t for t, _ in rows],
            "ledgerId": pa.array([ledger for _, ledger in rows], pa.int64()),
            "size": pa.array([10 * ledger for _, ledger in rows], pa.int64()),
        }
    )


@pytest.mark.parametrize(
    "rows",
    [
        [("a", 1), ("a", 2), ("b", 1), ("c", 5)],  # as the plan writes them
        [("b", 1), ("a", 2), ("c", 5), ("a", 1)],  # topics out of order
        [("a", 2), ("a", 1), ("b", 1), ("c", 5)],  # a topic's ledgers out of order
        [("a", 1), ("a", 1), ("b", 1)],  # a repeated ledger is not "in order"
    ],
)
def test_per_topic_entries_come_by_topic_then_ledger_whatever_order_the_rows_were_written_in(rows):
    from housekeeping.engine.report import entries_per_topic

    entries = entries_per_topic(_decisions(rows), lambda rs: (rs[0]["topic"], [r["ledgerId"] for r in rs]))
    expected: dict[str, list[int]] = {}
    for topic, ledger in sorted(rows):
        expected.setdefault(topic, []).append(ledger)
    assert list(entries) == list(expected.items()) and len(entries) == len(expected)


def test_a_snapshot_table_is_counted_and_read_by_its_named_columns_only(tmp_path):
    from housekeeping.core.errors import InputError
    from housekeeping.engine.contract import (
        NAMESPACES,
        RunDir,
        count_snapshot_rows,
        read_snapshot_columns,
        write_parquet,
    )

    run = RunDir(tmp_path / "run")
    path = run.snapshot_table(NAMESPACES)
    path.parent.mkdir(parents=True)
    rows = [{"namespace": f"t/ns{i}", "storedBytes": i, "topicCount": 2 * i} for i in range(3)]
    write_parquet(path, NAMESPACES, rows)
    assert count_snapshot_rows(run, NAMESPACES) == 3
    read = read_snapshot_columns(run, NAMESPACES.select("namespace", "topicCount"))
    assert read.column_names == ["namespace", "topicCount"]
    assert read.to_pylist() == [{"namespace": r["namespace"], "topicCount": r["topicCount"]} for r in rows]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"namespace": ["t/ns0"], "storedBytes": ["many"], "topicCount": [1]}), path)
    with pytest.raises(InputError, match="namespaces.parquet"):
        read_snapshot_columns(run, NAMESPACES.select("namespace", "storedBytes"))
    pq.write_table(pa.table({"namespace": ["t/ns0"], "topicCount": [1]}), path)
    with pytest.raises(InputError, match="namespaces.parquet"):
        read_snapshot_columns(run, NAMESPACES.select("namespace", "storedBytes"))
