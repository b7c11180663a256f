"""The contract's Parquet writers (``housekeeping.engine.parquet_rows``): a bad row refused before anything is
written, the earlier file left as it was; a bucketed table's row groups; Arrow batches as rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from housekeeping.engine import contract, parquet_rows
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.snapshot_reads import (
    read_snapshot_table,
)

pytestmark = pytest.mark.unit


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
