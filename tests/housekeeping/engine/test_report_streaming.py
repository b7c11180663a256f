"""A report's per-topic list is produced while ``report.json`` is written (``StreamedList``), so a report of 100,000
topics never holds every entry at once; what is written is what a plain list would write."""

from __future__ import annotations

import json

import pytest

from housekeeping.engine.report import MAX_TOPICS_IN_MARKDOWN, StreamedList, render_markdown
from housekeeping.engine.run_dir import write_json

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
    from housekeeping.engine.contract import NAMESPACES
    from housekeeping.engine.parquet_rows import write_parquet
    from housekeeping.engine.run_dir import RunDir
    from housekeeping.engine.snapshot_reads import count_snapshot_rows, read_snapshot_columns

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


# A plan table as the one-pass planners write it: a part file per snapshot bucket, each by topic then ledger.
DECISIONS = __import__("housekeeping.engine.contract", fromlist=["table"]).table(
    "decisions", "topic string!, ledgerId bigint!, size bigint, reason string"
)


def _write_parts(run_dir, parts: list[list[tuple[str, int]]]) -> None:
    from housekeeping.engine.run_dir import RunDir

    table_dir = RunDir(run_dir).plan_table(DECISIONS)
    table_dir.mkdir(parents=True, exist_ok=True)
    for number, rows in enumerate(parts):
        lines = [json.dumps({"topic": t, "ledgerId": i, "size": 10 * i}) for t, i in rows]
        (table_dir / f"part-{number:05d}.json").write_text("".join(f"{line}\n" for line in lines))


def _by_topic(rows: list[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    expected: dict[str, list[int]] = {}
    for topic, ledger in sorted(rows):
        expected.setdefault(topic, []).append(ledger)
    return list(expected.items())


@pytest.mark.parametrize(
    "parts",
    [
        [[("a", 1), ("a", 2), ("d", 1)], [("b", 4), ("c", 1), ("c", 3)], [], [("e", 7)]],  # a bucket per part
        [
            [("a", 1), ("c", 2)],
            [("a", 3), ("b", 1), ("c", 1)],
        ],  # topics in two parts: joined, in ledger order
        [[("b", 1), ("a", 2)], [("c", 5)]],  # a part out of topic order: read whole and sorted
        [[("a", 2), ("a", 1)], [("b", 1)]],  # a topic's ledgers out of order: the same
        [],  # no part holds a row
    ],
)
def test_a_plan_tables_entries_are_merged_from_its_parts_by_topic_then_ledger(tmp_path, parts):
    from housekeeping.engine.report import plan_entries_per_topic

    _write_parts(tmp_path, parts)
    entries = plan_entries_per_topic(
        tmp_path,
        DECISIONS,
        ["topic", "ledgerId", "size"],
        lambda rs: (rs[0]["topic"], [r["ledgerId"] for r in rs]),
    )
    expected = _by_topic([row for part in parts for row in part])
    assert list(entries) == expected and len(entries) == len(expected)
    assert list(entries) == list(entries), "the same entries each time the list is written"


def test_a_part_that_is_not_a_row_of_the_table_is_bad_input_naming_the_file_before_a_row_is_written(tmp_path):
    from housekeeping.core.errors import InputError
    from housekeeping.engine.report import plan_entries_per_topic, plan_rows
    from housekeeping.engine.run_dir import RunDir

    _write_parts(tmp_path, [[("a", 1)], [("b", 1)]])
    part = RunDir(tmp_path).plan_table(DECISIONS) / "part-00001.json"
    part.write_text(json.dumps({"topic": "b", "ledgerId": 1, "colour": "red"}) + "\n")
    with pytest.raises(InputError, match="part-00001.json"):
        plan_entries_per_topic(tmp_path, DECISIONS, ["topic", "ledgerId"], lambda rs: rs)
    with pytest.raises(InputError, match="part-00001.json"):
        plan_rows(tmp_path, DECISIONS)


def test_a_plan_tables_rows_stream_in_the_order_and_form_of_the_whole_table(tmp_path):
    from housekeeping.engine.plan import read_table_arrow
    from housekeeping.engine.report import plan_rows, sparse_rows

    _write_parts(tmp_path, [[("b", 2), ("a", 1)], [], [("c", 3)]])
    streamed = plan_rows(tmp_path, DECISIONS)
    whole = sparse_rows(read_table_arrow(tmp_path, DECISIONS))
    assert len(streamed) == len(whole) == 3
    assert list(streamed) == list(whole)
    assert list(streamed)[0] == {"topic": "b", "ledgerId": 2, "size": 20}, "a null column left out"


def test_topic_values_are_looked_up_in_topic_order_and_again_from_the_start(tmp_path):
    from housekeeping.engine.contract import TOPICS
    from housekeeping.engine.report import TopicValuesInOrder
    from housekeeping.engine.run_dir import RunDir

    run = RunDir(tmp_path / "run")
    path = run.snapshot_table(TOPICS)
    path.parent.mkdir(parents=True)
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = ["c", "a", "b", "e"]
    pq.write_table(
        pa.table(
            {
                "topic": names,
                "retentionDescription": [f"{n} days" for n in names],
                "retentionSource": [f"{n}-source" for n in names],
            }
        ),
        path,
    )
    values = TopicValuesInOrder(run.path, "retentionDescription", "retentionSource")
    assert [values[t] for t in ["a", "b", "e"]] == [
        ("a days", "a-source"),
        ("b days", "b-source"),
        ("e days", "e-source"),
    ]
    assert values["c"] == ("c days", "c-source"), "a topic before the last one looked up: read from the start"
    with pytest.raises(KeyError):
        values["d"]
    assert values.get("zz", "none") == "none" and values["a"] == ("a days", "a-source")
    assert TopicValuesInOrder(run.path, "retentionDescription").get("b") == "b days"


def test_topic_values_share_one_object_per_distinct_text_and_equal_a_plain_read(tmp_path):
    """A million topics share a few policies documents: ``snapshot_topic_values`` reads text columns
    dictionary-encoded and hands back one Python string per distinct text, with the values a plain read gives."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from housekeeping.engine.contract import TOPICS
    from housekeeping.engine.run_dir import RunDir
    from housekeeping.engine.snapshot_reads import snapshot_topic_values

    run = RunDir(tmp_path / "run")
    path = run.snapshot_table(TOPICS)
    path.parent.mkdir(parents=True)
    names = [f"persistent://t/ns/{i:03d}" for i in range(200)]
    documents = ['{"retention": 1}', '{"retention": 2}', '{"retention": 3}']
    rows = {
        "topic": names,
        "policies": [documents[i % 3] for i in range(200)],
        "version": list(range(200)),
    }
    pq.write_table(pa.table(rows), path, row_group_size=100)  # two row groups, each with its own dictionary
    values = snapshot_topic_values(run.path, "policies", topics=names[:150])
    assert values == {names[i]: documents[i % 3] for i in range(150)}
    assert len({id(v) for v in values.values()}) <= 6, "one object per distinct text per row group"
    pairs = snapshot_topic_values(run.path, "policies", "version")
    assert pairs[names[4]] == (documents[1], 4) and len(pairs) == 200


def test_batch_rows_leave_out_each_row_s_nulls_whether_or_not_a_column_is_null_in_the_whole_batch():
    """``sparse_batch_rows`` drops a column null in every row of a batch before making the rows: the rows are
    those of the plain per-row reading, keys in column order, falsy values kept."""
    import pyarrow as pa

    from housekeeping.engine.report import sparse_batch_rows

    rows = [
        {"topic": "t1", "action": "delete_ledger", "ledgerId": 1, "subscription": None, "bytes": 0, "exceeded": None},
        {"topic": "t1", "action": "move_cursor", "ledgerId": None, "subscription": "s", "bytes": None, "exceeded": False},
        {"topic": "t2", "action": "delete_ledger", "ledgerId": 2, "subscription": None, "bytes": 5, "exceeded": None},
        {"topic": "t3", "action": "delete_ledger", "ledgerId": 3, "subscription": None, "bytes": None, "exceeded": None},
    ]  # fmt: skip
    table = pa.Table.from_pylist(rows)
    batches = table.to_batches(max_chunksize=2)  # the second batch has no subscription and no exceeded at all
    assert len(batches) == 2 and batches[1].column("subscription").null_count == 2
    expected = [{k: v for k, v in row.items() if v is not None} for row in rows]
    read = list(sparse_batch_rows(batches))
    assert read == expected and [list(r) for r in read] == [list(r) for r in expected]
    assert list(sparse_batch_rows(table.slice(0, 0).to_batches())) == []
