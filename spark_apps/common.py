"""Shared I/O of the Spark apps: snapshot schemas, snapshot readers, the plan writer, session builder.

Only I/O lives here; decision logic is in each app's pure transforms.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

TOPICS_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("namespace", T.StringType(), False),
        T.StructField("tenant", T.StringType(), False),
        T.StructField("isSystemTopic", T.BooleanType(), False),
        T.StructField("version", T.LongType(), False),
        T.StructField("producers", T.LongType(), False),
        T.StructField("consumers", T.LongType(), False),
        T.StructField("lastActiveMs", T.LongType(), True),
        T.StructField("retentionTimeMs", T.LongType(), False),
        T.StructField("retentionSizeBytes", T.LongType(), False),
        T.StructField("retentionSource", T.StringType(), False),
        T.StructField("retentionDescription", T.StringType(), False),
        T.StructField("policies", T.StringType(), False),
    ]
)

LEDGERS_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("ledgerId", T.LongType(), False),
        T.StructField("entries", T.LongType(), False),
        T.StructField("size", T.LongType(), False),
        T.StructField("closedAtMs", T.LongType(), True),
        T.StructField("minEntryTsMs", T.LongType(), True),
        T.StructField("maxEntryTsMs", T.LongType(), True),
        T.StructField("entriesStored", T.BooleanType(), False),
    ]
)

CURSORS_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("name", T.StringType(), False),
        T.StructField("durable", T.BooleanType(), False),
        T.StructField("markDeleteLedger", T.LongType(), False),
        T.StructField("markDeleteEntry", T.LongType(), False),
        T.StructField("lastActiveMs", T.LongType(), True),
    ]
)

NAMESPACES_SCHEMA = T.StructType(
    [
        T.StructField("namespace", T.StringType(), False),
        T.StructField("storedBytes", T.LongType(), False),
        T.StructField("topicCount", T.LongType(), False),
    ]
)

SNAPSHOT_SCHEMAS = {
    "topics": TOPICS_SCHEMA,
    "ledgers": LEDGERS_SCHEMA,
    "cursors": CURSORS_SCHEMA,
    "namespaces": NAMESPACES_SCHEMA,
}


def get_spark(app_name: str, master: str | None = None) -> SparkSession:
    """The one SparkSession builder of the project. Under spark-submit (the DAGs) the master comes from the
    submit command; in-process callers (CLI, tests, benchmarks) pass one and get a UI-less, quiet session."""
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master is None:
        return builder.getOrCreate()
    spark = builder.master(master).config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_snapshot(spark: SparkSession, run_dir: str | Path) -> dict[str, DataFrame]:
    base = Path(run_dir) / "snapshot"
    return {
        name: spark.read.schema(schema).json(str(base / f"{name}.jsonl"))
        for name, schema in SNAPSHOT_SCHEMAS.items()
    }


def write_table(frame: DataFrame, path: str | Path, order_by: list[str]) -> None:
    """One JSON-lines part file, rows in a stable order, so plans are diffable and digestible."""
    frame.repartition(1).sortWithinPartitions(*order_by).write.mode("overwrite").json(str(path))
