"""A gate's pass routes the plan's rows to their topic's bucket (``topic_pass._routed_plan``): bucket b's rows, and
its marker, are task b's alone, whatever the number of buckets, because the rows are repartitioned by a key Spark's
own hash sends to partition b (``partition_keys``). Repartitioned by the bucket number, some tasks would hold two or
three buckets' rows at once and others none."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from housekeeping.engine.contract import ACTIONS, topic_bucket
from housekeeping.engine.run_dir import RunDir
from spark_apps.shared.topic_pass import _routed_plan, partition_keys

pytestmark = pytest.mark.spark


def _buckets_per_task(frame) -> dict[int, set[int]]:
    def seen(batches):
        from pyspark import TaskContext

        buckets: set[int] = set()
        for batch in batches:
            buckets.update(batch.column("bucket").to_pylist())
        yield pa.RecordBatch.from_pylist(
            [{"task": TaskContext.get().partitionId(), "buckets": json.dumps(sorted(buckets))}]
        )

    rows = frame.mapInArrow(seen, "task long, buckets string").collect()
    return {row["task"]: set(json.loads(row["buckets"])) for row in rows}


@pytest.mark.parametrize("buckets", [8, 21])
def test_each_bucket_is_one_task_s_alone(spark, tmp_path, buckets):
    table = RunDir(tmp_path).plan_table(ACTIONS)
    table.mkdir(parents=True)
    topics = [f"persistent://t/ns/topic-{i}" for i in range(20 * buckets)]
    (table / "part-00000.json").write_text(
        "".join(
            json.dumps({"topic": t, "action": "delete_ledger", "ledgerId": 1, "reason": "r"}) + "\n"
            for t in topics
        )
    )
    assert {topic_bucket(t, buckets) for t in topics} == set(range(buckets))
    routed = _routed_plan(spark, tmp_path, buckets, [])
    assert routed.columns[-2:] == ["bucket", "marker"]  # the routing key is not a row's column
    assert _buckets_per_task(routed) == {b: {b} for b in range(buckets)}
    by_number = _buckets_per_task(routed.repartition(buckets, "bucket"))
    assert max(len(seen) for seen in by_number.values()) > 1


def test_every_partition_has_a_key_that_lands_in_it(spark):
    from pyspark.sql import functions as F

    keys = partition_keys(spark, 37)
    frame = spark.createDataFrame([(k,) for k in keys], "key long")
    landed = frame.select(F.pmod(F.hash("key"), F.lit(37)).alias("p")).collect()
    assert [row["p"] for row in landed] == list(range(37))
