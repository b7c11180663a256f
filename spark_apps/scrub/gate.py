"""Quality-gate checks for the store scrub, re-derived from the scrub's snapshot apart from the planner (the plan's
findings are never read: only its actions):

- repairs: every ``delete_orphan`` names an item the listing holds, with the modification time and bytes planned;
  of a repairable shape (a ledger directory or a writer's staging directory at the ledger depth of the tree, or a
  tier object of the layout), inside the store's ledger tree or the tier's prefix; named by no ledger row,
  compacted ledger (current or staged), pending deletion, restored orphan or the tier's marker, matched on the
  location itself and on the ledger it would be (topic, ledger id and files generation, or the offload attempt); at
  least the minimum age old at the snapshot's wall clock; each item once.
- actions: only delete_orphan.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from housekeeping.engine.gate import CheckFrame, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.scrub.actions import DELETE_ORPHAN
from spark_apps.scrub.plan import read_scrub_snapshot
from spark_apps.shared.io import read_actions

# Re-stated here on purpose (not imported from the store): the gate's idea of the layout is its own.
LOCAL_SHAPE = r"^ledgers/persistent/[^/]+/[^/]+/[^/]+/(\d+(\.[1-9]\d*)?|\.tmp-\d+(\.[1-9]\d*)?-[0-9a-f]{32})$"
TIER_SHAPE = r"^persistent/[^/]+/[^/]+/[^/]+/\d+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.parquet$"


def _ledger_key(location, path):
    """(directory of the topic, ledger id, generation or attempt) a location would hold: a second way to match an
    item to a row than the exact path."""
    topic_dir = F.regexp_extract(path, r"^(?:ledgers/)?persistent/([^/]+/[^/]+/[^/]+)/", 1)
    local_name = F.regexp_extract(path, r"/(\d+(?:\.\d+)?)$", 1)
    tier_name = F.regexp_extract(path, r"/(\d+)-([0-9a-f-]{36})\.parquet$", 1)
    ledger = F.when(location == "tier", tier_name).otherwise(F.get(F.split(local_name, r"\."), 0))
    variant = F.when(
        location == "tier", F.regexp_extract(path, r"/\d+-([0-9a-f-]{36})\.parquet$", 1)
    ).otherwise(F.coalesce(F.get(F.split(local_name, r"\."), 1), F.lit("0")))
    return F.concat_ws("|", location, topic_dir, ledger, variant)


def repair_checks(
    actions: DataFrame, expected: DataFrame, items: DataFrame, wall_clock_ms: int, min_age_s: int
) -> DataFrame:
    repairs = actions.where(F.col("action") == DELETE_ORPHAN.name).select(
        "location", "path", F.col("mtimeMs").alias("plannedMtime"), F.col("bytes").alias("plannedBytes")
    )
    listed = items.select(
        "location",
        "path",
        "kind",
        "mtimeMs",
        F.col("bytes").alias("listedBytes"),
        F.lit(True).alias("listed"),
    )
    live = expected.where(F.col("source") != "purged")
    by_path = live.select("location", "path").distinct().withColumn("namedByPath", F.lit(True))
    by_ledger = (
        live.where(F.col("location") == "local")  # tier rows already carry their attempt in the path
        .select(_ledger_key(F.col("location"), F.col("path")).alias("ledgerKey"))
        .distinct()
        .withColumn("namedByLedger", F.lit(True))
    )
    frame = (
        repairs.join(listed, ["location", "path"], "left")
        .join(by_path, ["location", "path"], "left")
        .withColumn("ledgerKey", _ledger_key(F.col("location"), F.col("path")))
        .join(by_ledger, "ledgerKey", "left")
    )
    counts = repairs.groupBy("location", "path").agg(F.count("*").alias("times"))
    frame = frame.join(counts, ["location", "path"], "left")

    def holds(condition, name: str):
        return F.coalesce(condition, F.lit(False)).alias(name)

    shape = F.when(F.col("location") == "tier", F.col("path").rlike(TIER_SHAPE)).otherwise(
        F.col("path").rlike(LOCAL_SHAPE) & ~F.col("path").contains("/../")
    )
    return frame.select(
        "location",
        "path",
        holds(F.col("listed"), "item_listed"),
        holds(
            (F.col("mtimeMs") == F.col("plannedMtime")) & (F.col("listedBytes") == F.col("plannedBytes")),
            "as_listed",
        ),
        holds(F.col("kind").isin("ledger_dir", "staging_dir", "tier_object") & shape, "repairable_shape"),
        holds(F.col("namedByPath").isNull(), "no_row_names_the_path"),
        holds(F.col("namedByLedger").isNull() | F.col("path").contains("/.tmp-"), "no_row_names_the_ledger"),
        holds(F.lit(wall_clock_ms) - F.col("mtimeMs") >= F.lit(min_age_s * 1000), "older_than_min_age"),
        holds(F.col("times") == 1, "once"),
    )


def action_checks(actions: DataFrame) -> DataFrame:
    return actions.select(
        "location",
        "path",
        (F.col("action") == DELETE_ORPHAN.name).alias("known_action"),
        F.col("topic").isNotNull().alias("names_a_topic"),
    )


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    expected, items, scrub = read_scrub_snapshot(spark, run.path)
    actions = read_actions(spark, run.path)
    repairs = repair_checks(actions, expected, items, int(scrub["wallClockMs"]), int(scrub["minAgeSeconds"]))
    return [
        CheckFrame(
            "repairs",
            repairs,
            must_be_true(
                "item_listed",
                "as_listed",
                "repairable_shape",
                "no_row_names_the_path",
                "no_row_names_the_ledger",
                "older_than_min_age",
                "once",
            ),
        ),
        CheckFrame("actions", action_checks(actions), must_be_true("known_action", "names_a_topic")),
    ]
