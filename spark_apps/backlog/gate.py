"""Quality-gate checks for backlog-quota enforcement, re-derived from the snapshot apart from the planner: every
cursor move passes the common cursor-move checks (``shared/cursor_checks``); the quota acted on is exceeded in the
snapshot and its policy is consumer_backlog_eviction; size steps replay Pulsar's loop (the cursor was the slowest,
the skip count is exactly (int)((B - 0.9 L) / B x entriesInBacklog), B > 0.9 L, never the same cursor twice in a
row); time steps skip exactly one whole ledger closed longer ago than the limit (or no longer listed); precise time
moves only acknowledge entries older than 0.9 x limit; each move ends where its last step ends. Quota-state flags
agree with the re-derived exceeded flag (system topics exempt, read from the name)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from housekeeping.core.names import COMPACTION_SUBSCRIPTION as COMPACTION
from housekeeping.engine.contract import RunDir, read_run_info
from housekeeping.engine.gate import CheckFrame, expect, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import read_summary
from housekeeping.mechanisms.backlog.actions import FLAG_BACKLOG_QUOTA
from housekeeping.mechanisms.backlog.tables import EVICTION_STEPS
from spark_apps.shared.cursor_checks import (
    MOVE_COMMON_CHECKS,
    acknowledged_entries_expired,
    common_move_checks,
    entry_holding,
    estimated_backlog,
    move_frame,
    ordinal,
    stored_read_keys,
    summary_checks,
)
from spark_apps.shared.io import (
    EntryReads,
    LedgerFiles,
    read_actions,
    read_entries,
    read_snapshot,
    read_table,
)
from spark_apps.shared.positions import position_key
from spark_apps.shared.session import materialize
from spark_apps.shared.topic_names import topic_name_facts


def slowest_positions(ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    return (
        cursors.where(F.col("durable"))
        .groupBy("topic")
        .agg(F.min(F.struct("markDeleteLedger", "markDeleteEntry")).alias("s"))
        .select("topic", F.col("s.markDeleteLedger").alias("sL"), F.col("s.markDeleteEntry").alias("sE"))
    )


def rederived_quota_state(spark, info: dict, snapshot: dict, reads: EntryReads) -> DataFrame:
    """Per topic: sizeExceeded and timeExceeded as Pulsar measures them on the slowest durable cursor."""
    as_of = int(info["asOfMs"])
    ledgers, topics = snapshot["ledgers"], snapshot["topics"]
    slow = slowest_positions(ledgers, snapshot["cursors"])
    est = estimated_backlog(ledgers, slow, ["topic"], "sL", "sE", "backlogBytes")
    acked = ordinal(ledgers, slow, ["topic"], "sL", "sE", "acked")
    holding = materialize(entry_holding(ledgers, acked, ["topic"], "acked"))
    if info["broker"]["preciseTimeBasedBacklogQuotaCheck"]:
        keys = stored_read_keys(holding)
        ts = holding.join(
            read_entries(spark, LedgerFiles.of(info), keys, reads).select(
                "topic", "ledgerId", "entryId", "entryTs"
            ),
            ["topic", "ledgerId", "entryId"],
            "left",
        ).select("topic", F.col("entryTs").alias("ageTs"))
    else:
        ts = holding.select("topic", F.col("closedAtMs").alias("ageTs"))
    enabled = bool(info["broker"]["backlogQuotaCheckEnabled"])
    names = topic_name_facts(spark, [topics]).select("topic", "isSystemTopic")
    return (
        topics.select(
            "topic",
            "sizeQuotaLimitBytes",
            "sizeQuotaPolicy",
            "timeQuotaLimitSeconds",
            "timeQuotaPolicy",
        )
        .join(names, "topic", "left")
        .join(est, "topic", "left")
        .join(ts, "topic", "left")
        .join(slow, "topic", "left")
        .select(
            "*",
            (
                F.lit(enabled)
                & F.coalesce(~F.col("isSystemTopic"), F.lit(False))
                & F.col("sL").isNotNull()
                & (F.col("sizeQuotaLimitBytes") >= 0)
                & (F.coalesce(F.col("backlogBytes"), F.lit(0)) >= F.col("sizeQuotaLimitBytes"))
            ).alias("sizeExceeded"),
            F.coalesce(
                F.lit(enabled)
                & ~F.col("isSystemTopic")
                & (F.col("timeQuotaLimitSeconds") > 0)
                & (F.lit(as_of) > F.col("ageTs") + F.col("timeQuotaLimitSeconds") * 1000),
                F.lit(False),
            ).alias("timeExceeded"),
        )
    )


def backlog_move_checks(
    spark, info: dict, actions: DataFrame, steps: DataFrame, snapshot: dict, reads: EntryReads
) -> tuple[DataFrame, DataFrame, DataFrame]:
    as_of = int(info["asOfMs"])
    precise = bool(info["broker"]["preciseTimeBasedBacklogQuotaCheck"])
    ledgers, cursors = snapshot["ledgers"], snapshot["cursors"]
    quota = materialize(rederived_quota_state(spark, info, snapshot, reads))
    frame = move_frame(
        actions,
        quota.select(
            "topic",
            "isSystemTopic",
            "sizeQuotaLimitBytes",
            "sizeQuotaPolicy",
            "timeQuotaLimitSeconds",
            "timeQuotaPolicy",
            "sizeExceeded",
            "timeExceeded",
        ),
        ledgers,
        cursors,
    ).transform(materialize)
    acted_on = (
        F.when(
            F.col("quotaType") == "destination_storage",
            F.col("sizeExceeded") & (F.col("sizeQuotaPolicy") == "consumer_backlog_eviction"),
        )
        .when(
            F.col("quotaType") == "message_age",
            ~F.col("sizeExceeded")
            & F.col("timeExceeded")
            & (F.col("timeQuotaPolicy") == "consumer_backlog_eviction"),
        )
        .otherwise(F.lit(False))
    )
    last_step = steps.groupBy("topic", F.col("cursor").alias("name")).agg(
        F.max(F.struct("step", "toLedger", "toEntry")).alias("ls"),
        F.min(F.struct("step", "fromLedger", "fromEntry")).alias("fs"),
    )
    if precise:
        precise_moves = frame.where(F.col("quotaType") == "message_age").withColumn(
            "cutoffMs", F.lit(as_of) - (F.col("timeQuotaLimitSeconds") * F.lit(0.9)).cast("long") * 1000
        )
        expired = acknowledged_entries_expired(spark, LedgerFiles.of(info), precise_moves, ledgers, reads)
    else:
        expired = frame.limit(0).select("topic", "name", F.lit(True).alias("acknowledged_entries_expired"))
    replayed = frame.join(last_step, ["topic", "name"], "left").join(expired, ["topic", "name"], "left")
    by_steps = (
        F.col("ls").isNotNull()
        & (F.col("ls.toLedger") == F.col("toL"))
        & (F.col("ls.toEntry") == F.col("toE"))
        & (F.col("fs.fromLedger") == F.col("fromL"))
        & (F.col("fs.fromEntry") == F.col("fromE"))
    )
    justified = F.when(
        (F.col("quotaType") == "message_age") & F.lit(precise), F.col("acknowledged_entries_expired")
    ).otherwise(by_steps)
    moves = replayed.select(
        "topic",
        "name",
        "from",
        "to",
        "quotaType",
        *common_move_checks(frame, allow_ledger_start=True),
        F.coalesce(acted_on, F.lit(False)).alias("quota_exceeded_with_eviction_policy"),
        F.coalesce(justified, F.lit(False)).alias("move_is_justified"),
    )
    step_checks = eviction_step_checks(steps, quota, ledgers, cursors, as_of)
    return moves, step_checks, quota


def cursors_before_each_step(steps: DataFrame, cursors: DataFrame) -> DataFrame:
    """Where every durable cursor is just before step i: its latest earlier step's target, else the snapshot."""
    durable = cursors.where(F.col("durable")).select(
        "topic", F.col("name").alias("c"), "markDeleteLedger", "markDeleteEntry"
    )
    earlier = steps.select(
        F.col("topic").alias("jTopic"),
        F.col("step").alias("j"),
        F.col("cursor").alias("jCursor"),
        F.col("toLedger").alias("jL"),
        F.col("toEntry").alias("jE"),
    )
    return (
        steps.select("topic", "step")
        .join(durable, "topic")
        .join(
            earlier,
            (F.col("jTopic") == F.col("topic"))
            & (F.col("jCursor") == F.col("c"))
            & (F.col("j") < F.col("step")),
            "left",
        )
        .groupBy("topic", "step", "c", "markDeleteLedger", "markDeleteEntry")
        .agg(F.max(F.when(F.col("j").isNotNull(), F.struct("j", "jL", "jE"))).alias("latest"))
        .select(
            "topic",
            "step",
            "c",
            F.coalesce(F.col("latest.jL"), F.col("markDeleteLedger")).alias("pL"),
            F.coalesce(F.col("latest.jE"), F.col("markDeleteEntry")).alias("pE"),
        )
    )


def step_facts(steps: DataFrame, quota: DataFrame, ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    """Per step, what the gate re-derives on its own: the moved cursor's and the slowest cursor's position
    before it, the cursor of the step before, the estimated backlog and ordinals at both ends, the topic's
    entries, the start ledger's close time, the next ledger, whether the start ledger is listed, the quotas."""
    before = cursors_before_each_step(steps, cursors)
    keys = ["topic", "step"]
    from_facts = (
        estimated_backlog(ledgers, steps, keys, "fromLedger", "fromEntry", "B")
        .join(ordinal(ledgers, steps, keys, "fromLedger", "fromEntry", "ackedFrom"), keys)
        .join(ordinal(ledgers, steps, keys, "toLedger", "toEntry", "ackedTo"), keys)
    )
    next_ledger = (
        steps.select("topic", "step", "fromLedger")
        .join(ledgers.select("topic", F.col("ledgerId").alias("n")), "topic")
        .where(F.col("n") > F.col("fromLedger"))
        .groupBy("topic", "step")
        .agg(F.min("n").alias("nextLedger"))
    )
    return (
        steps.join(
            before.select(
                "topic",
                "step",
                F.col("c").alias("cursor"),
                F.col("pL").alias("ownL"),
                F.col("pE").alias("ownE"),
            ),
            ["topic", "step", "cursor"],
            "left",
        )
        .join(before.groupBy("topic", "step").agg(F.min(F.struct("pL", "pE")).alias("minP")), keys, "left")
        .join(
            steps.select("topic", (F.col("step") + 1).alias("step"), F.col("cursor").alias("prevCursor")),
            keys,
            "left",
        )
        .join(from_facts, keys, "left")
        .join(ledgers.groupBy("topic").agg(F.sum("entries").alias("topicEntries")), "topic", "left")
        .join(
            ledgers.select(
                "topic", F.col("ledgerId").alias("fromLedger"), F.col("closedAtMs").alias("fromClosedAtMs")
            ),
            ["topic", "fromLedger"],
            "left",
        )
        .join(next_ledger, keys, "left")
        .join(quota.select("topic", "sizeQuotaLimitBytes", "timeQuotaLimitSeconds"), "topic", "left")
        # A listed but open mark-delete ledger is never skipped; an unlisted one (trimmed) always is.
        .join(
            ledgers.select("topic", F.col("ledgerId").alias("fromLedger"), F.lit(True).alias("listed")),
            ["topic", "fromLedger"],
            "left",
        )
    )


def _size_step_ok() -> Column:
    """A size step skips what brings the backlog to 90 % of the limit, from a backlog over it (first step: at
    or over the limit itself)."""
    target = F.col("sizeQuotaLimitBytes") * F.lit(0.9)
    n_backlog = F.col("topicEntries") - F.col("ackedFrom")
    expected_skip = ((F.col("B") - target) / F.col("B") * n_backlog).cast("long")
    return (
        (F.col("B") > target)
        & (expected_skip > 0)
        & (F.col("ackedTo") - F.col("ackedFrom") == expected_skip)
        & ((F.col("step") > 1) | (F.col("B") >= F.col("sizeQuotaLimitBytes")))
    )


def _time_step_ok(as_of: int) -> Column:
    """A time step moves to the start of the next ledger, past a ledger closed longer ago than the limit."""
    return (
        (F.col("toEntry") == -1)
        & (F.col("toLedger") == F.col("nextLedger"))
        & (
            F.col("listed").isNull()
            | (
                F.col("fromClosedAtMs").isNotNull()
                & (F.lit(as_of) - F.col("fromClosedAtMs") > F.col("timeQuotaLimitSeconds") * 1000)
            )
        )
    )


def eviction_step_checks(
    steps: DataFrame, quota: DataFrame, ledgers: DataFrame, cursors: DataFrame, as_of: int
) -> DataFrame:
    frame = step_facts(steps, quota, ledgers, cursors)
    is_size = F.col("quotaType") == "destination_storage"
    return frame.select(
        "topic",
        "step",
        "cursor",
        (F.col("cursor") != COMPACTION).alias("not_compaction_subscription"),
        F.coalesce(
            (F.col("ownL") == F.col("fromLedger")) & (F.col("ownE") == F.col("fromEntry")), F.lit(False)
        ).alias("step_starts_where_cursor_is"),
        F.coalesce(
            F.when(
                is_size,
                position_key(F.col("fromLedger"), F.col("fromEntry"))
                <= position_key(F.col("minP.pL"), F.col("minP.pE")),
            ).otherwise(True),
            F.lit(False),
        ).alias("size_step_moves_the_slowest_cursor"),
        F.coalesce(
            F.when(
                is_size, F.col("prevCursor").isNull() | (F.col("prevCursor") != F.col("cursor"))
            ).otherwise(True),
            F.lit(False),
        ).alias("not_same_cursor_twice_in_a_row"),
        F.coalesce(F.when(is_size, _size_step_ok()).otherwise(_time_step_ok(as_of)), F.lit(False)).alias(
            "step_follows_the_quota_rule"
        ),
    )


def quota_flag_checks(actions: DataFrame, quota: DataFrame) -> DataFrame:
    flags = actions.where(F.col("action") == FLAG_BACKLOG_QUOTA.name).select(
        "topic", "quotaType", "policy", F.col("exceeded").alias("flagExceeded")
    )
    frame = flags.join(quota, "topic", "left")
    rederived = F.when(F.col("quotaType") == "destination_storage", F.col("sizeExceeded")).otherwise(
        F.col("timeExceeded")
    )
    producer_policy = F.col("policy").isin("producer_request_hold", "producer_exception")
    return frame.select(
        "topic",
        "quotaType",
        F.col("sizeExceeded").isNotNull().alias("topic_in_snapshot"),
        F.coalesce(~F.col("flagExceeded") | producer_policy, F.lit(False)).alias(
            "exceeded_flag_only_for_producer_policies"
        ),
        F.coalesce(F.col("flagExceeded") == rederived, F.lit(False)).alias(
            "flag_matches_rederived_quota_state"
        ),
    )


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    info = read_run_info(run)
    snapshot = read_snapshot(spark, run)
    actions = materialize(read_actions(spark, run))
    steps = materialize(read_table(spark, run, EVICTION_STEPS))
    moves, step_checks, quota = backlog_move_checks(spark, info, actions, steps, snapshot, EntryReads())
    flags = quota_flag_checks(actions, quota)
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
                    *MOVE_COMMON_CHECKS, "quota_exceeded_with_eviction_policy", "move_is_justified"
                ),
            ],
        ),
        CheckFrame(
            "eviction_steps",
            step_checks,
            [
                expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "step"]),
                *must_be_true(
                    "not_compaction_subscription",
                    "step_starts_where_cursor_is",
                    "size_step_moves_the_slowest_cursor",
                    "not_same_cursor_twice_in_a_row",
                    "step_follows_the_quota_rule",
                ),
            ],
        ),
        CheckFrame(
            "quota_flags",
            flags,
            [
                expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "quotaType"]),
                *must_be_true(
                    "topic_in_snapshot",
                    "exceeded_flag_only_for_producer_policies",
                    "flag_matches_rederived_quota_state",
                ),
            ],
        ),
        CheckFrame(
            "summary",
            summary_checks(spark, moves, read_summary(run.path)),
            must_be_true("summary_reconciles"),
        ),
    ]
