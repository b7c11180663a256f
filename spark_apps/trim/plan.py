"""Spark app: plan consumed-ledger trim (Pulsar ``ManagedLedgerImpl#internalTrimLedgers``).

Reads a run's snapshot, decides every ledger of every in-scope topic in one application, and writes:

- ``plan/decisions``  one row per ledger: delete or keep, a typed ``kind`` and a human ``reason``
- ``plan/actions``    the contract's actions: ``delete_ledger`` rows, plus ``move_cursor`` rows that
                      fast-forward lagging cursors (readers) past the deleted range, plus ``delete_local_copy``
                      rows of offloaded ledgers past the offload-deletion lag (``local_copies``)
- ``plan/blockers``   per topic and kind, the bytes kept and why (subscription, current ledger, retention)
- ``plan/summary.json`` totals the gate reconciles independently

The rule, per topic (docs/semantics.md §3):

1. bound (exclusive) = current ledger + 1 with no durable cursor; else the slowest durable mark-delete
   (L, e): L + 1 when L is a closed ledger and e is its last entry, else L. Readers never pin data.
2. walk ledgers below the bound oldest -> newest; stop at the current ledger (never deleted);
   delete while ``expired`` (time >= 0 and asOf - closedAt > time, strict) or ``overQuota``
   (size >= 0 and TOTAL - bytesDeletedSoFar >= size, TOTAL including backlog and current ledger);
   stop at the first ledger that is neither (a contiguous oldest prefix).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from housekeeping.engine.contract import ACTIONS, BLOCKERS, RunDir, read_run_info
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from housekeeping.mechanisms.trim.actions import DELETE_LEDGER
from housekeeping.mechanisms.trim.tables import TRIM_DECISIONS
from spark_apps.shared.holds import keep_held
from spark_apps.shared.io import action_rows, read_snapshot, write_summary, write_table
from spark_apps.shared.plan_app import parse_plan_args, plan_main
from spark_apps.shared.positions import position_text
from spark_apps.shared.session import materialize, run_scoped_cache
from spark_apps.trim.local_copies import local_copy_deletions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_plan_args("Plan consumed-ledger trim for one run's snapshot.", argv)


def durable_bounds(ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    """Per topic: current ledger, total size, slowest durable cursor and the exclusive trim bound."""
    per_topic = ledgers.groupBy("topic").agg(
        F.max("ledgerId").alias("currentLedgerId"),
        F.sum("size").alias("totalSize"),
    )
    slowest = (
        cursors.where(F.col("durable"))
        .groupBy("topic")
        .agg(F.min(F.struct("markDeleteLedger", "markDeleteEntry", "name", "lastActiveMs")).alias("s"))
        .select(
            "topic",
            F.col("s.name").alias("slowestCursor"),
            F.col("s.markDeleteLedger").alias("slowestMdLedger"),
            F.col("s.markDeleteEntry").alias("slowestMdEntry"),
            F.col("s.lastActiveMs").alias("slowestCursorLastActiveMs"),
        )
    )
    md_ledger = ledgers.select(
        "topic", F.col("ledgerId").alias("slowestMdLedger"), F.col("entries").alias("mdLedgerEntries")
    )
    frame = per_topic.join(slowest, "topic", "left").join(md_ledger, ["topic", "slowestMdLedger"], "left")
    on_last_entry_of_closed = (
        F.col("mdLedgerEntries").isNotNull()
        & (F.col("slowestMdLedger") != F.col("currentLedgerId"))
        & (F.col("mdLedgerEntries") == F.col("slowestMdEntry") + 1)
    )
    return frame.select(
        "topic",
        "currentLedgerId",
        "totalSize",
        "slowestCursor",
        "slowestMdLedger",
        "slowestMdEntry",
        "slowestCursorLastActiveMs",
        F.when(F.col("slowestCursor").isNull(), F.col("currentLedgerId") + 1)
        .when(on_last_entry_of_closed, F.col("slowestMdLedger") + 1)
        .otherwise(F.col("slowestMdLedger"))
        .alias("boundLedgerId"),
    )


def ledger_walk(topics: DataFrame, ledgers: DataFrame, cursors: DataFrame, as_of_ms: int) -> DataFrame:
    """Per ledger, what the rule reads (steps 1-2): the topic's bound and retention, whether the ledger is
    current, consumed, expired, over the size quota, eligible, and whether the oldest prefix reaches it
    (``delete``); ``firstKeptLedgerId``: the oldest consumed closed ledger that stays. Pure."""
    bounds = durable_bounds(ledgers, cursors)
    by_age = Window.partitionBy("topic").orderBy("ledgerId")
    walked = Window.partitionBy("topic").orderBy("ledgerId").rowsBetween(Window.unboundedPreceding, 0)
    retention = topics.select(
        "topic",
        "namespace",
        "retentionTimeMs",
        "retentionSizeBytes",
        "retentionSource",
        "retentionDescription",
    )
    frame = (
        ledgers.join(retention, "topic")
        .join(bounds, "topic")
        .withColumn("isCurrent", F.col("ledgerId") == F.col("currentLedgerId"))
        .withColumn("consumed", F.col("ledgerId") < F.col("boundLedgerId"))
        .withColumn("sizeWalked", F.sum("size").over(walked))
        .withColumn("remainingAfter", F.col("totalSize") - F.col("sizeWalked"))
        .withColumn("ageMs", F.lit(as_of_ms) - F.col("closedAtMs"))
        .withColumn(
            "expired",
            (F.col("retentionTimeMs") >= 0)
            & F.col("closedAtMs").isNotNull()
            & (F.col("ageMs") > F.col("retentionTimeMs")),
        )
        .withColumn(
            "overQuota",
            (F.col("retentionSizeBytes") >= 0) & (F.col("remainingAfter") >= F.col("retentionSizeBytes")),
        )
        .withColumn(
            "eligible", F.col("consumed") & ~F.col("isCurrent") & (F.col("expired") | F.col("overQuota"))
        )
        # Prefix semantics: a ledger goes only if it and every older ledger are eligible.
        .withColumn("delete", F.min(F.col("eligible").cast("int")).over(walked) == 1)
        .withColumn("rank", F.row_number().over(by_age))
    )
    # Over the topic's rows where they already are (an aggregate joined back computed every join and window
    # above a second time: half of a 100,000-topic plan's decisions).
    kept_consumed = F.col("consumed") & ~F.col("isCurrent") & ~F.col("eligible")
    return frame.withColumn(
        "firstKeptLedgerId", F.min(F.when(kept_consumed, F.col("ledgerId"))).over(Window.partitionBy("topic"))
    )


def _slowest_description(as_of_ms: int) -> Column:
    """The subscription that sets the bound, with how long it has been idle (what tells a stale subscription
    from a slow one)."""
    return F.when(
        F.col("slowestCursor").isNull(),
        F.lit("no durable subscription (readers never pin data)"),
    ).otherwise(
        F.concat(
            F.format_string(
                "slowest durable subscription '%s' at mark-delete %s",
                F.col("slowestCursor"),
                position_text(F.col("slowestMdLedger"), F.col("slowestMdEntry")),
            ),
            F.when(
                F.col("slowestCursorLastActiveMs").isNotNull(),
                F.format_string(
                    ", last active %s (%d h before as-of)",
                    F.date_format(
                        F.timestamp_millis("slowestCursorLastActiveMs"), "yyyy-MM-dd'T'HH:mm:ss'Z'"
                    ),
                    ((F.lit(as_of_ms) - F.col("slowestCursorLastActiveMs")) / 3_600_000).cast("long"),
                ),
            ).otherwise(F.lit("")),
        )
    )


def _time_part() -> Column:
    seconds = (F.col("ageMs") / 1000).cast("long"), (F.col("retentionTimeMs") / 1000).cast("long")
    return (
        F.when(F.col("retentionTimeMs") < 0, F.lit("retention time infinite"))
        .when(F.col("expired"), F.format_string("closed %d s before as-of > retention time %d s", *seconds))
        .otherwise(F.format_string("closed %d s before as-of, within retention time %d s", *seconds))
    )


def _size_part() -> Column:
    sizes = F.col("remainingAfter"), F.col("retentionSizeBytes")
    return (
        F.when(F.col("retentionSizeBytes") < 0, F.lit("retention size infinite"))
        .when(F.col("overQuota"), F.format_string("%d bytes would remain >= retention size %d bytes", *sizes))
        .otherwise(F.format_string("only %d bytes would remain < retention size %d bytes", *sizes))
    )


def _retention_infinite() -> Column:
    return (F.col("retentionTimeMs") < 0) & (F.col("retentionSizeBytes") < 0)


def decision_kind() -> Column:
    """Why a ledger goes or stays, typed (the report groups by it)."""
    return (
        F.when(F.col("delete"), F.lit("consumed_and_expired"))
        .when(F.col("isCurrent"), F.lit("current_ledger"))
        .when(~F.col("consumed"), F.lit("slowest_subscription"))
        .when(F.col("ledgerId") > F.col("firstKeptLedgerId"), F.lit("prefix_blocked"))
        .when(_retention_infinite(), F.lit("retention_infinite"))
        .otherwise(F.lit("retention_window"))
    )


def decision_reason(as_of_ms: int) -> Column:
    """Why a ledger goes or stays, for a person (the same cases as :func:`decision_kind`)."""
    slowest = _slowest_description(as_of_ms)
    time_part, size_part = _time_part(), _size_part()
    return (
        F.when(
            F.col("delete"),
            F.concat_ws(
                "; ",
                F.format_string(
                    "consumed: below the trim bound ledger %d (%s)", F.col("boundLedgerId"), slowest
                ),
                F.when(F.col("expired"), time_part),
                F.when(F.col("overQuota"), size_part),
            ),
        )
        .when(F.col("isCurrent"), F.lit("current (open) ledger: the ledger being written is never deleted"))
        .when(
            ~F.col("consumed"),
            F.format_string(
                "unconsumed: at or after the trim bound ledger %d set by %s", F.col("boundLedgerId"), slowest
            ),
        )
        .when(
            F.col("ledgerId") > F.col("firstKeptLedgerId"),
            F.format_string(
                "older ledger %d is kept and trim removes only a contiguous oldest prefix",
                F.col("firstKeptLedgerId"),
            ),
        )
        .when(
            _retention_infinite(),
            F.concat(F.lit("retention is infinite ("), F.col("retentionSource"), F.lit(")")),
        )
        .otherwise(
            F.concat_ws(
                "; ",
                F.format_string(
                    "within retention (%s: %s)", F.col("retentionSource"), F.col("retentionDescription")
                ),
                time_part,
                size_part,
            )
        )
    )


def plan_ledger_decisions(
    topics: DataFrame, ledgers: DataFrame, cursors: DataFrame, as_of_ms: int
) -> DataFrame:
    """One row per ledger: ``decision`` delete|keep, ``kind`` and ``reason``. Pure: no I/O, no clock."""
    return ledger_walk(topics, ledgers, cursors, as_of_ms).select(
        "topic",
        "namespace",
        "ledgerId",
        "rank",
        "entries",
        "size",
        "closedAtMs",
        F.when(F.col("delete"), F.lit("delete")).otherwise(F.lit("keep")).alias("decision"),
        decision_kind().alias("kind"),
        decision_reason(as_of_ms).alias("reason"),
        "isCurrent",
        "consumed",
        "expired",
        "overQuota",
        "remainingAfter",
        "boundLedgerId",
        "slowestCursor",
        position_text(F.col("slowestMdLedger"), F.col("slowestMdEntry")).alias("slowestMarkDelete"),
        "slowestCursorLastActiveMs",
    )


def ledger_deletions(decisions: DataFrame) -> DataFrame:
    """The contract's ``delete_ledger`` actions."""
    return action_rows(
        decisions.where(F.col("decision") == "delete"),
        DELETE_LEDGER.name,
        topic=F.col("topic"),
        ledgerId=F.col("ledgerId"),
        bytes=F.col("size"),
        reason=F.col("reason"),
    )


def cursor_fast_forwards(decisions: DataFrame, cursors: DataFrame) -> DataFrame:
    """Pulsar ``advanceCursorsIfNecessary``: a cursor whose mark-delete is below the last entry of the
    deleted range is mark-deleted there. Durable cursors are never below it (the bound guarantees that),
    so in practice this moves readers."""
    last_deleted = (
        decisions.where(F.col("decision") == "delete")
        .groupBy("topic")
        .agg(F.max(F.struct("ledgerId", "entries")).alias("last"))
        .select(
            "topic", F.col("last.ledgerId").alias("toLedger"), (F.col("last.entries") - 1).alias("toEntry")
        )
    )
    behind = (F.col("markDeleteLedger") < F.col("toLedger")) | (
        (F.col("markDeleteLedger") == F.col("toLedger")) & (F.col("markDeleteEntry") < F.col("toEntry"))
    )
    return action_rows(
        cursors.join(last_deleted, "topic").where(behind),
        MOVE_CURSOR.name,
        topic=F.col("topic"),
        subscription=F.col("name"),
        **{
            "from": position_text(F.col("markDeleteLedger"), F.col("markDeleteEntry")),
            "to": position_text(F.col("toLedger"), F.col("toEntry")),
        },
        reason=F.format_string(
            "fast-forward %s cursor past the deleted ledgers (Pulsar advanceCursorsIfNecessary)",
            F.when(F.col("durable"), F.lit("durable")).otherwise(F.lit("non-durable (reader)")),
        ),
    )


def trim_blockers(decisions: DataFrame) -> DataFrame:
    """Per topic and kind: bytes kept and the first ledger's reason (the answer to 'why is this kept?')."""
    kept = decisions.where(F.col("decision") == "keep")
    retention_kind = kept.where(F.col("kind").isin("retention_window", "retention_infinite")).select(
        "topic", F.col("kind").alias("retentionKind")
    )
    kept = kept.join(retention_kind, "topic", "left").withColumn(
        "blockerKind",
        F.when(F.col("kind") == "prefix_blocked", F.col("retentionKind")).otherwise(F.col("kind")),
    )
    return (
        kept.groupBy("topic", "blockerKind")
        .agg(
            F.sum("size").alias("bytes"),
            F.count("*").alias("ledgers"),
            F.min(F.struct("ledgerId", "reason")).alias("first"),
        )
        .select(
            "topic",
            F.col("blockerKind").alias("kind"),
            F.col("first.reason").alias("detail"),
            "bytes",
            "ledgers",
        )
    )


def plan_summary(decisions: DataFrame) -> dict:
    rows = (
        decisions.where(F.col("decision") == "delete")
        .groupBy("namespace")
        .agg(F.count("*").alias("ledgers"), F.sum("size").alias("bytes"))
        .collect()
    )
    per_namespace = {r["namespace"]: {"ledgers": int(r["ledgers"]), "bytes": int(r["bytes"])} for r in rows}
    return {
        "ledgersToDelete": sum(v["ledgers"] for v in per_namespace.values()),
        "bytesToDelete": sum(v["bytes"] for v in per_namespace.values()),
        "perNamespace": per_namespace,
    }


def local_copy_summary(local_copies: DataFrame) -> dict:
    """Local copies the offload-deletion lag deletes, apart from the ledgers retention deletes (their data stays in
    the tier)."""
    row = local_copies.agg(F.count("*").alias("n"), F.sum("bytes").alias("bytes")).first()
    return {"localCopiesToDelete": int(row["n"]), "localBytesToDelete": int(row["bytes"] or 0)}


def trim_decisions(snapshot: dict[str, DataFrame], info: dict) -> DataFrame:
    """Every ledger's decision, a held topic's kept."""
    return plan_ledger_decisions(
        snapshot["topics"], snapshot["ledgers"], snapshot["cursors"], int(info["asOfMs"])
    ).transform(lambda d: keep_held(d, snapshot["topics"], decision="decision", keep="keep"))


def sweep_point(spark, snapshot: dict[str, DataFrame], info: dict) -> DataFrame:
    """A policy sweep's point (``spark_apps.sweep``): per namespace, the bytes and ledgers this plan frees and
    the bytes it keeps, and on the local disk the bytes it frees (deleted ledgers and the local copies the
    offload-deletion lag lets go) and leaves, from the same decisions ``run`` writes (holds included)."""
    decisions = trim_decisions(snapshot, info)
    local_copies = local_copy_deletions(
        snapshot["topics"], snapshot["ledgers"], decisions, int(info["asOfMs"])
    ).select("topic", "ledgerId", F.lit(True).alias("localCopyDeleted"))
    local = snapshot["ledgers"].select("topic", "ledgerId", (~F.col("localDeleted")).alias("hasLocal"))
    deleted = F.col("decision") == "delete"
    local_freed = F.col("hasLocal") & (deleted | F.coalesce("localCopyDeleted", F.lit(False)))
    return (
        decisions.join(local, ["topic", "ledgerId"], "left")
        .join(local_copies, ["topic", "ledgerId"], "left")
        .groupBy("namespace")
        .agg(
            F.sum(F.when(deleted, F.col("size")).otherwise(0)).cast("long").alias("bytesFreed"),
            F.sum(F.when(deleted, 0).otherwise(F.col("size"))).cast("long").alias("bytesKept"),
            F.sum(deleted.cast("long")).alias("ledgersDeleted"),
            F.sum(F.when(local_freed, F.col("size")).otherwise(0)).cast("long").alias("localBytesFreed"),
            F.sum(F.when(F.col("hasLocal") & ~local_freed, F.col("size")).otherwise(0))
            .cast("long")
            .alias("localBytesLeft"),
        )
    )


def run(spark, run_dir: str | Path) -> dict:
    run = RunDir(run_dir)
    with run_scoped_cache(spark):
        info = read_run_info(run)
        snapshot = read_snapshot(spark, run)
        decisions = trim_decisions(snapshot, info).transform(materialize)
        write_table(decisions, run, TRIM_DECISIONS, ["topic", "ledgerId"])
        local_copies = local_copy_deletions(
            snapshot["topics"], snapshot["ledgers"], decisions, int(info["asOfMs"])
        ).transform(materialize)
        actions = (
            ledger_deletions(decisions)
            .unionByName(cursor_fast_forwards(decisions, snapshot["cursors"]))
            .unionByName(local_copies)
        )
        write_table(actions, run, ACTIONS, ["topic", "action", "ledgerId", "subscription"])
        write_table(trim_blockers(decisions), run, BLOCKERS, ["topic", "kind"])
        summary = {
            "mechanism": "trim",
            "runId": info["runId"],
            "asOfMs": info["asOfMs"],
            **plan_summary(decisions),
            **local_copy_summary(local_copies),
        }
        write_summary(run, summary)
        return summary


def main(argv: list[str] | None = None) -> int:
    return plan_main("trim", run, parse_args(argv))
