"""Spark app: plan message expiry (TTL), Pulsar ``PersistentMessageExpiryMonitor`` with a safer entry search.

Reads a run's snapshot and, in one application for all in-scope topics, decides every durable subscription:

- ``plan/subscriptions`` one row per durable subscription: moved or kept, a typed ``kind``, a ``reason``,
  backlog before and after, entries and (estimated) bytes expired, oldest remaining entry timestamp
- ``plan/actions``       ``move_cursor`` rows (the contract's actions)
- ``plan/blockers``      per kept subscription with a backlog: why nothing (more) expired
- ``plan/summary.json``  totals, per namespace, and what was read from the entry store

The rule, per subscription (docs/semantics.md §4):

1. TTL = topic > namespace ``message_ttl_in_seconds`` > broker ``ttlDurationDefaultInSeconds``; 0 = off.
   System topics and the compaction subscription ``__compaction`` are never expired; readers are not
   subscriptions with a mark-delete that TTL acknowledges.
2. Nothing to do with no backlog. Pulsar's guard: with connected consumers and a backlog below
   ``housekeepingExpiryGuardMinimumBacklog`` (1000) entries, expire only when the oldest unacknowledged
   entry's publish time is older than ``housekeepingExpiryGuardAgeFactor`` (1.5) x TTL.
3. cutoff = asOf - TTL; expired = timestamp < cutoff (strict, as ``MessageImpl#isEntryExpired``).
4. Move the mark-delete to the end of the run of expired entries right after it (see ``shared/cursors``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.contract import ACTIONS, BLOCKERS, RunDir, read_run_info
from housekeeping.mechanisms.expiry.tables import EXPIRY_SUBSCRIPTIONS
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from spark_apps.shared.cursors import (
    cursor_blockers,
    cursor_summary,
    durable_subscriptions,
    entry_at_ordinal,
    entry_read_requests,
    expire,
    expiry_moves,
    ledger_layout,
    oldest_remaining_ledger_ts,
    read_cost,
)
from spark_apps.shared.holds import keep_held
from spark_apps.shared.io import (
    EntryReads,
    LedgerFiles,
    action_rows,
    read_snapshot,
    write_summary,
    write_table,
)
from spark_apps.shared.plan_app import parse_plan_args, plan_main
from spark_apps.shared.positions import position_text
from spark_apps.shared.session import materialize, run_scoped_cache


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_plan_args("Plan message expiry (TTL) for one run's snapshot.", argv)


def guard_candidates(subs: DataFrame, min_backlog: int) -> DataFrame:
    return subs.where(
        F.col("eligible") & (F.col("consumers") > 0) & (F.col("backlogEntries") < F.lit(min_backlog))
    )


def guard_verdicts(
    candidates_at: DataFrame, entries: DataFrame, as_of_ms: int, age_factor: float
) -> DataFrame:
    """Pulsar ``PersistentTopic#isOldestMessageExpired``: ``now > publishTime + (long)(ttl * 1.5) s``, on the
    oldest unacknowledged entry (its publish time, as Pulsar). An entry that cannot be read -> not old."""
    oldest = candidates_at.join(
        entries.select(
            "topic", F.col("ledgerId").alias("atLedger"), F.col("entryId").alias("atEntry"), "publishTime"
        ),
        ["topic", "atLedger", "atEntry"],
        "left",
    )
    threshold_ms = F.floor(F.col("messageTtlSeconds") * F.lit(age_factor)).cast("long") * 1000
    old_enough = F.coalesce(F.lit(as_of_ms) > F.col("publishTime") + threshold_ms, F.lit(False))
    return oldest.select(
        "topic",
        "name",
        (~old_enough).alias("guardBlocks"),
        F.col("publishTime").alias("oldestPublishTime"),
    )


def plan_expiry(spark, snapshot: dict[str, DataFrame], info: dict, reads: EntryReads) -> DataFrame:
    """One row per durable subscription (see ``subscription_rows``)."""
    as_of_ms = int(info["asOfMs"])
    broker = info["broker"]
    layout = materialize(ledger_layout(snapshot["ledgers"]))
    subs = durable_subscriptions(snapshot["topics"], snapshot["cursors"], layout)
    subs = subs.withColumn("cutoffMs", F.lit(as_of_ms) - F.col("messageTtlSeconds") * 1000).withColumn(
        "eligible",
        (F.col("messageTtlSeconds") > 0)
        & ~F.col("isSystemTopic")
        & (F.col("name") != COMPACTION_SUBSCRIPTION)
        & (F.col("backlogEntries") > 0),
    )
    subs = materialize(subs)
    min_backlog = int(broker["housekeepingExpiryGuardMinimumBacklog"])
    age_factor = float(broker["housekeepingExpiryGuardAgeFactor"])
    guarded_at = entry_at_ordinal(
        guard_candidates(subs, min_backlog).select("topic", "name", "acked", "messageTtlSeconds"),
        layout,
        ["topic", "name"],
        "acked",
    ).join(subs.select("topic", "name", "messageTtlSeconds"), ["topic", "name"])
    guard_keys = entry_read_requests(
        guarded_at.where(F.col("atStored")).select(
            "topic", F.col("atLedger").alias("ledgerId"), F.col("atSize").alias("size")
        )
    )
    targets, entries = expire(
        spark, LedgerFiles.of(info), subs.where(F.col("eligible")), layout, reads, guard_keys
    )
    verdicts = guard_verdicts(guarded_at, entries, as_of_ms, age_factor)
    targets = targets.join(verdicts, ["topic", "name"], "left").withColumn(
        "guardBlocks", F.coalesce("guardBlocks", F.lit(False))
    )
    # Materialized: the moves and the subscription rows below both read the targets.
    targets = materialize(
        targets.withColumn(
            "targetAcked", F.when(F.col("guardBlocks"), F.col("acked")).otherwise(F.col("targetAcked"))
        )
    )
    moves = materialize(expiry_moves(targets, layout))
    decided = subs.join(
        targets.select(
            "topic",
            "name",
            "targetAcked",
            "stopKind",
            "stopDetail",
            "oldestRemainingTsMs",
            "guardBlocks",
            "oldestPublishTime",
        ),
        ["topic", "name"],
        "left",
    ).join(
        moves.select("topic", "name", "toLedger", "toEntry", "backlogBytesAfter", "oldestLedgerTsAfter"),
        ["topic", "name"],
        "left",
    )
    return subscription_rows(decided, as_of_ms, min_backlog, age_factor)


def subscription_rows(decided: DataFrame, as_of_ms: int, min_backlog: int, age_factor: float) -> DataFrame:
    moved = F.col("toLedger").isNotNull()
    ttl_text = F.format_string("TTL %d s (%s)", F.col("messageTtlSeconds"), F.col("messageTtlSource"))
    cutoff_text = F.date_format(F.timestamp_millis("cutoffMs"), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
    kind = (
        F.when(F.col("isSystemTopic"), F.lit("system_topic"))
        .when(F.col("name") == COMPACTION_SUBSCRIPTION, F.lit("compaction_subscription"))
        .when(F.col("messageTtlSeconds") <= 0, F.lit("ttl_disabled"))
        .when(F.col("backlogEntries") <= 0, F.lit("no_backlog"))
        .when(F.col("guardBlocks"), F.lit("guard_consumers_connected"))
        .when(moved, F.lit("expired"))
        .otherwise(F.lit("nothing_expired"))
    )
    reason = (
        F.when(kind == "system_topic", F.lit("system topic: message expiry never runs on it (SystemTopic)"))
        .when(kind == "compaction_subscription", F.lit("the compaction subscription is never expired"))
        .when(
            kind == "ttl_disabled", F.concat(F.lit("TTL is 0 (off) ("), F.col("messageTtlSource"), F.lit(")"))
        )
        .when(kind == "no_backlog", F.lit("no backlog: nothing after the mark-delete"))
        .when(
            kind == "guard_consumers_connected",
            F.format_string(
                "%d consumer(s) connected, backlog %d < %d entries and the oldest unacknowledged entry "
                "(publish time %s) is not older than %.1f x TTL",
                F.col("consumers"),
                F.col("backlogEntries"),
                F.lit(min_backlog),
                F.coalesce(F.col("oldestPublishTime").cast("string"), F.lit("unreadable")),
                F.lit(age_factor),
            ),
        )
        .when(
            kind == "expired",
            F.format_string(
                "%s, cutoff %s: %d entries after mark-delete %s are expired; stopped: %s",
                ttl_text,
                cutoff_text,
                F.col("targetAcked") - F.col("acked"),
                F.col("markDelete"),
                F.col("stopDetail"),
            ),
        )
        .otherwise(
            F.format_string(
                "%s, cutoff %s: nothing to expire: %s", ttl_text, cutoff_text, F.col("stopDetail")
            )
        )
    )
    return decided.select(
        "topic",
        "namespace",
        F.col("name").alias("subscription"),
        "consumers",
        F.col("markDelete").alias("from"),
        F.when(moved, position_text(F.col("toLedger"), F.col("toEntry"))).alias("to"),
        F.when(moved, F.lit("move")).otherwise(F.lit("keep")).alias("decision"),
        kind.alias("kind"),
        reason.alias("reason"),
        "messageTtlSeconds",
        "cutoffMs",
        "backlogEntries",
        F.col("estimatedBacklogBytes").alias("backlogBytes"),
        F.when(moved, F.col("targetAcked") - F.col("acked"))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("entriesExpired"),
        F.when(moved, F.col("estimatedBacklogBytes") - F.col("backlogBytesAfter"))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("bytesExpired"),
        F.when(moved, F.col("backlogBytesAfter"))
        .otherwise(F.col("estimatedBacklogBytes"))
        .alias("backlogBytesAfter"),
        F.when(F.col("backlogEntries") > 0, F.coalesce("oldestRemainingTsMs", F.lit(None))).alias(
            "oldestRemainingTsMs"
        ),
        oldest_remaining_ledger_ts(moved, "oldestLedgerTsAfter"),
        F.lit(as_of_ms).alias("asOfMs"),
    )


def cursor_actions(subscriptions: DataFrame) -> DataFrame:
    return action_rows(
        subscriptions.where(F.col("decision") == "move"),
        MOVE_CURSOR.name,
        topic=F.col("topic"),
        subscription=F.col("subscription"),
        **{"from": F.col("from"), "to": F.col("to")},
        bytes=F.col("bytesExpired"),
        reason=F.col("reason"),
    )


def held_expiry_reset() -> dict:
    """What a held topic's subscription keeps instead of the planned expiry (see common.keep_held)."""
    return {
        "to": F.lit(None).cast("string"),
        "entriesExpired": F.lit(0).cast("long"),
        "bytesExpired": F.lit(0).cast("long"),
        "backlogBytesAfter": F.col("backlogBytes"),
    }


def expiry_decisions(spark, snapshot: dict[str, DataFrame], info: dict, reads: EntryReads) -> DataFrame:
    """Every durable subscription's decision, a held topic's kept."""
    return keep_held(
        plan_expiry(spark, snapshot, info, reads),
        snapshot["topics"],
        decision="decision",
        keep="keep",
        reset=held_expiry_reset(),
    )


def sweep_point(spark, snapshot: dict[str, DataFrame], info: dict) -> DataFrame:
    """A TTL sweep's point (``spark_apps.sweep``): per namespace, the backlog bytes this plan expires (its
    cursors acknowledge them) and the backlog bytes it keeps, with the cursors moved and entries expired."""
    subscriptions = expiry_decisions(spark, snapshot, info, EntryReads())
    moved = F.col("decision") == "move"
    return subscriptions.groupBy("namespace").agg(
        F.sum("bytesExpired").cast("long").alias("bytesFreed"),
        F.sum("backlogBytesAfter").cast("long").alias("bytesKept"),
        F.sum(moved.cast("long")).alias("cursorsMoved"),
        F.sum("entriesExpired").cast("long").alias("entriesExpired"),
    )


def run(spark, run_dir: str | Path) -> dict:
    run = RunDir(run_dir)
    with run_scoped_cache(spark):
        info = read_run_info(run)
        snapshot = read_snapshot(spark, run)
        reads = EntryReads()
        subscriptions = materialize(expiry_decisions(spark, snapshot, info, reads))
        write_table(subscriptions, run, EXPIRY_SUBSCRIPTIONS, ["topic", "subscription"])
        write_table(cursor_actions(subscriptions), run, ACTIONS, ["topic", "action", "subscription"])
        write_table(cursor_blockers(subscriptions), run, BLOCKERS, ["topic", "subscription"])
        summary = {
            "mechanism": "expiry",
            "runId": info["runId"],
            "asOfMs": info["asOfMs"],
            **cursor_summary(subscriptions, "entriesExpired", "bytesExpired"),
            "reads": read_cost(reads, snapshot["ledgers"]),
        }
        write_summary(run, summary)
        return summary


def main(argv: list[str] | None = None) -> int:
    return plan_main("expiry", run, parse_args(argv))
