"""Spark app: plan backlog-quota enforcement (Pulsar ``BacklogQuotaManager``), one application for all topics.

Writes:

- ``plan/quotas``         one row per topic: limits and policies, measured backlog bytes and oldest age,
                          exceeded flags, which quota was acted on and why the eviction stopped
- ``plan/eviction_steps`` every cursor move of the eviction loops in order (the gate replays them)
- ``plan/subscriptions``  one row per durable subscription: evicted or kept, entries and bytes evicted
- ``plan/actions``        ``move_cursor`` (consumer_backlog_eviction) and ``flag_backlog_quota`` (quota state
                          for producer_request_hold / producer_exception: set, kept or cleared)
- ``plan/blockers``, ``plan/summary.json``

The per-topic rules are pure Python in ``backlog/rules`` (run here as a grouped map); the precise time
eviction reuses the TTL search of ``shared/cursors`` with ttl = (int)(0.9 x limit).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.contract import ACTIONS, BLOCKERS, RunDir, read_run_info
from housekeeping.mechanisms.backlog.actions import FLAG_BACKLOG_QUOTA
from housekeeping.mechanisms.backlog.tables import BACKLOG_QUOTAS, BACKLOG_SUBSCRIPTIONS, EVICTION_STEPS
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
    position_facts,
    read_cost,
)
from spark_apps.shared.holds import keep_held
from spark_apps.shared.io import (
    EntryReads,
    LedgerFiles,
    action_rows,
    read_entries,
    read_snapshot,
    write_summary,
    write_table,
)
from spark_apps.shared.plan_app import parse_plan_args, plan_main
from spark_apps.shared.positions import position_text
from spark_apps.shared.session import materialize, run_scoped_cache

TOPIC_RESULT_SCHEMA = "topic string, result string"

STEP_SCHEMA = T.ArrayType(
    T.StructType(
        [
            T.StructField("quotaType", T.StringType()),
            T.StructField("cursor", T.StringType()),
            T.StructField("fromLedger", T.LongType()),
            T.StructField("fromEntry", T.LongType()),
            T.StructField("toLedger", T.LongType()),
            T.StructField("toEntry", T.LongType()),
            T.StructField("backlogBytesBefore", T.LongType()),
            T.StructField("entriesSkipped", T.LongType()),
            T.StructField("why", T.StringType()),
        ]
    )
)
STATE_SCHEMA = T.ArrayType(
    T.StructType(
        [
            T.StructField("quotaType", T.StringType()),
            T.StructField("policy", T.StringType()),
            T.StructField("exceeded", T.BooleanType()),
            T.StructField("limitValue", T.LongType()),
            T.StructField("measuredValue", T.LongType()),
            T.StructField("exceededSinceMs", T.LongType()),
            T.StructField("wasExceeded", T.BooleanType()),
            T.StructField("why", T.StringType()),
        ]
    )
)
RESULT_SCHEMA = T.StructType(
    [
        T.StructField("steps", STEP_SCHEMA),
        T.StructField("states", STATE_SCHEMA),
        T.StructField("preciseCutoffMs", T.LongType()),
        T.StructField("handled", T.StringType()),
        T.StructField("note", T.StringType()),
        T.StructField("backlogBytes", T.LongType()),
        T.StructField("sizeExceeded", T.BooleanType()),
        T.StructField("oldestBacklogTsMs", T.LongType()),
        T.StructField("oldestBacklogAgeSeconds", T.LongType()),
        T.StructField("timeExceeded", T.BooleanType()),
    ]
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_plan_args("Plan backlog-quota enforcement for one run's snapshot.", argv)


def _plan_group(frame: pd.DataFrame) -> pd.DataFrame:
    """Grouped map: one topic's rows (its facts, ledgers, durable cursors) -> its backlog decisions (JSON)."""
    from spark_apps.backlog.rules import Ledger, plan_topic

    facts = frame[frame["rowType"] == "topic"].iloc[0]
    ledgers = [
        Ledger(
            int(r.ledgerId), int(r.entries), int(r.size), None if pd.isna(r.closedAtMs) else int(r.closedAtMs)
        )
        for r in frame[frame["rowType"] == "ledger"].itertuples()
    ]
    cursors = {
        str(r.name): (int(r.posLedger), int(r.posEntry))
        for r in frame[frame["rowType"] == "cursor"].itertuples()
    }
    topic = json.loads(facts["facts"])
    result = plan_topic(topic, ledgers, cursors)
    return pd.DataFrame({"topic": [facts["topic"]], "result": [json.dumps(result)]})


def grouped_input(
    topics: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    quota_states: DataFrame,
    info: dict,
    slowest_ts: DataFrame,
) -> DataFrame:
    broker = info["broker"]
    stored = quota_states.groupBy("topic").agg(
        F.map_from_entries(
            F.collect_list(
                F.struct(
                    "quotaType",
                    F.struct("policy", "exceeded", "limitValue", "measuredValue", "exceededSinceMs"),
                )
            )
        ).alias("stored")
    )
    facts = (
        topics.join(stored, "topic", "left")
        .join(slowest_ts, "topic", "left")
        .select(
            "topic",
            F.to_json(
                F.struct(
                    "topic",
                    "isSystemTopic",
                    "sizeQuotaLimitBytes",
                    "sizeQuotaPolicy",
                    "timeQuotaLimitSeconds",
                    "timeQuotaPolicy",
                    F.lit(int(info["asOfMs"])).alias("asOfMs"),
                    F.lit(bool(broker["preciseTimeBasedBacklogQuotaCheck"])).alias("precise"),
                    F.lit(bool(broker["backlogQuotaCheckEnabled"])).alias("checkEnabled"),
                    "slowestFirstUnackedTsMs",
                    "stored",
                )
            ).alias("facts"),
        )
    )
    empty = {
        "facts": F.lit(None).cast("string"),
        "ledgerId": F.lit(None).cast("long"),
        "entries": F.lit(None).cast("long"),
        "size": F.lit(None).cast("long"),
        "closedAtMs": F.lit(None).cast("long"),
        "name": F.lit(None).cast("string"),
        "posLedger": F.lit(None).cast("long"),
        "posEntry": F.lit(None).cast("long"),
    }
    order = ["topic", "rowType", *empty]

    def shaped(frame: DataFrame, row_type: str, present: list[str]) -> DataFrame:
        return frame.select(
            "topic",
            F.lit(row_type).alias("rowType"),
            *[F.col(c) if c in present else empty[c].alias(c) for c in empty],
        ).select(*order)

    return (
        shaped(facts, "topic", ["facts"])
        .unionByName(shaped(ledgers, "ledger", ["ledgerId", "entries", "size", "closedAtMs"]))
        .unionByName(
            shaped(
                cursors.where(F.col("durable")).select(
                    "topic",
                    "name",
                    F.col("markDeleteLedger").alias("posLedger"),
                    F.col("markDeleteEntry").alias("posEntry"),
                ),
                "cursor",
                ["name", "posLedger", "posEntry"],
            )
        )
    )


def slowest_first_unacked_ts(
    spark, info: dict, subs: DataFrame, layout: DataFrame, reads: EntryReads
) -> DataFrame:
    """Precise mode: timestamp of the slowest durable cursor's first unacknowledged entry, per topic with a
    message_age quota (``preciseTimeBasedBacklogQuotaCheck`` reads that entry)."""
    schema = "topic string, slowestFirstUnackedTsMs long"
    if not info["broker"]["preciseTimeBasedBacklogQuotaCheck"]:
        return spark.createDataFrame([], schema)
    slowest = (
        subs.where((F.col("timeQuotaLimitSeconds") > 0) & (F.col("backlogEntries") > 0))
        .groupBy("topic")
        .agg(F.min(F.struct("posLedger", "posEntry", "name", "acked")).alias("s"))
        .select("topic", F.col("s.acked").alias("acked"))
    )
    at = materialize(entry_at_ordinal(slowest, layout, ["topic"], "acked"))
    keys = entry_read_requests(
        at.where(F.col("atStored")).select(
            "topic", F.col("atLedger").alias("ledgerId"), F.col("atSize").alias("size")
        )
    )
    entries = read_entries(spark, LedgerFiles.of(info), keys, reads)
    return at.join(
        entries.select(
            "topic", F.col("ledgerId").alias("atLedger"), F.col("entryId").alias("atEntry"), "entryTs"
        ),
        ["topic", "atLedger", "atEntry"],
    ).select("topic", F.col("entryTs").alias("slowestFirstUnackedTsMs"))


def precise_time_moves(
    spark, info: dict, results: DataFrame, subs: DataFrame, layout: DataFrame, reads: EntryReads
) -> DataFrame:
    """Precise time eviction: the TTL search on every durable subscription but the compaction cursor of a topic
    whose rules asked for it (``preciseCutoffMs``)."""
    precise = results.where(F.col("r.preciseCutoffMs").isNotNull()).select(
        "topic", F.col("r.preciseCutoffMs").alias("cutoffMs")
    )
    precise_subs = subs.join(precise, "topic").where(
        (F.col("name") != COMPACTION_SUBSCRIPTION) & (F.col("backlogEntries") > 0)
    )
    targets, _ = expire(spark, LedgerFiles.of(info), precise_subs, layout, reads, [])
    return expiry_moves(targets, layout).select(
        "topic",
        "name",
        "toLedger",
        "toEntry",
        F.lit("message_age").alias("quotaType"),
        F.concat(
            F.lit("precise message_age eviction (TTL search with ttl = 0.9 x limit): "), F.col("stopDetail")
        ).alias("why"),
    )


def loop_moves(steps: DataFrame) -> DataFrame:
    """Per cursor, where the eviction loop's last step left it."""
    return (
        steps.groupBy("topic", F.col("cursor").alias("name"))
        .agg(
            F.max(F.struct("step", "toLedger", "toEntry", "quotaType")).alias("last"), F.count("*").alias("n")
        )
        .select(
            "topic",
            "name",
            F.col("last.toLedger").alias("toLedger"),
            F.col("last.toEntry").alias("toEntry"),
            F.col("last.quotaType").alias("quotaType"),
            F.format_string(
                "%s eviction: %d loop step(s), see plan/eviction_steps", F.col("last.quotaType"), F.col("n")
            ).alias("why"),
        )
    )


def subscription_decisions(subs: DataFrame, moves: DataFrame, layout: DataFrame) -> DataFrame:
    """One row per durable subscription: moved (where, how much it evicted) or kept (why)."""
    after = position_facts(
        moves.select(
            "topic", "name", F.col("toLedger").alias("posLedger"), F.col("toEntry").alias("posEntry")
        ),
        layout,
        ["topic", "name"],
    ).select(
        "topic",
        "name",
        F.col("acked").alias("ackedAfter"),
        F.col("estimatedBacklogBytes").alias("bytesAfter"),
        F.col("oldestBacklogLedgerTsMs").alias("oldestLedgerTsAfter"),
    )
    decided = subs.join(moves, ["topic", "name"], "left").join(after, ["topic", "name"], "left")
    moved = F.col("toLedger").isNotNull()
    compaction = F.col("name") == COMPACTION_SUBSCRIPTION
    return decided.select(
        "topic",
        "namespace",
        F.col("name").alias("subscription"),
        "consumers",
        F.col("markDelete").alias("from"),
        F.when(moved, position_text(F.col("toLedger"), F.col("toEntry"))).alias("to"),
        F.when(moved, F.lit("move")).otherwise(F.lit("keep")).alias("decision"),
        F.when(moved, F.concat(F.lit("evicted_"), F.col("quotaType")))
        .when(compaction, F.lit("compaction_subscription"))
        .when(F.col("backlogEntries") <= 0, F.lit("no_backlog"))
        .otherwise(F.lit("not_evicted"))
        .alias("kind"),
        F.when(moved, F.col("why"))
        .when(compaction, F.lit("the compaction cursor is never evicted"))
        .otherwise(F.lit("no eviction applies to this subscription"))
        .alias("reason"),
        "backlogEntries",
        F.col("estimatedBacklogBytes").alias("backlogBytes"),
        F.when(moved, F.col("ackedAfter") - F.col("acked"))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("entriesEvicted"),
        F.when(moved, F.col("estimatedBacklogBytes") - F.col("bytesAfter"))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("bytesEvicted"),
        F.when(moved, F.col("bytesAfter"))
        .otherwise(F.col("estimatedBacklogBytes"))
        .alias("backlogBytesAfter"),
        oldest_remaining_ledger_ts(moved, "oldestLedgerTsAfter"),
    )


def quota_rows(results: DataFrame, topics: DataFrame, as_of_ms: int) -> DataFrame:
    """Per topic, its quotas and what the rules measured and did."""
    return results.join(topics, "topic").select(
        "topic",
        "namespace",
        "isSystemTopic",
        "sizeQuotaLimitBytes",
        "sizeQuotaPolicy",
        "timeQuotaLimitSeconds",
        "timeQuotaPolicy",
        F.col("r.backlogBytes").alias("backlogBytes"),
        F.col("r.sizeExceeded").alias("sizeExceeded"),
        F.col("r.oldestBacklogTsMs").alias("oldestBacklogTsMs"),
        F.col("r.oldestBacklogAgeSeconds").alias("oldestBacklogAgeSeconds"),
        F.col("r.timeExceeded").alias("timeExceeded"),
        F.col("r.handled").alias("handled"),
        F.col("r.note").alias("note"),
        F.lit(as_of_ms).alias("asOfMs"),
    )


def plan_backlog(
    spark, snapshot: dict[str, DataFrame], info: dict, reads: EntryReads
) -> dict[str, DataFrame]:
    """The per-topic rules (``rules.plan_topic``, a grouped map), their eviction steps and quota states, the
    precise time evictions, and the subscriptions' and quotas' rows."""
    layout = materialize(ledger_layout(snapshot["ledgers"]))
    subs = materialize(durable_subscriptions(snapshot["topics"], snapshot["cursors"], layout))
    slowest_ts = slowest_first_unacked_ts(spark, info, subs, layout, reads)
    results = (
        grouped_input(
            snapshot["topics"],
            snapshot["ledgers"],
            snapshot["cursors"],
            snapshot["quota_states"],
            info,
            slowest_ts,
        )
        .groupBy("topic")
        .applyInPandas(_plan_group, TOPIC_RESULT_SCHEMA)
        .select("topic", F.from_json("result", RESULT_SCHEMA).alias("r"))
    )
    results = materialize(results)
    steps = results.select("topic", F.posexplode("r.steps").alias("step", "s")).select("topic", "step", "s.*")
    steps = materialize(steps.withColumn("step", F.col("step") + 1))
    states = results.select("topic", F.explode("r.states").alias("s")).select("topic", "s.*")
    # Materialized: the TTL search's plan is deep, and a Spark Connect client refuses to send a plan nested more
    # than ~100 levels (protobuf's decoding limit), which the joins below would pass.
    moves = materialize(
        loop_moves(steps).unionByName(precise_time_moves(spark, info, results, subs, layout, reads))
    )
    return {
        "subscriptions": subscription_decisions(subs, moves, layout),
        "steps": steps,
        "states": states,
        "quotas": quota_rows(results, snapshot["topics"], int(info["asOfMs"])),
    }


def quota_actions(states: DataFrame) -> DataFrame:
    return action_rows(
        states,
        FLAG_BACKLOG_QUOTA.name,
        topic=F.col("topic"),
        **{
            "from": F.when(F.col("wasExceeded"), F.lit("exceeded")).otherwise(F.lit("clear")),
            "to": F.when(F.col("exceeded"), F.lit("exceeded")).otherwise(F.lit("clear")),
        },
        reason=F.when(
            F.col("exceeded"),
            F.format_string(
                "%s quota exceeded: measured %d >= limit %d (%s); producers are refused while exceeded",
                F.col("quotaType"),
                F.col("measuredValue"),
                F.col("limitValue"),
                F.col("policy"),
            ),
        ).otherwise(F.format_string("%s quota state cleared: %s", F.col("quotaType"), F.col("why"))),
        quotaType=F.col("quotaType"),
        policy=F.col("policy"),
        exceeded=F.col("exceeded"),
        limitValue=F.col("limitValue"),
        measuredValue=F.col("measuredValue"),
        exceededSinceMs=F.col("exceededSinceMs"),
    )


def move_actions(subscriptions: DataFrame) -> DataFrame:
    return action_rows(
        subscriptions.where(F.col("decision") == "move"),
        MOVE_CURSOR.name,
        topic=F.col("topic"),
        subscription=F.col("subscription"),
        **{"from": F.col("from"), "to": F.col("to")},
        bytes=F.col("bytesEvicted"),
        reason=F.col("reason"),
        quotaType=F.regexp_replace("kind", "^evicted_", ""),
        policy=F.lit("consumer_backlog_eviction"),
    )


def run(spark, run_dir: str | Path) -> dict:
    run = RunDir(run_dir)
    with run_scoped_cache(spark):
        info = read_run_info(run)
        snapshot = read_snapshot(spark, run)
        reads = EntryReads()
        planned = plan_backlog(spark, snapshot, info, reads)
        subscriptions = materialize(
            keep_held(
                planned["subscriptions"],
                snapshot["topics"],
                decision="decision",
                keep="keep",
                reset={
                    "to": F.lit(None).cast("string"),
                    "entriesEvicted": F.lit(0).cast("long"),
                    "bytesEvicted": F.lit(0).cast("long"),
                    "backlogBytesAfter": F.col("backlogBytes"),
                },
            )
        )
        # A held topic's cursors do not move, so its eviction loop is not part of the plan either (the quota
        # state is still recorded: flagging is neither a deletion nor a cursor move).
        steps = planned["steps"].join(
            snapshot["topics"].where(F.col("heldBy").isNotNull()).select("topic"), "topic", "left_anti"
        )
        write_table(planned["quotas"], run, BACKLOG_QUOTAS, ["topic"])
        write_table(steps, run, EVICTION_STEPS, ["topic", "step"])
        write_table(subscriptions, run, BACKLOG_SUBSCRIPTIONS, ["topic", "subscription"])
        actions = move_actions(subscriptions).unionByName(quota_actions(planned["states"]))
        write_table(actions, run, ACTIONS, ["topic", "action", "subscription", "quotaType"])
        write_table(cursor_blockers(subscriptions), run, BLOCKERS, ["topic", "subscription"])
        states = planned["states"].collect()
        summary = {
            "mechanism": "backlog",
            "runId": info["runId"],
            "asOfMs": info["asOfMs"],
            **cursor_summary(subscriptions, "entriesEvicted", "bytesEvicted"),
            "quotaStates": {
                "exceeded": sorted(f"{r['topic']} {r['quotaType']}" for r in states if r["exceeded"]),
                "newlyExceeded": sorted(
                    f"{r['topic']} {r['quotaType']}" for r in states if r["exceeded"] and not r["wasExceeded"]
                ),
                "cleared": sorted(f"{r['topic']} {r['quotaType']}" for r in states if not r["exceeded"]),
            },
            "reads": read_cost(reads, snapshot["ledgers"]),
        }
        write_summary(run, summary)
        return summary


def main(argv: list[str] | None = None) -> int:
    return plan_main("backlog", run, parse_args(argv))
