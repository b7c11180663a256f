"""Quality-gate checks for consumed-ledger trim, re-derived from the snapshot apart from the planner.

- deletions: the ledger exists in the snapshot with the planned size; it is not the topic's current ledger; no
  durable cursor pins it (checked cursor by cursor, not through "the slowest" cursor); the deleted set is a
  contiguous oldest prefix; retention allows it (time strictly expired, or what remains of the topic's total is
  still >= the size quota); the system-topic retention default (0, 0) applies exactly to the topics whose name
  makes them system topics (read from the name here, ``topic_names``); (topic, ledgerId) is unique.
- cursor moves: the cursor exists at the planned ``from``; it is non-durable; ``to`` is strictly after ``from``
  (never backward), is the last entry of the topic's deleted range and not past the topic's end.
- local copies (the offload-deletion lag): each planned one is listed, offloaded (complete, at the time the plan
  names), still local, under an offloader, past its lag (>= 0, strict), not deleted by retention in the same plan,
  with the snapshot's bytes; every due local copy of an unheld topic is planned.
- namespaces: bytes deleted reconcile with the planner's summary; the deleted share of the namespace's stored
  bytes is within the blast-radius limit.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from housekeeping.engine.contract import RunDir, read_run_info
from housekeeping.engine.gate import CheckFrame, expect, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import read_summary
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from housekeeping.mechanisms.trim.actions import DELETE_LEDGER, DELETE_LOCAL_COPY
from spark_apps.shared.io import read_actions, read_snapshot
from spark_apps.shared.positions import position_key, position_part
from spark_apps.shared.session import materialize
from spark_apps.shared.topic_names import retention_default_fits_name, topic_name_facts


def trim_deletion_checks(
    actions: DataFrame,
    topics: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    as_of_ms: int,
    names: DataFrame,
) -> DataFrame:
    deletions = actions.where(F.col("action") == DELETE_LEDGER.name).select(
        "topic", "ledgerId", F.col("bytes").alias("plannedBytes")
    )
    topic_facts = ledgers.groupBy("topic").agg(
        F.max("ledgerId").alias("currentLedgerId"), F.sum("size").alias("topicBytes")
    )
    ranked = ledgers.withColumn("rank", F.row_number().over(Window.partitionBy("topic").orderBy("ledgerId")))
    frame = (
        deletions.join(
            ranked.select("topic", "ledgerId", "rank", "entries", "size", "closedAtMs"),
            ["topic", "ledgerId"],
            "left",
        )
        .join(topic_facts, "topic", "left")
        .join(
            topics.select("topic", "retentionTimeMs", "retentionSizeBytes", "retentionSource"),
            "topic",
            "left",
        )
        .join(names.select("topic", "isSystemTopicName"), "topic", "left")
    )
    # Planned deletions up to and including this ledger, with their snapshot sizes.
    upto = Window.partitionBy("topic").orderBy("ledgerId").rowsBetween(Window.unboundedPreceding, 0)
    frame = frame.withColumn("plannedUpTo", F.count("*").over(upto)).withColumn(
        "bytesDeletedUpTo", F.sum(F.coalesce("size", F.lit(0))).over(upto)
    )
    # Durable cursors pinning a ledger: mark-delete in an older ledger, or inside it but not on its last
    # entry, or on it when it is the current ledger. Every durable cursor of the topic is tested against each
    # planned ledger (a topic's mark-deletes as one list beside its rows: no second pass over the joins above).
    durable = (
        cursors.where(F.col("durable"))
        .groupBy("topic")
        .agg(F.collect_list(F.struct("markDeleteLedger", "markDeleteEntry")).alias("durableMarks"))
    )
    frame = frame.join(durable, "topic", "left")

    def pins(mark: Column) -> Column:
        return (mark["markDeleteLedger"] < F.col("ledgerId")) | (
            (mark["markDeleteLedger"] == F.col("ledgerId"))
            & (
                (mark["markDeleteEntry"] != F.col("entries") - 1)
                | (F.col("ledgerId") == F.col("currentLedgerId"))
            )
        )

    pinning_cursors = F.when(F.col("durableMarks").isNull(), F.lit(0)).otherwise(
        F.size(F.filter("durableMarks", pins))
    )
    expired = (F.col("retentionTimeMs") >= 0) & (
        F.lit(as_of_ms) - F.col("closedAtMs") > F.col("retentionTimeMs")
    )
    over_quota = (F.col("retentionSizeBytes") >= 0) & (
        F.col("topicBytes") - F.col("bytesDeletedUpTo") >= F.col("retentionSizeBytes")
    )
    return frame.select(
        "topic",
        "ledgerId",
        F.col("rank").isNotNull().alias("ledger_in_snapshot"),
        F.coalesce(F.col("plannedBytes") == F.col("size"), F.lit(False)).alias("bytes_match_snapshot"),
        F.coalesce(F.col("ledgerId") != F.col("currentLedgerId"), F.lit(False)).alias("not_current_ledger"),
        F.coalesce(F.col("closedAtMs").isNotNull(), F.lit(False)).alias("ledger_is_closed"),
        (pinning_cursors == 0).alias("no_durable_cursor_pins_it"),
        F.coalesce(F.col("rank") == F.col("plannedUpTo"), F.lit(False)).alias("contiguous_oldest_prefix"),
        F.coalesce(expired | over_quota, F.lit(False)).alias("retention_allows_delete"),
        F.coalesce(retention_default_fits_name(), F.lit(False)).alias("retention_default_fits_the_name"),
    )


def trim_cursor_checks(actions: DataFrame, ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    moves = actions.where(F.col("action") == MOVE_CURSOR.name).select(
        "topic", F.col("subscription").alias("name"), "from", "to"
    )
    moves = moves.select(
        "topic",
        "name",
        "from",
        "to",
        position_part("from", 0).alias("fromL"),
        position_part("from", 1).alias("fromE"),
        position_part("to", 0).alias("toL"),
        position_part("to", 1).alias("toE"),
    )
    deleted = (
        actions.where(F.col("action") == DELETE_LEDGER.name)
        .groupBy("topic")
        .agg(F.max("ledgerId").alias("lastDeleted"))
    )
    last_deleted_entry = ledgers.select(
        "topic", F.col("ledgerId").alias("lastDeleted"), (F.col("entries") - 1).alias("endE")
    )
    topic_end = (
        ledgers.where(F.col("entries") > 0)
        .groupBy("topic")
        .agg(F.max(F.struct("ledgerId", "entries")).alias("last"))
        .select("topic", F.col("last.ledgerId").alias("lastL"), (F.col("last.entries") - 1).alias("lastE"))
    )
    current = ledgers.groupBy("topic").agg(F.max("ledgerId").alias("currentL"))
    frame = (
        moves.join(
            cursors.select("topic", "name", "durable", "markDeleteLedger", "markDeleteEntry"),
            ["topic", "name"],
            "left",
        )
        .join(deleted, "topic", "left")
        .join(last_deleted_entry, ["topic", "lastDeleted"], "left")
        .join(topic_end, "topic", "left")
        .join(current, "topic", "left")
    )
    # L:-1 ("nothing of ledger L") acknowledges only entries of older ledgers, all written: never past the end
    # as long as L is one of the topic's ledgers. Pulsar's advanceCursorsIfNecessary produces it when the last
    # deleted ledger is empty (a ledger rolled with no entry).
    before_a_ledger = (F.col("toE") == -1) & (F.col("toL") <= F.col("currentL"))
    to_key, from_key = position_key(F.col("toL"), F.col("toE")), position_key(F.col("fromL"), F.col("fromE"))
    return frame.select(
        "topic",
        "name",
        "from",
        "to",
        F.col("durable").isNotNull().alias("cursor_in_snapshot"),
        F.coalesce(
            (F.col("fromL") == F.col("markDeleteLedger")) & (F.col("fromE") == F.col("markDeleteEntry")),
            F.lit(False),
        ).alias("from_is_current_mark_delete"),
        F.coalesce(~F.col("durable"), F.lit(False)).alias("cursor_is_non_durable"),
        F.coalesce(to_key > from_key, F.lit(False)).alias("moves_forward"),
        F.coalesce(
            (F.col("toL") == F.col("lastDeleted")) & (F.col("toE") == F.col("endE")), F.lit(False)
        ).alias("to_is_end_of_deleted_range"),
        F.coalesce(
            (to_key <= position_key(F.col("lastL"), F.col("lastE"))) | before_a_ledger,
            before_a_ledger,
            F.lit(False),
        ).alias("not_past_last_entry"),
    )


def trim_namespace_checks(
    actions: DataFrame,
    ledgers: DataFrame,
    topics: DataFrame,
    namespaces: DataFrame,
    planned_per_namespace: dict,
    max_share: float,
) -> DataFrame:
    spark = actions.sparkSession
    deleted = (
        actions.where(F.col("action") == DELETE_LEDGER.name)
        .select("topic", "ledgerId")
        .join(ledgers.select("topic", "ledgerId", "size"), ["topic", "ledgerId"], "left")
        .join(topics.select("topic", "namespace"), "topic", "left")
        .groupBy("namespace")
        .agg(F.sum(F.coalesce("size", F.lit(0))).alias("deletedBytes"))
    )
    planned = spark.createDataFrame(
        [(ns, int(v["bytes"])) for ns, v in planned_per_namespace.items()] or [("", 0)],
        "namespace string, summaryBytes long",
    ).where(F.col("namespace") != "")
    frame = namespaces.join(deleted, "namespace", "full").join(planned, "namespace", "full")
    share = F.coalesce(F.col("deletedBytes"), F.lit(0)) / F.greatest(F.col("storedBytes"), F.lit(1))
    return frame.select(
        "namespace",
        F.col("storedBytes").isNotNull().alias("namespace_in_snapshot"),
        F.coalesce(F.col("deletedBytes"), F.lit(0))
        .eqNullSafe(F.coalesce(F.col("summaryBytes"), F.lit(0)))
        .alias("summary_reconciles"),
        share.alias("deleted_share"),
        (share <= F.lit(max_share)).alias("within_blast_radius"),
    )


def local_copy_checks(actions: DataFrame, topics: DataFrame, ledgers: DataFrame, as_of_ms: int) -> DataFrame:
    """Per ``delete_local_copy``: the ledger is listed, its offload complete at the time the plan names, its local
    copy still there, an offloader applies to its topic, the lag (>= 0) has strictly passed, retention does not
    delete the same ledger in this plan, and the bytes are the snapshot's."""
    planned = actions.where(F.col("action") == DELETE_LOCAL_COPY.name).select(
        "topic", "ledgerId", F.col("bytes").alias("plannedBytes"), F.col("offloadedAtMs").alias("plannedAt")
    )
    deleted = actions.where(F.col("action") == DELETE_LEDGER.name).select(
        "topic", "ledgerId", F.lit(True).alias("alsoDeleted")
    )
    facts = ledgers.select(
        "topic",
        "ledgerId",
        "size",
        "offloadComplete",
        "localDeleted",
        "offloadedAtMs",
        F.lit(True).alias("listed"),
    )
    policy = topics.select("topic", "offloader", "offloadDeletionLagMs")
    frame = (
        planned.join(facts, ["topic", "ledgerId"], "left")
        .join(policy, "topic", "left")
        .join(deleted, ["topic", "ledgerId"], "left")
    )

    def holds(condition, name: str):
        return F.coalesce(condition, F.lit(False)).alias(name)

    return frame.select(
        "topic",
        "ledgerId",
        holds(F.col("listed"), "ledger_in_snapshot"),
        holds(F.col("offloadComplete"), "offload_complete"),
        holds(~F.col("localDeleted"), "local_copy_present"),
        holds(F.col("plannedAt") == F.col("offloadedAtMs"), "offload_time_matches_snapshot"),
        holds(F.col("offloader"), "offloader_applies"),
        holds(
            (F.col("offloadDeletionLagMs") >= 0)
            & (F.lit(as_of_ms) - F.col("offloadedAtMs") > F.col("offloadDeletionLagMs")),
            "deletion_lag_passed",
        ),
        F.col("alsoDeleted").isNull().alias("not_deleted_by_retention"),
        holds(F.col("plannedBytes") == F.col("size"), "bytes_match_snapshot"),
    )


def local_copy_selection(
    actions: DataFrame, topics: DataFrame, ledgers: DataFrame, as_of_ms: int
) -> DataFrame:
    """One row per local copy the lag lets go on an unheld topic whose ledger retention keeps: ``planned`` is false
    for one the plan leaves out."""
    in_plan = actions.where(F.col("action").isin(DELETE_LOCAL_COPY.name, DELETE_LEDGER.name)).select(
        "topic", "ledgerId", F.lit(True).alias("inPlan")
    )
    due = (
        ledgers.join(topics.select("topic", "offloader", "offloadDeletionLagMs", "heldBy"), "topic")
        .where(
            F.col("offloader")
            & F.col("heldBy").isNull()
            & F.col("offloadComplete")
            & ~F.col("localDeleted")
            & (F.col("offloadDeletionLagMs") >= 0)
            & (F.lit(as_of_ms) - F.col("offloadedAtMs") > F.col("offloadDeletionLagMs"))
        )
        .select("topic", "ledgerId")
    )
    return due.join(in_plan, ["topic", "ledgerId"], "left").select(
        "topic", "ledgerId", F.coalesce("inPlan", F.lit(False)).alias("planned")
    )


def known_topic_checks(actions: DataFrame, topics: DataFrame) -> DataFrame:
    """Every action names a topic of the snapshot."""
    return (
        actions.select("topic", "action")
        .join(topics.select("topic", F.lit(True).alias("known")), "topic", "left")
        .select("topic", "action", F.coalesce("known", F.lit(False)).alias("topic_in_snapshot"))
    )


def local_copy_frames(actions: DataFrame, snapshot: dict[str, DataFrame], as_of_ms: int) -> list[CheckFrame]:
    """The lag rule's two frames: each planned local-copy deletion holds, and none that is due is missing."""
    return [
        CheckFrame(
            "local_copies",
            local_copy_checks(actions, snapshot["topics"], snapshot["ledgers"], as_of_ms),
            [
                expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "ledgerId"]),
                *must_be_true(
                    "ledger_in_snapshot",
                    "offload_complete",
                    "local_copy_present",
                    "offload_time_matches_snapshot",
                    "offloader_applies",
                    "deletion_lag_passed",
                    "not_deleted_by_retention",
                    "bytes_match_snapshot",
                ),
            ],
        ),
        CheckFrame(
            "local_copy_selection",
            local_copy_selection(actions, snapshot["topics"], snapshot["ledgers"], as_of_ms),
            must_be_true("planned"),
        ),
    ]


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    info = read_run_info(run)
    snapshot = read_snapshot(spark, run)
    actions = materialize(read_actions(spark, run))
    summary = read_summary(run.path)
    deletions = trim_deletion_checks(
        actions,
        snapshot["topics"],
        snapshot["ledgers"],
        snapshot["cursors"],
        int(info["asOfMs"]),
        topic_name_facts(spark, [actions]),
    )
    moves = trim_cursor_checks(actions, snapshot["ledgers"], snapshot["cursors"])
    namespaces = trim_namespace_checks(
        actions,
        snapshot["ledgers"],
        snapshot["topics"],
        snapshot["namespaces"],
        summary.get("perNamespace", {}),
        float(info["maxDeletedShare"]),
    )
    return [
        CheckFrame(
            "actions",
            known_topic_checks(actions, snapshot["topics"]),
            [
                expect("ExpectColumnValuesToBeInSet", column="action", value_set=list(spec.action_names)),
                *must_be_true("topic_in_snapshot"),
            ],
        ),
        CheckFrame(
            "deletions",
            deletions,
            [
                expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "ledgerId"]),
                *must_be_true(
                    "ledger_in_snapshot",
                    "bytes_match_snapshot",
                    "not_current_ledger",
                    "ledger_is_closed",
                    "no_durable_cursor_pins_it",
                    "contiguous_oldest_prefix",
                    "retention_allows_delete",
                    "retention_default_fits_the_name",
                ),
            ],
        ),
        CheckFrame(
            "cursor_moves",
            moves,
            [
                expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "name"]),
                *must_be_true(
                    "cursor_in_snapshot",
                    "from_is_current_mark_delete",
                    "cursor_is_non_durable",
                    "moves_forward",
                    "to_is_end_of_deleted_range",
                    "not_past_last_entry",
                ),
            ],
        ),
        *local_copy_frames(actions, snapshot, int(info["asOfMs"])),
        CheckFrame(
            "namespaces",
            namespaces,
            [
                *must_be_true("namespace_in_snapshot", "summary_reconciles"),
                expect(
                    "ExpectColumnValuesToBeBetween",
                    column="deleted_share",
                    min_value=0.0,
                    max_value=float(info["maxDeletedShare"]),
                ),
            ],
        ),
    ]
