"""Quality-gate checks for message expiry, re-derived from the snapshot and, where timestamps decide, from the
entries themselves, apart from the planner: every cursor move passes the common cursor-move checks
(``shared/cursor_checks``); TTL is on; every newly acknowledged entry is expired (its ledger closed before the
cutoff, or its timestamp is before the cutoff: read from the entries unless the ledger's newest timestamp already
is); Pulsar's connected-consumer guard holds; the summary reconciles."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from housekeeping.engine.contract import RunDir, read_run_info
from housekeeping.engine.gate import CheckFrame, expect, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import read_summary
from spark_apps.shared.cursor_checks import (
    MOVE_COMMON_CHECKS,
    acknowledged_entries_expired,
    common_move_checks,
    entry_holding,
    move_frame,
    ordinal,
    stored_read_keys,
    summary_checks,
)
from spark_apps.shared.io import EntryReads, LedgerFiles, read_actions, read_entries, read_snapshot
from spark_apps.shared.session import materialize
from spark_apps.shared.topic_names import topic_name_facts


def expiry_move_checks(spark, info: dict, actions: DataFrame, snapshot: dict, reads: EntryReads) -> DataFrame:
    as_of = int(info["asOfMs"])
    broker = info["broker"]
    ledgers = snapshot["ledgers"]
    names = topic_name_facts(spark, [actions]).select("topic", "isSystemTopic")
    frame = move_frame(
        actions,
        snapshot["topics"].select("topic", "messageTtlSeconds").join(names, "topic", "left"),
        ledgers,
        snapshot["cursors"],
    ).withColumn("cutoffMs", F.lit(as_of) - F.col("messageTtlSeconds") * 1000)
    frame = materialize(frame)
    expired = acknowledged_entries_expired(spark, LedgerFiles.of(info), frame, ledgers, reads)
    # Guard: re-read the oldest unacknowledged entry of guarded subscriptions.
    backlog = ordinal(ledgers, frame, ["topic", "name"], "fromL", "fromE", "ackedBefore").join(
        ledgers.groupBy("topic").agg(F.sum("entries").alias("topicEntries")), "topic"
    )
    guarded = (
        frame.join(backlog, ["topic", "name"])
        .where(
            (F.col("consumers") > 0)
            & (
                F.col("topicEntries") - F.col("ackedBefore")
                < F.lit(int(broker["housekeepingExpiryGuardMinimumBacklog"]))
            )
        )
        .transform(materialize)
    )
    first = materialize(entry_holding(ledgers, guarded, ["topic", "name"], "ackedBefore"))
    keys = stored_read_keys(first)
    oldest = read_entries(spark, LedgerFiles.of(info), keys, reads).select(
        "topic", "ledgerId", "entryId", "publishTime"
    )
    factor = float(broker["housekeepingExpiryGuardAgeFactor"])
    guard = (
        guarded.select("topic", "name", "messageTtlSeconds")
        .join(first.select("topic", "name", "ledgerId", "entryId"), ["topic", "name"], "left")
        .join(oldest, ["topic", "ledgerId", "entryId"], "left")
        .select(
            "topic",
            "name",
            F.coalesce(
                F.lit(as_of)
                > F.col("publishTime")
                + F.floor(F.col("messageTtlSeconds") * F.lit(factor)).cast("long") * 1000,
                F.lit(False),
            ).alias("guardOk"),
        )
    )
    return (
        frame.join(expired, ["topic", "name"], "left")
        .join(guard, ["topic", "name"], "left")
        .select(
            "topic",
            "name",
            "from",
            "to",
            *common_move_checks(frame, allow_ledger_start=False),
            F.coalesce(F.col("messageTtlSeconds") > 0, F.lit(False)).alias("ttl_enabled"),
            F.coalesce(F.col("acknowledged_entries_expired"), F.lit(False)).alias(
                "acknowledged_entries_expired"
            ),
            F.coalesce(F.col("guardOk"), F.lit(True)).alias("consumer_guard_allows"),
        )
    )


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    info = read_run_info(run)
    snapshot = read_snapshot(spark, run)
    actions = materialize(read_actions(spark, run))
    moves = expiry_move_checks(spark, info, actions, snapshot, EntryReads())
    return [
        CheckFrame(
            "actions",
            actions.select("action"),
            [expect("ExpectColumnValuesToBeInSet", column="action", value_set=list(spec.action_names))],
        ),
        CheckFrame(
            "cursor_moves",
            moves,
            [
                expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "name"]),
                *must_be_true(
                    *MOVE_COMMON_CHECKS,
                    "ttl_enabled",
                    "acknowledged_entries_expired",
                    "consumer_guard_allows",
                ),
            ],
        ),
        CheckFrame(
            "summary",
            summary_checks(spark, moves, read_summary(run.path)),
            must_be_true("summary_reconciles"),
        ),
    ]
