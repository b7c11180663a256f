"""What an action's effect reads of the snapshot beyond its own row (``PlanView``): each topic's ledgers, in ledger
order, made when asked for from the snapshot's columns, a bucket's row group at a time when the plan asks a bucket at
a time."""

from __future__ import annotations

import pytest

from housekeeping.engine.actions import PlanView
from housekeeping.engine.contract import LEDGERS
from housekeeping.engine.documents import RunInfo, write_document
from housekeeping.engine.run_dir import RunDir
from tests.conftest import record_snapshot_reads

pytestmark = pytest.mark.unit


def test_a_topics_ledgers_come_from_the_snapshot_in_ledger_order_and_an_unknown_topic_has_none(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = RunDir(tmp_path / "run")
    path = run.snapshot_table(LEDGERS)
    path.parent.mkdir(parents=True)
    write_document(run.run_info, RunInfo("r", "trim", 0))  # snapshotted unclustered: read whole
    written = [("t/b", 7, 3, 30), ("t/a", 2, 1, 10), ("t/b", 5, 0, 0), ("t/a", 1, 4, 40), ("t/c", 9, 2, 20)]
    columns = ("topic", "ledgerId", "entries", "size")
    pq.write_table(
        pa.table({c: [row[i] for row in written] for i, c in enumerate(columns)}), path, row_group_size=2
    )
    view = PlanView(run.path)
    expected = {
        topic: [dict(zip(columns, row, strict=True)) for row in sorted(written) if row[0] == topic]
        for topic in ("t/a", "t/b", "t/c")
    }
    for topic in ("t/c", "t/a", "t/b", "t/a"):  # any order, any number of times
        assert view.ledgers(topic) == expected[topic]
    assert view.ledgers("t/none") == []
    listed = view.ledgers("t/a")
    listed.pop()
    assert view.ledgers("t/a") == expected["t/a"], "each caller gets a list of its own"


def test_ledgers_given_instead_of_a_snapshot_are_what_it_returns():
    given = {"t/a": [{"topic": "t/a", "ledgerId": 1, "entries": 1, "size": 5}]}
    view = PlanView(ledgers_by_topic=given)
    assert view.ledgers("t/a") == given["t/a"] and view.ledgers("t/a") is not given["t/a"]
    assert view.ledgers("t/b") == []


def test_a_snapshot_without_ledgers_gives_every_topic_none(tmp_path):
    import pyarrow.parquet as pq

    run = RunDir(tmp_path / "run")
    path = run.snapshot_table(LEDGERS)
    path.parent.mkdir(parents=True)
    write_document(run.run_info, RunInfo("r", "trim", 0))
    columns = LEDGERS.select("topic", "ledgerId", "entries", "size").arrow_schema()
    pq.write_table(columns.empty_table(), path)
    assert PlanView(run.path).ledgers("t/a") == []


def test_a_clustered_snapshot_is_read_a_bucket_at_a_time_and_whole_when_asked_out_of_bucket_order(
    tmp_path, monkeypatch
):

    from housekeeping.engine import contract
    from housekeeping.engine.parquet_rows import write_parquet

    buckets = 4
    run = RunDir(tmp_path / "run")
    run.run_info.parent.mkdir(parents=True)
    write_document(run.run_info, RunInfo("r", "trim", 0, snapshot_buckets=buckets))
    topics = [f"persistent://t/n/topic-{i}" for i in range(12)]
    rows = [
        {
            "topic": t,
            "ledgerId": ledger,
            "entries": ledger,
            "size": 10 * ledger,
            "entriesStored": True,
            "offloadAttempted": False,
            "offloadComplete": False,
            "localDeleted": False,
        }
        for t in topics
        for ledger in (3, 1, 2)
    ]
    write_parquet(run.snapshot_table(LEDGERS), LEDGERS, (LEDGERS.row(r) for r in rows), buckets=buckets)
    reads = record_snapshot_reads(monkeypatch)
    expected = {
        t: [{"topic": t, "ledgerId": ledger, "entries": ledger, "size": 10 * ledger} for ledger in (1, 2, 3)]
        for t in topics
    }
    view = PlanView(run.path)
    in_bucket_order = sorted(topics, key=lambda t: (contract.topic_bucket(t, buckets), t))
    assert {t: view.ledgers(t) for t in in_bucket_order} == expected
    assert sorted(reads) == sorted([b] for b in {contract.topic_bucket(t, buckets) for t in topics})
    reads.clear()
    assert {t: view.ledgers(t) for t in sorted(topics)} == expected
    assert reads == [None], "a bucket asked for again: the whole table, once"
