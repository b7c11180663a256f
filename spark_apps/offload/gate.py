"""Quality-gate checks for ledger offload, re-derived from the snapshot apart from the planner (no window: the
newest-first size of a ledger is the sum over a self-join of the topic's closed ledgers at or above it).

- offloads: the ledger exists in the snapshot with the planned size; it is closed and not the topic's current
  ledger; it has entries and they are stored; its offload did not complete; an offloader applies to its topic;
  the size or the time threshold selects it; (topic, ledgerId) is unique.
- selection: every ledger the rule selects is planned (nothing the policy asks for is left out silently).
- actions: only offload_ledger, on topics of the snapshot.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from housekeeping.engine.contract import RunDir, read_run_info
from housekeeping.engine.gate import CheckFrame, expect, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.mechanisms.offload.actions import OFFLOAD_LEDGER
from spark_apps.offload.units import threshold_ms
from spark_apps.shared.io import read_actions, read_snapshot
from spark_apps.shared.session import materialize


def selected_by_rule(topics: DataFrame, ledgers: DataFrame, as_of_ms: int) -> DataFrame:
    """Per closed ledger of the snapshot: its facts and whether Pulsar's rule offloads it (``selected``)."""
    current = ledgers.groupBy("topic").agg(F.max("ledgerId").alias("currentLedgerId"))
    closed = (
        ledgers.join(current, "topic")
        .where(F.col("closedAtMs").isNotNull() & (F.col("ledgerId") < F.col("currentLedgerId")))
        .select("topic", "ledgerId", "entries", "size", "closedAtMs", "entriesStored", "offloadComplete")
    )
    newer = closed.select("topic", F.col("ledgerId").alias("newerId"), F.col("size").alias("newerSize"))
    summed = (
        closed.join(newer, "topic")
        .where(F.col("newerId") >= F.col("ledgerId"))
        .groupBy("topic", "ledgerId")
        .agg(F.sum("newerSize").alias("bytesFromNewest"))
    )
    policy = topics.select("topic", "offloader", "offloadThresholdBytes", "offloadThresholdSeconds")
    frame = closed.join(summed, ["topic", "ledgerId"]).join(policy, "topic")
    by_size = (F.col("offloadThresholdBytes") >= 0) & (
        F.col("bytesFromNewest") > F.col("offloadThresholdBytes")
    )
    by_time = (F.col("offloadThresholdSeconds") >= 0) & (
        F.lit(as_of_ms) - F.col("closedAtMs") >= threshold_ms(F.col("offloadThresholdSeconds"))
    )
    return frame.withColumn("thresholdSelects", by_size | by_time).withColumn(
        "selected",
        F.col("offloader")
        & F.col("thresholdSelects")
        & ~F.col("offloadComplete")
        & (F.col("entries") > 0)
        & F.col("entriesStored"),
    )


def offload_checks(actions: DataFrame, topics: DataFrame, ledgers: DataFrame, as_of_ms: int) -> DataFrame:
    planned = actions.where(F.col("action") == OFFLOAD_LEDGER.name).select(
        "topic", "ledgerId", F.col("bytes").alias("plannedBytes")
    )
    facts = ledgers.select(
        "topic",
        "ledgerId",
        "size",
        "entries",
        "entriesStored",
        "offloadComplete",
        F.lit(True).alias("inSnapshot"),
    )
    rule = selected_by_rule(topics, ledgers, as_of_ms).select(
        "topic", "ledgerId", "offloader", "thresholdSelects", F.lit(True).alias("closedNotCurrent")
    )
    frame = planned.join(facts, ["topic", "ledgerId"], "left").join(rule, ["topic", "ledgerId"], "left")

    def holds(condition, name: str):
        return F.coalesce(condition, F.lit(False)).alias(name)

    return frame.select(
        "topic",
        "ledgerId",
        holds(F.col("inSnapshot"), "ledger_in_snapshot"),
        holds(F.col("plannedBytes") == F.col("size"), "bytes_match_snapshot"),
        holds(F.col("closedNotCurrent"), "closed_and_not_current"),
        holds(F.col("entries") > 0, "not_empty"),
        holds(F.col("entriesStored"), "entries_stored"),
        holds(~F.col("offloadComplete"), "not_offloaded_yet"),
        holds(F.col("offloader"), "offloader_applies"),
        holds(F.col("thresholdSelects"), "threshold_selects_it"),
    )


def selection_checks(actions: DataFrame, topics: DataFrame, ledgers: DataFrame, as_of_ms: int) -> DataFrame:
    """One row per ledger the rule selects: ``planned`` is false for one the plan leaves out."""
    planned = actions.where(F.col("action") == OFFLOAD_LEDGER.name).select(
        "topic", "ledgerId", F.lit(True).alias("inPlan")
    )
    return (
        selected_by_rule(topics, ledgers, as_of_ms)
        .where(F.col("selected"))
        .join(planned, ["topic", "ledgerId"], "left")
        .select("topic", "ledgerId", F.coalesce("inPlan", F.lit(False)).alias("planned"))
    )


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    as_of_ms = int(read_run_info(run)["asOfMs"])
    snapshot = read_snapshot(spark, run)
    actions = materialize(read_actions(spark, run))
    topics, ledgers = snapshot["topics"], snapshot["ledgers"]
    known = actions.select("topic", "action").join(
        topics.select("topic", F.lit(True).alias("known")), "topic", "left"
    )
    return [
        CheckFrame(
            "actions",
            known.select("topic", "action", F.coalesce("known", F.lit(False)).alias("topic_in_snapshot")),
            [
                expect("ExpectColumnValuesToBeInSet", column="action", value_set=list(spec.action_names)),
                *must_be_true("topic_in_snapshot"),
            ],
        ),
        CheckFrame(
            "offloads",
            offload_checks(actions, topics, ledgers, as_of_ms),
            [
                expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "ledgerId"]),
                *must_be_true(
                    "ledger_in_snapshot",
                    "bytes_match_snapshot",
                    "closed_and_not_current",
                    "not_empty",
                    "entries_stored",
                    "not_offloaded_yet",
                    "offloader_applies",
                    "threshold_selects_it",
                ),
            ],
        ),
        CheckFrame(
            "selection", selection_checks(actions, topics, ledgers, as_of_ms), must_be_true("planned")
        ),
    ]
