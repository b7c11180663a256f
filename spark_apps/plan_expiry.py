"""Spark app: plan message expiry (TTL), Pulsar ``PersistentMessageExpiryMonitor`` with a safer entry search.

Reads a run's snapshot and, in one application for all in-scope topics, decides every durable subscription:

- ``plan/subscriptions`` one row per durable subscription: moved or kept, a typed ``kind``, a ``reason``,
  backlog before and after, entries and (estimated) bytes expired, oldest remaining entry timestamp
- ``plan/actions``       ``move_cursor`` rows (the contract's actions)
- ``plan/blockers``      per kept subscription with a backlog: why nothing (more) expired
- ``plan/summary.json``  totals, per namespace, and what was read from the entry store

The rule, per subscription (PULSAR_SEMANTICS.md section 2):

1. TTL = topic > namespace ``message_ttl_in_seconds`` > broker ``ttlDurationDefaultInSeconds``; 0 = off.
   System topics and the compaction subscription ``__compaction`` are never expired; readers are not
   subscriptions with a mark-delete that TTL acknowledges.
2. Nothing to do with no backlog. Pulsar's guard: with connected consumers and a backlog below
   ``housekeepingExpiryGuardMinimumBacklog`` (1000) entries, expire only when the oldest unacknowledged
   entry's publish time is older than ``housekeepingExpiryGuardAgeFactor`` (1.5) x TTL.
3. cutoff = asOf - TTL; expired = timestamp < cutoff (strict, as ``MessageImpl#isEntryExpired``).
4. Move the mark-delete to the end of the run of expired entries right after it (see ``cursor_rules``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

if __package__ in (None, ""):  # run by spark-submit as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from housekeeping.snapshot import read_run_info  # noqa: E402
from spark_apps.backlog_rules import COMPACTION_SUBSCRIPTION  # noqa: E402
from spark_apps.common import (  # noqa: E402
    EntryReads,
    get_spark,
    keep_held,
    materialize,
    read_entries,
    read_snapshot,
    run_scoped_cache,
    write_summary,
    write_table,
)
from spark_apps.cursor_rules import (  # noqa: E402
    entry_at_ordinal,
    expiry_read_keys,
    expiry_scan,
    expiry_stops,
    expiry_targets,
    ledger_layout,
    ordinal_positions,
    position_facts,
    position_text,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Plan message expiry (TTL) for one run's snapshot.")
    parser.add_argument(
        "--run-dir", required=True, help="run directory holding snapshot/; plan/ is written there"
    )
    return parser.parse_args(argv)


def durable_subscriptions(topics: DataFrame, cursors: DataFrame, layout: DataFrame) -> DataFrame:
    """Durable cursors with their topic's facts and backlog (``acked``, ``backlogEntries``, bytes)."""
    durable = cursors.where(F.col("durable")).select(
        "topic",
        "name",
        "consumers",
        F.col("markDeleteLedger").alias("posLedger"),
        F.col("markDeleteEntry").alias("posEntry"),
    )
    facts = position_facts(durable, layout, ["topic", "name"])
    return (
        durable.join(facts.drop("posLedger", "posEntry"), ["topic", "name"])
        .join(
            topics.select(
                "topic",
                "namespace",
                "isSystemTopic",
                "messageTtlSeconds",
                "messageTtlSource",
                "sizeQuotaLimitBytes",
                "sizeQuotaPolicy",
                "timeQuotaLimitSeconds",
                "timeQuotaPolicy",
            ),
            "topic",
        )
        .withColumn("markDelete", position_text(F.col("posLedger"), F.col("posEntry")))
    )


def entry_read_requests(*frames: DataFrame) -> list[tuple[str, int, int]]:
    keys: set[tuple[str, int, int]] = set()
    for frame in frames:
        keys.update((r["topic"], int(r["ledgerId"]), int(r["size"])) for r in frame.collect())
    return sorted(keys)


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


def expire(
    spark, store_root: str, subs: DataFrame, layout: DataFrame, reads: EntryReads, extra_keys: list
) -> tuple[DataFrame, DataFrame]:
    """The TTL search for subscriptions with a ``cutoffMs``; returns (targets, entries read). Reads only the
    stop ledgers (and ``extra_keys``) in one pass."""
    scan = expiry_scan(subs, layout)
    stops = materialize(expiry_stops(scan))
    keys = entry_read_requests(expiry_read_keys(subs, stops)) + list(extra_keys)
    entries = materialize(read_entries(spark, store_root, keys, reads))
    return expiry_targets(subs, stops, entries), entries


def expiry_moves(targets: DataFrame, layout: DataFrame) -> DataFrame:
    """Targets that move the cursor: the new mark-delete and the bytes of the newly acknowledged entries
    (Pulsar's estimated backlog before minus after)."""
    moving = targets.where(F.col("targetAcked") > F.col("acked"))
    positions = ordinal_positions(moving, layout, ["topic", "name"], "targetAcked")
    after = position_facts(
        positions.select(
            "topic", "name", F.col("toLedger").alias("posLedger"), F.col("toEntry").alias("posEntry")
        ),
        layout,
        ["topic", "name"],
    ).select(
        "topic",
        "name",
        F.col("estimatedBacklogBytes").alias("backlogBytesAfter"),
        F.col("oldestBacklogLedgerTsMs").alias("oldestLedgerTsAfter"),
    )
    return moving.join(positions, ["topic", "name"]).join(after, ["topic", "name"])


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
    targets, entries = expire(spark, info["store"], subs.where(F.col("eligible")), layout, reads, guard_keys)
    verdicts = guard_verdicts(guarded_at, entries, as_of_ms, age_factor)
    targets = targets.join(verdicts, ["topic", "name"], "left").withColumn(
        "guardBlocks", F.coalesce("guardBlocks", F.lit(False))
    )
    targets = targets.withColumn(
        "targetAcked", F.when(F.col("guardBlocks"), F.col("acked")).otherwise(F.col("targetAcked"))
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


def oldest_remaining_ledger_ts(moved: Column, after_col: str) -> Column:
    """For every subscription, read or not: the oldest entry timestamp of the ledgers still holding its backlog
    after the decision (per-ledger minimum, an "at most this old" bound for the oldest remaining entry)."""
    return (
        F.when(moved, F.col(after_col))
        .otherwise(F.col("oldestBacklogLedgerTsMs"))
        .alias("oldestRemainingLedgerTsMs")
    )


def cursor_actions(subscriptions: DataFrame) -> DataFrame:
    return subscriptions.where(F.col("decision") == "move").select(
        "topic",
        F.lit("move_cursor").alias("action"),
        F.lit(None).cast("long").alias("ledgerId"),
        "subscription",
        "from",
        "to",
        F.col("bytesExpired").alias("bytes"),
        "reason",
    )


def cursor_blockers(subscriptions: DataFrame) -> DataFrame:
    return subscriptions.where((F.col("decision") == "keep") & (F.col("backlogEntries") > 0)).select(
        "topic",
        "subscription",
        "kind",
        F.col("reason").alias("detail"),
        F.col("backlogBytesAfter").alias("bytes"),
        F.col("backlogEntries").alias("entries"),
    )


def cursor_summary(subscriptions: DataFrame, entries_col: str, bytes_col: str) -> dict:
    rows = (
        subscriptions.where(F.col("decision") == "move")
        .groupBy("namespace")
        .agg(
            F.count("*").alias("cursors"),
            F.sum(entries_col).alias("entries"),
            F.sum(bytes_col).alias("bytes"),
        )
        .collect()
    )
    per_namespace = {
        r["namespace"]: {"cursors": int(r["cursors"]), "entries": int(r["entries"]), "bytes": int(r["bytes"])}
        for r in rows
    }
    return {
        "cursorsToMove": sum(v["cursors"] for v in per_namespace.values()),
        "entriesToAcknowledge": sum(v["entries"] for v in per_namespace.values()),
        "bytesToAcknowledge": sum(v["bytes"] for v in per_namespace.values()),
        "perNamespace": per_namespace,
    }


def read_cost(reads: EntryReads, ledgers: DataFrame) -> dict:
    stored = (
        ledgers.where(F.col("entriesStored")).agg(F.sum("size").alias("b"), F.count("*").alias("n")).first()
    )
    store_bytes = int(stored["b"] or 0)
    return {
        "ledgersRead": reads.ledgers,
        "ledgersStored": int(stored["n"] or 0),
        "entryBytesRead": reads.entry_bytes,
        "fileBytesRead": reads.file_bytes,
        "storedEntryBytes": store_bytes,
        "readShare": (reads.entry_bytes / store_bytes) if store_bytes else 0.0,
    }


def held_expiry_reset() -> dict:
    """What a held topic's subscription keeps instead of the planned expiry (see common.keep_held)."""
    return {
        "to": F.lit(None).cast("string"),
        "entriesExpired": F.lit(0).cast("long"),
        "bytesExpired": F.lit(0).cast("long"),
        "backlogBytesAfter": F.col("backlogBytes"),
    }


def run(spark, run_dir: str | Path) -> dict:
    with run_scoped_cache(spark):
        info = read_run_info(Path(run_dir))
        snapshot = read_snapshot(spark, run_dir)
        reads = EntryReads()
        planned = plan_expiry(spark, snapshot, info, reads)
        subscriptions = materialize(
            keep_held(
                planned,
                snapshot["topics"],
                decision="decision",
                keep="keep",
                reset=held_expiry_reset(),
            )
        )
        plan_dir = Path(run_dir) / "plan"
        write_table(subscriptions, plan_dir / "subscriptions", ["topic", "subscription"])
        write_table(cursor_actions(subscriptions), plan_dir / "actions", ["topic", "action", "subscription"])
        write_table(cursor_blockers(subscriptions), plan_dir / "blockers", ["topic", "subscription"])
        summary = {
            "mechanism": "expiry",
            "runId": info["runId"],
            "asOfMs": info["asOfMs"],
            **cursor_summary(subscriptions, "entriesExpired", "bytesExpired"),
            "reads": read_cost(reads, snapshot["ledgers"]),
        }
        write_summary(plan_dir, summary)
        return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = get_spark("housekeeping-plan-expiry")
    print(json.dumps(run(spark, args.run_dir), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
