"""The snapshot read back in Python (``housekeeping.engine.snapshot_reads``): round trips with nulls and types, and a
run snapshotted as JSON lines still read."""

from __future__ import annotations

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine import contract
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot_reads import (
    count_snapshot_rows,
    has_snapshot_table,
    read_snapshot_columns,
    read_snapshot_table,
    snapshot_file,
)

pytestmark = pytest.mark.unit


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
