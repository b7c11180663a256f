"""Spark app: plan ledger offload (Pulsar ``ManagedLedgerImpl#maybeOffload``; docs/semantics.md §9).

Reads a run's snapshot and decides every ledger of every in-scope topic:

- ``plan/decisions``   one row per ledger: offload or keep, a typed ``kind`` and a human ``reason``
- ``plan/actions``     ``offload_ledger`` per selected ledger (``bytes``: its size), oldest first per topic
- ``plan/blockers``    per topic and kind, what is not offloaded although its policy would, and why
- ``plan/summary.json`` totals, and the offloader in force (none: the plan is empty and says why)

The rule, per topic with an offloader (a tier is configured and the namespace is not a system-service one,
Pulsar's NullLedgerOffloader) and either threshold >= 0:

1. walk the closed ledgers from the newest to the oldest (the current ledger never, its bytes not counted),
   summing their sizes, offloaded ones included (``sizeSummed``);
2. a ledger whose offload completed is skipped; any other (never tried, or an attempt that did not complete) is
   offloaded when ``bytes >= 0 and sizeSummed > bytes`` (strict) or ``seconds >= 0 and asOf - closedAt >=
   seconds * 1000`` (inclusive);
3. an empty ledger (no entries) is never offloaded (Pulsar's offloadPrefix skips them, testDontOffloadEmpty), nor
   one whose entries are not stored (a metadata-only store: nothing to upload).

Thresholds of 0 offload every closed ledger. Holds do not stop an offload: it copies, it deletes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from housekeeping.engine.contract import ACTIONS, BLOCKERS, RunDir, read_run_info
from housekeeping.mechanisms.offload.actions import OFFLOAD_LEDGER
from housekeeping.mechanisms.offload.tables import OFFLOAD_DECISIONS
from spark_apps.offload.units import threshold_ms
from spark_apps.shared.io import action_rows, read_snapshot, write_summary, write_table
from spark_apps.shared.plan_app import parse_plan_args, plan_main
from spark_apps.shared.session import materialize, run_scoped_cache

NO_OFFLOADER = "no object tier is configured (HOUSEKEEPING_OFFLOAD_URL): like Pulsar's NullLedgerOffloader, nothing is offloaded"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_plan_args("Plan ledger offload for one run's snapshot.", argv)


def offload_walk(topics: DataFrame, ledgers: DataFrame, as_of_ms: int) -> DataFrame:
    """Per ledger what the rule reads: current, the newest-first running size of the closed ledgers, the age, and
    whether each threshold is crossed. Pure."""
    policy = topics.select(
        "topic",
        "namespace",
        "offloader",
        "offloadThresholdBytes",
        "offloadThresholdSeconds",
        "offloadPolicyDescription",
    )
    closed = F.col("closedAtMs").isNotNull()
    newest_first = (
        Window.partitionBy("topic", "isClosed")
        .orderBy(F.col("ledgerId").desc())
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    current = Window.partitionBy("topic")
    return (
        ledgers.join(policy, "topic")
        .withColumn("isCurrent", F.col("ledgerId") == F.max("ledgerId").over(current))
        .withColumn("isClosed", closed & ~F.col("isCurrent"))
        .withColumn("sizeSummed", F.when(F.col("isClosed"), F.sum("size").over(newest_first)))
        .withColumn("ageMs", F.when(closed, F.lit(as_of_ms) - F.col("closedAtMs")))
        .withColumn(
            "overSize",
            F.coalesce(
                F.col("isClosed")
                & (F.col("offloadThresholdBytes") >= 0)
                & (F.col("sizeSummed") > F.col("offloadThresholdBytes")),
                F.lit(False),
            ),
        )
        .withColumn(
            "overTime",
            F.coalesce(
                F.col("isClosed")
                & (F.col("offloadThresholdSeconds") >= 0)
                & (F.col("ageMs") >= threshold_ms(F.col("offloadThresholdSeconds"))),
                F.lit(False),
            ),
        )
    )


def offload_kind() -> Column:
    """Why a ledger is offloaded or kept, typed, in precedence order."""
    return (
        F.when(~F.col("offloader"), F.lit("no_offloader"))
        .when(F.col("isCurrent") | ~F.col("isClosed"), F.lit("current_ledger"))
        .when(F.col("offloadComplete"), F.lit("already_offloaded"))
        .when(
            (F.col("offloadThresholdBytes") < 0) & (F.col("offloadThresholdSeconds") < 0),
            F.lit("offload_disabled"),
        )
        .when(~(F.col("overSize") | F.col("overTime")), F.lit("under_threshold"))
        .when(F.col("entries") == 0, F.lit("empty_ledger"))
        .when(~F.col("entriesStored"), F.lit("entries_not_stored"))
        .when(F.col("overSize"), F.lit("size_threshold"))
        .otherwise(F.lit("time_threshold"))
    )


def offload_reason() -> Column:
    """Why, for a person, by ``kind``."""
    size = F.format_string(
        "the newest closed ledgers down to this one hold %d bytes > offload threshold %d bytes",
        F.col("sizeSummed"),
        F.col("offloadThresholdBytes"),
    )
    time = F.format_string(
        "closed %d s ago >= offload threshold %d s",
        (F.col("ageMs") / 1000).cast("long"),
        F.col("offloadThresholdSeconds"),
    )
    retry = F.when(F.col("offloadAttempted"), F.lit(" (retries an attempt that did not complete)")).otherwise(
        F.lit("")
    )
    kind = F.col("kind")
    return (
        F.when(kind == "no_offloader", F.lit(NO_OFFLOADER))
        .when(kind == "current_ledger", F.lit("the current ledger is never offloaded"))
        .when(kind == "already_offloaded", F.lit("its offload completed earlier"))
        .when(
            kind == "offload_disabled",
            F.concat(F.lit("offload disabled: "), F.col("offloadPolicyDescription")),
        )
        .when(
            kind == "under_threshold",
            F.concat(F.lit("under the thresholds: "), F.col("offloadPolicyDescription")),
        )
        .when(kind == "empty_ledger", F.lit("an empty ledger is never offloaded"))
        .when(
            kind == "entries_not_stored",
            F.lit("its entries are not stored (metadata only): nothing to upload"),
        )
        .when(
            kind == "size_threshold",
            F.concat(
                size, F.when(F.col("overTime"), F.concat(F.lit("; "), time)).otherwise(F.lit("")), retry
            ),
        )
        .otherwise(F.concat(time, retry))
    )


def offload_decisions(snapshot: dict[str, DataFrame], info: dict) -> DataFrame:
    """Every ledger's decision (the contract's decisions table). Pure."""
    walked = offload_walk(snapshot["topics"], snapshot["ledgers"], int(info["asOfMs"]))
    decided = walked.withColumn("kind", offload_kind()).withColumn(
        "decision",
        F.when(F.col("kind").isin("size_threshold", "time_threshold"), F.lit("offload")).otherwise(
            F.lit("keep")
        ),
    )
    return decided.withColumn("reason", offload_reason()).select(*OFFLOAD_DECISIONS.names)


def offload_actions(decisions: DataFrame) -> DataFrame:
    chosen = decisions.where(F.col("decision") == "offload")
    return action_rows(
        chosen,
        OFFLOAD_LEDGER.name,
        topic=F.col("topic"),
        ledgerId=F.col("ledgerId"),
        bytes=F.col("size"),
        reason=F.col("reason"),
    )


# What keeps a ledger local although its topic's policy offloads: a blocker each (under_threshold and the
# current ledger are the policy working as meant, already_offloaded is done).
BLOCKER_KINDS = ("no_offloader", "empty_ledger", "entries_not_stored")


def offload_blockers(decisions: DataFrame) -> DataFrame:
    return (
        decisions.where(F.col("kind").isin(*BLOCKER_KINDS))
        .groupBy("topic", "kind")
        .agg(
            F.sum("size").alias("bytes"),
            F.count("*").alias("ledgers"),
            F.min(F.struct("ledgerId", "reason")).alias("first"),
        )
        .select("topic", "kind", F.col("first.reason").alias("detail"), "bytes", "ledgers")
    )


def plan_summary(decisions: DataFrame, info: dict) -> dict:
    rows = (
        decisions.where(F.col("decision") == "offload")
        .groupBy("namespace")
        .agg(F.count("*").alias("ledgers"), F.sum("size").alias("bytes"))
        .collect()
    )
    per_namespace = {r["namespace"]: {"ledgers": int(r["ledgers"]), "bytes": int(r["bytes"])} for r in rows}
    tier = info.get("offloadTier")
    return {
        "offloader": tier,
        **({} if tier else {"why": NO_OFFLOADER}),
        "ledgersToOffload": sum(v["ledgers"] for v in per_namespace.values()),
        "bytesToOffload": sum(v["bytes"] for v in per_namespace.values()),
        "perNamespace": per_namespace,
    }


def sweep_point(spark, snapshot: dict[str, DataFrame], info: dict) -> DataFrame:
    """A policy sweep's point (``spark_apps.sweep``): per namespace, the bytes and ledgers this plan offloads, and
    the local bytes left once the offload-deletion lag in force has passed for every offloaded ledger (those not
    offloaded after this plan, and all of them where the lag is -1 or no offloader applies; retention not
    counted), from the same decisions ``run`` writes."""
    decisions = offload_decisions(snapshot, info)
    local = snapshot["ledgers"].select("topic", "ledgerId", (~F.col("localDeleted")).alias("hasLocal"))
    lag = snapshot["topics"].select("topic", "offloader", "offloadDeletionLagMs")
    offloaded = F.col("offloadComplete") | (F.col("decision") == "offload")
    copy_goes = offloaded & F.col("offloader") & F.coalesce(F.col("offloadDeletionLagMs") >= 0, F.lit(False))
    chosen = F.col("decision") == "offload"
    return (
        decisions.join(local, ["topic", "ledgerId"], "left")
        .join(lag, "topic", "left")
        .groupBy("namespace")
        .agg(
            F.sum(F.when(chosen, F.col("size")).otherwise(0)).cast("long").alias("bytesOffloaded"),
            F.sum(chosen.cast("long")).alias("ledgersOffloaded"),
            F.sum(F.when(F.col("hasLocal") & ~copy_goes, F.col("size")).otherwise(0))
            .cast("long")
            .alias("localBytesLeft"),
        )
    )


def run(spark, run_dir: str | Path) -> dict:
    run = RunDir(run_dir)
    with run_scoped_cache(spark):
        info = read_run_info(run)
        decisions = offload_decisions(read_snapshot(spark, run), info).transform(materialize)
        write_table(decisions, run, OFFLOAD_DECISIONS, ["topic", "ledgerId"])
        write_table(offload_actions(decisions), run, ACTIONS, ["topic", "ledgerId"])
        write_table(offload_blockers(decisions), run, BLOCKERS, ["topic", "kind"])
        summary = {
            "mechanism": "offload",
            "runId": info["runId"],
            "asOfMs": info["asOfMs"],
            **plan_summary(decisions, info),
        }
        write_summary(run, summary)
        return summary


def main(argv: list[str] | None = None) -> int:
    return plan_main("offload", run, parse_args(argv))
