"""Reading a snapshot bucket (``spark_apps.shared.topic_pass.read_bucket``) without Spark: a clustered table's row
group, a table rewritten unclustered by another writer read whole and filtered to the bucket, a row group holding
another bucket's topic refused naming the file."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from housekeeping.engine import contract
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.run_dir import RunDir
from spark_apps.shared.topic_pass import read_bucket

pytestmark = pytest.mark.unit

BUCKETS = 4
TOPICS = [f"persistent://t/ns/topic-{i}" for i in range(30)]


def cursor(topic: str) -> dict:
    return {
        "topic": topic,
        "name": "s",
        "durable": True,
        "markDeleteLedger": 1,
        "markDeleteEntry": 0,
        "consumers": 0,
    }


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "snapshot").mkdir()
    return tmp_path


def topics_read(run_dir, bucket: int) -> list[str]:
    rows = read_bucket(run_dir, RunInfo("r", "trim", 0, snapshot_buckets=BUCKETS), contract.CURSORS, bucket)
    return [r["topic"] for r in rows]


def test_each_bucket_reads_its_own_topics_clustered_or_not(run_dir):
    path = RunDir(run_dir).snapshot_table(contract.CURSORS)
    expected = {
        b: sorted(t for t in TOPICS if contract.topic_bucket(t, BUCKETS) == b) for b in range(BUCKETS)
    }
    write_parquet(path, contract.CURSORS, [cursor(t) for t in TOPICS], buckets=BUCKETS)
    assert {b: sorted(topics_read(run_dir, b)) for b in range(BUCKETS)} == expected
    write_parquet(path, contract.CURSORS, [cursor(t) for t in TOPICS])  # one row group: rewritten
    assert {b: sorted(topics_read(run_dir, b)) for b in range(BUCKETS)} == expected


def test_a_row_group_holding_another_bucket_s_topic_is_refused_naming_the_file(run_dir):
    path = RunDir(run_dir).snapshot_table(contract.CURSORS)
    schema = contract.CURSORS.arrow_schema()
    with pq.ParquetWriter(path, schema) as writer:
        for _ in range(BUCKETS):  # every row group holds every topic
            writer.write_table(
                pa.Table.from_pylist([contract.CURSORS.row(cursor(t)) for t in TOPICS], schema)
            )
    with pytest.raises(ValueError, match="cursors.parquet: row group 0 holds topics of other buckets"):
        topics_read(run_dir, 0)
