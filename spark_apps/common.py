"""Shared I/O of the Spark apps: snapshot schemas, snapshot readers, the plan writer, session builder.

Only I/O lives here; decision logic is in each app's pure transforms.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
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
        T.StructField("messageTtlSeconds", T.LongType(), False),
        T.StructField("messageTtlSource", T.StringType(), False),
        T.StructField("sizeQuotaLimitBytes", T.LongType(), False),
        T.StructField("sizeQuotaPolicy", T.StringType(), False),
        T.StructField("timeQuotaLimitSeconds", T.LongType(), False),
        T.StructField("timeQuotaPolicy", T.StringType(), False),
        T.StructField("policies", T.StringType(), False),
        T.StructField("inactiveDeleteMode", T.StringType(), True),
        T.StructField("maxInactiveSeconds", T.LongType(), True),
        T.StructField("deleteWhileInactive", T.BooleanType(), True),
        T.StructField("inactivePolicySource", T.StringType(), True),
        T.StructField("partitionedTopic", T.StringType(), True),
        T.StructField("compactionThresholdBytes", T.LongType(), True),
        T.StructField("compactedRetentionTimeMs", T.LongType(), True),
        T.StructField("compactedRetentionSizeBytes", T.LongType(), True),
        T.StructField("compactedRetentionDescription", T.StringType(), True),
        T.StructField("tombstoneGraceMs", T.LongType(), True),
        # The hold covering the topic (housekeeping.holds.describe), None when not held.
        T.StructField("heldBy", T.StringType(), True),
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
        T.StructField("consumers", T.LongType(), False),
    ]
)

NAMESPACES_SCHEMA = T.StructType(
    [
        T.StructField("namespace", T.StringType(), False),
        T.StructField("storedBytes", T.LongType(), False),
        T.StructField("topicCount", T.LongType(), False),
    ]
)

QUOTA_STATES_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("quotaType", T.StringType(), False),
        T.StructField("policy", T.StringType(), False),
        T.StructField("exceeded", T.BooleanType(), False),
        T.StructField("limitValue", T.LongType(), False),
        T.StructField("measuredValue", T.LongType(), True),
        T.StructField("exceededSinceMs", T.LongType(), True),
        T.StructField("asOfMs", T.LongType(), False),
    ]
)

PARTITIONED_TOPICS_SCHEMA = T.StructType(
    [
        T.StructField("partitionedTopic", T.StringType(), False),
        T.StructField("namespace", T.StringType(), False),
        T.StructField("partitions", T.LongType(), False),
        T.StructField("existingPartitions", T.LongType(), False),
        T.StructField("heldBy", T.StringType(), True),
    ]
)

HOLDS_SCHEMA = T.StructType(
    [
        T.StructField("target", T.StringType(), False),
        T.StructField("scope", T.StringType(), False),
        T.StructField("reason", T.StringType(), False),
        T.StructField("createdBy", T.StringType(), False),
        T.StructField("createdAtMs", T.LongType(), False),
    ]
)

COMPACTED_LEDGERS_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("ledgerId", T.LongType(), False),
        T.StructField("horizonLedger", T.LongType(), False),
        T.StructField("horizonEntry", T.LongType(), False),
        T.StructField("entries", T.LongType(), False),
        T.StructField("size", T.LongType(), False),
        T.StructField("minEntryTsMs", T.LongType(), True),
        T.StructField("maxEntryTsMs", T.LongType(), True),
        T.StructField("tombstones", T.LongType(), False),
        T.StructField("oldestTombstoneTsMs", T.LongType(), True),
        T.StructField("compactedAsOfMs", T.LongType(), False),
    ]
)

SNAPSHOT_SCHEMAS = {
    "topics": TOPICS_SCHEMA,
    "ledgers": LEDGERS_SCHEMA,
    "cursors": CURSORS_SCHEMA,
    "namespaces": NAMESPACES_SCHEMA,
    "quota_states": QUOTA_STATES_SCHEMA,
    "partitioned_topics": PARTITIONED_TOPICS_SCHEMA,
    "compacted_ledgers": COMPACTED_LEDGERS_SCHEMA,
    "holds": HOLDS_SCHEMA,
}


PROGRESS_ENV = "HOUSEKEEPING_PROGRESS_SECONDS"


def progress_line(app_name: str, elapsed_s: float, stages: list) -> str:
    """One progress line: each active stage's completed/total tasks (Spark's own stage names)."""
    active = "; ".join(
        f"stage {s.stageId} ({s.name.split(' at ')[0][:40]}): {s.numCompletedTasks}/{s.numTasks} tasks"
        + (f", {s.numActiveTasks} running" if s.numActiveTasks else "")
        + (f", {s.numFailedTasks} failed" if s.numFailedTasks else "")
        for s in stages
    )
    return f"[{app_name}] {elapsed_s:.0f} s: {active or 'driver work (no Spark stage running)'}"


def start_progress_log(spark: SparkSession, app_name: str) -> None:
    """Under spark-submit, print the app's Spark progress to stderr every HOUSEKEEPING_PROGRESS_SECONDS (default
    30; 0 turns it off). SparkSubmitHook streams the app's output into the Airflow task log, so a long plan or
    gate shows where it is (the console progress bar is off: its carriage returns garble a log)."""
    interval = float(os.environ.get(PROGRESS_ENV, "30"))
    if interval <= 0:
        return
    tracker = spark.sparkContext.statusTracker()
    started = time.monotonic()

    def report() -> None:
        while True:
            time.sleep(interval)
            try:
                stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
                line = progress_line(
                    app_name, time.monotonic() - started, [s for s in stages if s is not None]
                )
            except Exception:  # the session is stopping; progress is best effort
                return
            print(line, file=sys.stderr, flush=True)

    threading.Thread(target=report, name="housekeeping-progress", daemon=True).start()


def use_own_interpreter() -> None:
    """Spark starts its Python workers with ``PYSPARK_PYTHON``, else the first ``python3`` on PATH, which need not
    have this project's packages (a command run by its full path from a virtualenv that is not on PATH, as cron,
    systemd or another tool runs it). Unless the user set ``PYSPARK_PYTHON``, the workers use the interpreter
    this driver runs in. Read by the SparkContext when the session starts."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def get_spark(app_name: str, master: str | None = None) -> SparkSession:
    """The one SparkSession builder of the project. Under spark-submit (the DAGs) the master comes from the
    submit command; in-process callers (CLI, tests, benchmarks) pass one and get a UI-less, quiet session."""
    use_own_interpreter()
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.showConsoleProgress", "false")
        # The status store keeps every job's and SQL execution's plan even without a UI; the cursor planners
        # run many small jobs with large plans, so keep only recent ones (a long-lived session otherwise
        # fills the driver heap).
        .config("spark.sql.ui.retainedExecutions", "50")
        .config("spark.ui.retainedJobs", "200")
        .config("spark.ui.retainedStages", "200")
        # Plan strings are built for every SQL execution (UI/status store); bound them.
        .config("spark.sql.maxPlanStringLength", "200000")
    )
    if master is None:
        session = builder.getOrCreate()
        start_progress_log(session, app_name)
        return session
    spark = (
        builder.master(master)
        .config("spark.ui.enabled", "false")
        # In-process callers share one JVM for every run (tests run the whole suite in it).
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_snapshot(spark: SparkSession, run_dir: str | Path) -> dict[str, DataFrame]:
    base = Path(run_dir) / "snapshot"
    return {
        name: spark.read.schema(schema).json(str(base / f"{name}.jsonl"))
        for name, schema in SNAPSHOT_SCHEMAS.items()
    }


ENTRY_READ_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("ledgerId", T.LongType(), False),
        T.StructField("entryId", T.LongType(), False),
        T.StructField("publishTime", T.LongType(), False),
        T.StructField("brokerTimestamp", T.LongType(), True),
        T.StructField("size", T.IntegerType(), False),
    ]
)


@dataclass
class EntryReads:
    """What a run read from the entry store (the cost the cursor mechanisms report)."""

    ledgers: int = 0
    file_bytes: int = 0
    entry_bytes: int = 0  # the ledgers' payload bytes per the metadata
    keys: list[tuple[str, int]] = field(default_factory=list)


def read_entries(
    spark: SparkSession, store_root: str | Path, keys: list[tuple[str, int, int]], reads: EntryReads
) -> DataFrame:
    """Entries of the given ledgers only: (topic, ledgerId, payload bytes) -> topic, ledgerId, entryId,
    publishTime, entryTs (broker timestamp when stored, else publish time), size.

    A ledger the metadata says is stored but whose directory is missing is bad input: the error names it."""
    from housekeeping.entries import check_ledger_files
    from housekeeping.store import ledger_rel_path

    root = Path(store_root)
    paths = []
    for topic, ledger_id, payload_bytes in sorted(set(keys)):
        ledger_dir = root / ledger_rel_path(topic, ledger_id)
        files = check_ledger_files(topic, ledger_id, ledger_dir)
        paths.append(str(ledger_dir))
        reads.ledgers += 1
        reads.file_bytes += sum(f.stat().st_size for f in files)
        reads.entry_bytes += int(payload_bytes)
        reads.keys.append((topic, ledger_id))
    if not paths:
        return spark.createDataFrame([], ENTRY_READ_SCHEMA).withColumn("entryTs", F.col("publishTime"))
    frame = spark.read.schema(ENTRY_READ_SCHEMA).parquet(*paths)
    return frame.withColumn("entryTs", F.coalesce(F.col("brokerTimestamp"), F.col("publishTime")))


def write_table(frame: DataFrame, path: str | Path, order_by: list[str]) -> None:
    """One JSON-lines part file, rows in a stable order, so plans are diffable and digestible."""
    frame.repartition(1).sortWithinPartitions(*order_by).write.mode("overwrite").json(str(path))


def write_summary(plan_dir: Path, summary: dict) -> None:
    """``plan/summary.json`` (read back by ``housekeeping.plan.read_summary``)."""
    (Path(plan_dir) / "summary.json").write_text(
        json.dumps(summary, indent=2, sort_keys=True), encoding="utf-8"
    )


def materialize(frame: DataFrame) -> DataFrame:
    """Compute an intermediate result once and cut its lineage (an eager local checkpoint). Reused results are
    materialized this way rather than cached: a cached frame keeps its whole plan, so every later query nests
    the plans of all the caches it reads, and planning, plan strings and the status store grow with each
    step (a precise backlog run ran the driver out of heap printing one such plan). The blocks live on the
    executors: losing one fails the task (no recomputation) and Airflow's retry reruns the application."""
    return frame.localCheckpoint(eager=True)


@contextmanager
def run_scoped_cache(spark: SparkSession) -> Iterator[None]:
    """Frames an app caches or materializes live for one run. Under spark-submit the application ends anyway;
    in-process callers (CLI, tests, benchmarks) reuse one session, which would otherwise keep every run's
    blocks until the driver heap fills and the JVM spends its time in full GCs."""
    try:
        yield
    finally:
        spark.catalog.clearCache()
        for rdd in spark.sparkContext._jsc.getPersistentRDDs().values():
            rdd.unpersist(False)


HELD_KIND = "held"


def keep_held(
    decisions: DataFrame,
    held: DataFrame,
    *,
    decision: str,
    keep: str,
    topic: str = "topic",
    reset: dict[str, F.Column] | None = None,
) -> DataFrame:
    """Every row of a held topic keeps (``decision`` = ``keep``, kind ``held``, reason naming the hold and what
    the rules alone would have done). ``held``: (topic, heldBy) rows, heldBy null when not held; ``reset``:
    columns that describe the effect of the overridden decision and get their kept value. Applied to each
    planner's decisions before actions, blockers and summaries are derived, so all three agree."""
    frame = decisions.join(held.select(F.col("topic").alias(topic), "heldBy"), topic, "left")
    overridden = F.col("heldBy").isNotNull() & (F.col(decision) != F.lit(keep))
    for column, kept_value in (reset or {}).items():
        frame = frame.withColumn(column, F.when(overridden, kept_value).otherwise(F.col(column)))
    return (
        frame.withColumn(
            "reason",
            F.when(
                overridden,
                F.concat(
                    F.col("heldBy"),
                    F.lit("; without the hold: "),
                    F.col(decision),
                    F.lit(": "),
                    F.col("reason"),
                ),
            ).otherwise(F.col("reason")),
        )
        .withColumn("kind", F.when(overridden, F.lit(HELD_KIND)).otherwise(F.col("kind")))
        .withColumn(decision, F.when(overridden, F.lit(keep)).otherwise(F.col(decision)))
        .drop("heldBy")
    )
