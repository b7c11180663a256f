"""Holds in the Spark apps (``housekeeping.store.holds``): every planner keeps a held topic whole, and the gate
re-derives on its own reading of the raw holds which planned actions a hold covers."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from housekeeping.engine.contract import table
from housekeeping.mechanisms.registry import held_forbidden_actions

HELD_KIND = "held"


def keep_held(
    decisions: DataFrame,
    held: DataFrame,
    *,
    decision: str,
    keep: str,
    topic: str = "topic",
    reset: dict[str, Column] | None = None,
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


def hold_checks(actions: DataFrame, holds: DataFrame, names: DataFrame) -> DataFrame:
    """One row per deleting or cursor-moving action: ``not_held`` is false when a hold covers its topic (the
    topic itself, its namespace or its partitioned topic, read from the name by ``topic_names``)."""
    forbidden = actions.where(F.col("action").isin(*held_forbidden_actions())).select("topic", "action")
    targets = F.array(F.col("topic"), F.col("namespace"), F.col("partitionedTopic"))
    covering = (
        forbidden.join(names.select("topic", "namespace", "partitionedTopic"), "topic", "left")
        .select("topic", F.explode(targets).alias("target"))
        .join(holds.select("target"), "target")
        .groupBy("topic")
        .agg(F.first("target").alias("heldByTarget"))
    )
    return forbidden.join(covering, "topic", "left").select(
        "topic", "action", "heldByTarget", F.col("heldByTarget").isNull().alias("not_held")
    )


# The frame of :func:`hold_check_rows`.
HOLD_CHECKS = table("holds", "topic string, action string, heldByTarget string, not_held boolean")


def hold_check_rows(actions: list[dict], holds: list[dict]) -> list[dict]:
    """:func:`hold_checks` over rows (a gate that checks topic by topic): the same rows, one per deleting or
    cursor-moving action, the first covering target being the topic's own hold, then its namespace's, then its
    partitioned topic's."""
    from spark_apps.shared.topic_names import name_facts

    forbidden, targets = set(held_forbidden_actions()), {h["target"] for h in holds}
    rows = []
    for action in actions:
        if action["action"] not in forbidden:
            continue
        facts = name_facts(action["topic"])
        covering = next(
            (t for t in (action["topic"], facts["namespace"], facts["partitionedTopic"]) if t in targets),
            None,
        )
        rows.append(
            {
                "topic": action["topic"],
                "action": action["action"],
                "heldByTarget": covering,
                "not_held": covering is None,
            }
        )
    return rows
