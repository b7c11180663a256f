"""The contract between the library and the Spark apps (housekeeping.engine.contract): one definition per table that
refuses what it does not define, and the run directory layout users read (public: report paths, gate verdict)."""

from __future__ import annotations

from pathlib import Path

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine import contract, parquet_rows
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.run_dir import RunDir, write_json, write_json_one_line_each
from housekeeping.engine.snapshot_reads import (
    count_snapshot_rows,
    has_snapshot_table,
    read_snapshot_columns,
    read_snapshot_table,
    snapshot_file,
)
from housekeeping.mechanisms.compaction.tables import COMPACTION_DECISIONS, COMPACTION_KEPT

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


def test_a_misspelt_key_is_refused_before_anything_is_written_naming_table_and_key(tmp_path):
    with pytest.raises(ValueError, match=r"table ledgers: no column ledgerID"):
        contract.LEDGERS.row({"topic": "t", "ledgerID": 1, "entries": 2, "size": 3, "entriesStored": True})
    target = tmp_path / "snapshot" / "ledgers.parquet"
    with pytest.raises(ValueError, match="ledgerID"):
        write_parquet(target, contract.LEDGERS, [{"topic": "t", "ledgerID": 1}])
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_a_bad_row_after_good_ones_leaves_the_earlier_file_as_it_was_and_no_partial_file(
    tmp_path, monkeypatch
):
    # The rows are written as they come (a generator of 437,614 ledgers is never a list): a bad one late in the
    # stream must still leave nothing half-written.
    target = tmp_path / "snapshot" / "namespaces.parquet"
    write_parquet(target, contract.NAMESPACES, [{"namespace": "a/b", "storedBytes": 1, "topicCount": 1}])
    before = target.read_bytes()

    def rows():
        for i in range(1000):
            yield {"namespace": f"a/n{i}", "storedBytes": i, "topicCount": 1}
        yield {"namespace": "a/bad", "storedBytes": 1, "topicCount": 1, "topics": 1}

    # Written a row group at a time: the bad row comes after the first group is on disk.
    monkeypatch.setattr(parquet_rows, "PARQUET_BATCH_ROWS", 100)
    with pytest.raises(ValueError, match="no column topics"):
        write_parquet(target, contract.NAMESPACES, rows())
    assert target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["namespaces.parquet"]
    assert write_parquet(target, contract.NAMESPACES, (r for r in list(rows())[:1000])) == 1000
    assert read_snapshot_table(tmp_path, contract.NAMESPACES) == list(rows())[:1000]
    # A path relative to the working directory: the side file still goes.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="no column topics"):
        write_parquet(Path("snapshot/namespaces.parquet"), contract.NAMESPACES, rows())
    assert sorted(p.name for p in target.parent.iterdir()) == ["namespaces.parquet"]


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


def test_a_snapshot_table_round_trips_through_parquet_with_nulls_and_types(tmp_path):
    import pyarrow.parquet as pq

    rows = [
        contract.CURSORS.row(
            {
                "topic": "t",
                "name": "s",
                "durable": True,
                "markDeleteLedger": 2**40,
                "markDeleteEntry": -1,
                "consumers": 0,
            }
        ),
        contract.CURSORS.row(
            {
                "topic": "t",
                "name": "r",
                "durable": False,
                "markDeleteLedger": 1,
                "markDeleteEntry": 3,
                "lastActiveMs": 5,
                "consumers": 2,
            }
        ),
    ]
    run = RunDir(tmp_path)
    write_parquet(run.snapshot_table(contract.CURSORS), contract.CURSORS, rows)
    assert run.snapshot_table(contract.CURSORS).name == "cursors.parquet"
    assert read_snapshot_table(run, contract.CURSORS) == rows
    assert pq.read_schema(run.snapshot_table(contract.CURSORS)) == contract.CURSORS.arrow_schema()
    assert count_snapshot_rows(run, contract.CURSORS) == 2
    with pytest.raises(InputError, match=r"has no snapshot table 'ledgers' \(.*ledgers.parquet is missing\)"):
        read_snapshot_table(run, contract.LEDGERS)


def test_a_run_snapshotted_as_json_lines_before_is_still_read(tmp_path):
    # Runs taken before the snapshot was Parquet (their approval, apply and report may come after an upgrade; the
    # storage report reads every run's namespaces).
    import json

    run = RunDir(tmp_path)
    run.snapshot_dir.mkdir()
    rows = [
        {"namespace": "a/b", "storedBytes": 7, "topicCount": 2},
        {"namespace": "a/c", "storedBytes": 1, "topicCount": 1},
    ]
    legacy = run.snapshot_dir / "namespaces.jsonl"
    legacy.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert has_snapshot_table(run, contract.NAMESPACES)
    assert snapshot_file(run, contract.NAMESPACES) == legacy
    assert read_snapshot_table(run, contract.NAMESPACES) == rows
    assert count_snapshot_rows(run, contract.NAMESPACES) == 2
    columns = read_snapshot_columns(run, contract.NAMESPACES.select("namespace", "topicCount"))
    assert columns.to_pylist() == [
        {"namespace": "a/b", "topicCount": 2},
        {"namespace": "a/c", "topicCount": 1},
    ]
    # A snapshot taken again into the same run directory is read instead.
    write_parquet(run.snapshot_table(contract.NAMESPACES), contract.NAMESPACES, rows[:1])
    assert read_snapshot_table(run, contract.NAMESPACES) == rows[:1]


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


def test_the_run_directory_layout_is_the_documented_one(tmp_path):
    run = RunDir(tmp_path / "runs" / "trim" / "r1")
    assert RunDir(run) == run and Path(run) == run.path
    relative = {
        name: getattr(run, name).relative_to(run.path).as_posix()
        for name in (
            "run_info",
            "plan_summary",
            "gate_result",
            "data_docs_index",
            "apply_result",
            "purge_result",
            "report_json",
            "report_md",
        )
    }
    assert relative == {
        "run_info": "snapshot/run.json",
        "plan_summary": "plan/summary.json",
        "gate_result": "gate/result.json",
        "data_docs_index": "gate/data_docs/index.html",
        "apply_result": "apply/result.json",
        "purge_result": "apply/purge.json",
        "report_json": "report/report.json",
        "report_md": "report/report.md",
    }
    assert run.snapshot_table(contract.TOPICS) == run.path / "snapshot" / "topics.parquet"
    assert run.plan_table(contract.ACTIONS) == run.path / "plan" / "actions"
    assert run.plan_table(COMPACTION_KEPT) == run.path / "plan" / "compaction" / "kept"


def test_a_large_document_is_written_one_value_per_line_and_reads_back_as_json_dump_wrote_it(tmp_path):
    import json
    from datetime import date

    from housekeeping.engine.report import StreamedList

    entries = [
        {"topic": f"t-{i}", "ledgers": [{"id": i, "size": None}], "z": 1.5, "a": "é"} for i in range(3)
    ]
    document = {
        "topics": StreamedList(len(entries), lambda: iter(entries)),
        "empty": StreamedList(0, lambda: iter(())),
        "summary": {"when": date(2026, 11, 1), "nested": {"b": 2, "a": [1, 2]}},
        "byLedger": {10: [], 7: 1},
        "none": None,
        "tuple": (1, "two"),
    }
    path = tmp_path / "report.json"
    write_json_one_line_each(path, document)
    plain = tmp_path / "plain.json"
    write_json(plain, {**document, "topics": entries, "empty": []})
    assert json.loads(path.read_text()) == json.loads(plain.read_text())
    lines = path.read_text().splitlines()
    # Each topic's entry on a line of its own, keys sorted, at the second level of indentation.
    topic_lines = [line for line in lines if '"topic": "t-' in line]
    assert len(topic_lines) == 3 and all(line.startswith('    {"a": "\\u00e9"') for line in topic_lines)
    assert lines[0] == "{" and lines[-1] == "}" and '  "empty": [],' in lines
    assert lines.index('    "7": 1,') < lines.index('    "10": []') and '    "when": "2026-11-01"' in lines


def test_a_bucketed_table_holds_each_bucket_s_whole_topics_in_its_row_group(tmp_path):
    """Row group b is bucket b (an empty one included), each topic's rows together and in the order they came;
    every row is kept; a bad row leaves no file and no side file."""
    import pyarrow.parquet as pq

    topics = [f"persistent://t/ns/topic-{i}" for i in range(40)]
    rows = [
        {"topic": topic, "name": f"s{j}", "durable": True, "markDeleteLedger": 9 - j, "markDeleteEntry": 0,
         "consumers": 0}
        for j in range(3)
        for topic in topics
    ]  # fmt: skip
    path = tmp_path / "cursors.parquet"
    assert write_parquet(path, contract.CURSORS, rows, buckets=64) == len(rows)
    parquet = pq.ParquetFile(path)
    assert parquet.num_row_groups == 64
    seen = []
    for bucket in range(64):
        group = parquet.read_row_group(bucket).to_pylist()
        assert {contract.topic_bucket(r["topic"], 64) for r in group} <= {bucket}
        names = [r["topic"] for r in group]
        assert names == sorted(names), "a topic's rows are together"
        for topic in dict.fromkeys(names):
            assert [r["name"] for r in group if r["topic"] == topic] == ["s0", "s1", "s2"]
        seen.extend(group)
    assert any(parquet.metadata.row_group(b).num_rows == 0 for b in range(64)), (
        "40 topics leave a bucket empty"
    )
    assert sorted(seen, key=str) == sorted((contract.CURSORS.row(r) for r in rows), key=str)

    with pytest.raises(ValueError, match="markDeleteEntry"):
        write_parquet(tmp_path / "bad.parquet", contract.CURSORS, [*rows, {"topic": "x"}], buckets=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cursors.parquet"]


def test_a_topic_s_bucket_is_fixed_by_its_name():
    """The bucket is part of the snapshot's layout (a sweep's points read one another's tables by it): a hash fixed
    by the name alone, not Python's per-process ``hash``."""
    names = ("persistent://a/b/c", "", "persistent://t/ns/topic-1")
    assert [contract.topic_bucket(name, 8) for name in names] == [7, 0, 2]


def test_a_table_written_from_arrow_batches_equals_it_written_row_by_row(tmp_path):
    """A builder may yield batches of rows (Arrow tables) among rows: the file holds the same rows in the same
    places. A batch of other columns, of another type, or with a null in a required column is refused, naming
    the table and column, and leaves no file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"topic": f"persistent://t/ns/topic-{i % 7}", "name": f"s{i}", "durable": i % 2 == 0,
         "markDeleteLedger": i, "markDeleteEntry": -1, "lastActiveMs": None if i % 3 else i, "consumers": 0}
        for i in range(30)
    ]  # fmt: skip
    schema = contract.CURSORS.arrow_schema()
    mixed = [*rows[:5], pa.Table.from_pylist(rows[5:20], schema=schema), *rows[20:25]]
    mixed.append(pa.Table.from_pylist(rows[25:], schema=schema))
    for buckets in (None, 4):
        by_row, by_batch = tmp_path / f"rows-{buckets}.parquet", tmp_path / f"batches-{buckets}.parquet"
        assert write_parquet(by_row, contract.CURSORS, rows, buckets=buckets) == len(rows)
        assert write_parquet(by_batch, contract.CURSORS, mixed, buckets=buckets) == len(rows)
        assert pq.read_table(by_batch).equals(pq.read_table(by_row)), buckets
        assert pq.ParquetFile(by_batch).num_row_groups == (1 if buckets is None else buckets)

    good = pa.Table.from_pylist(rows, schema=schema)
    bad_batches = {
        "columns": good.drop_columns(["consumers"]),
        "bigint": good.set_column(3, "markDeleteLedger", pa.array([str(i) for i in range(30)])),
        "missing": good.set_column(2, schema.field(2), pa.array([None] * 30, pa.bool_())),
    }
    for why, batch in bad_batches.items():
        expected = (
            "required column\\(s\\) durable missing" if why == "missing" else "table cursors: a batch of"
        )
        with pytest.raises(ValueError, match=expected):
            write_parquet(tmp_path / f"bad-{why}.parquet", contract.CURSORS, [batch], buckets=4)
    assert not list(tmp_path.glob("bad-*"))
