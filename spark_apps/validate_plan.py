"""Spark app: the quality gate. Re-derives each planned action's safety from the snapshot, independently
of the planner, and validates the result with Great Expectations. Exits non-zero on any failed
expectation, so the DAG's apply task never runs.

Trim invariants (each a boolean column of a check frame, each expected to be all true):

- deletions: the ledger exists in the snapshot with the planned size; it is not the topic's current
  ledger; no durable cursor pins it (checked cursor by cursor, not through "the slowest" cursor); the
  deleted set is a contiguous oldest prefix; retention allows it (time strictly expired, or what remains
  of the topic's total is still >= the size quota); the system-topic retention default (0, 0) applies
  exactly to the topics whose name makes them system topics (read from the name here, ``topic_names``);
  (topic, ledgerId) is unique.
- cursor moves: the cursor exists at the planned ``from``; it is non-durable; ``to`` is strictly after
  ``from`` (never backward), is the last entry of the topic's deleted range and not past the topic's end.
- namespaces: bytes deleted reconcile with the planner's summary; the deleted share of the namespace's
  stored bytes is within the blast-radius limit.

Holds (every mechanism): no deleting or cursor-moving action names a topic a hold covers, matched here from
the snapshot's raw holds (namespace, topic, partitioned parent), not from the planner's ``heldBy``.

Expiry and backlog checks: ``validate_cursor_moves``; inactive-topic GC checks: ``validate_gc``; compaction
checks: ``validate_compaction``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from housekeeping.holds import HELD_FORBIDDEN_ACTIONS  # noqa: E402
from housekeeping.snapshot import read_run_info  # noqa: E402
from spark_apps.common import get_spark, materialize, read_snapshot, run_scoped_cache  # noqa: E402
from spark_apps.topic_names import retention_default_fits_name, topic_name_facts  # noqa: E402
from spark_apps.validate_cursor_moves import position_key, position_part  # noqa: E402

ACTIONS_SCHEMA = (
    "topic string, action string, ledgerId long, subscription string, `from` string, `to` string, "
    "bytes long, reason string, quotaType string, policy string, exceeded boolean, limitValue long, "
    "measuredValue long, exceededSinceMs long, lastActiveMs long"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Validate a run's plan against its snapshot (quality gate).")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--mechanism", required=True, choices=sorted(CHECK_BUILDERS))
    return parser.parse_args(argv)


def read_actions(spark, run_dir: str | Path) -> DataFrame:
    return spark.read.schema(ACTIONS_SCHEMA).json(str(Path(run_dir) / "plan" / "actions"))


def trim_deletion_checks(
    actions: DataFrame,
    topics: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    as_of_ms: int,
    names: DataFrame,
) -> DataFrame:
    deletions = actions.where(F.col("action") == "delete_ledger").select(
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
    # entry, or on it when it is the current ledger.
    durable = cursors.where(F.col("durable")).select(
        "topic", F.col("name").alias("cursor"), "markDeleteLedger", "markDeleteEntry"
    )
    pins = (
        frame.select("topic", "ledgerId", "entries", "currentLedgerId")
        .join(durable, "topic")
        .where(
            (F.col("markDeleteLedger") < F.col("ledgerId"))
            | (
                (F.col("markDeleteLedger") == F.col("ledgerId"))
                & (
                    (F.col("markDeleteEntry") != F.col("entries") - 1)
                    | (F.col("ledgerId") == F.col("currentLedgerId"))
                )
            )
        )
        .groupBy("topic", "ledgerId")
        .agg(F.count("*").alias("pinningCursors"))
    )
    frame = frame.join(pins, ["topic", "ledgerId"], "left")
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
        F.coalesce(F.col("pinningCursors"), F.lit(0)).eqNullSafe(0).alias("no_durable_cursor_pins_it"),
        F.coalesce(F.col("rank") == F.col("plannedUpTo"), F.lit(False)).alias("contiguous_oldest_prefix"),
        F.coalesce(expired | over_quota, F.lit(False)).alias("retention_allows_delete"),
        F.coalesce(retention_default_fits_name(), F.lit(False)).alias("retention_default_fits_the_name"),
    )


def trim_cursor_checks(actions: DataFrame, ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    moves = actions.where(F.col("action") == "move_cursor").select(
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
        actions.where(F.col("action") == "delete_ledger")
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
        actions.where(F.col("action") == "delete_ledger")
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


def trim_checks(spark, run_dir: str | Path):
    import great_expectations.expectations as gxe

    from housekeeping.gate import CheckFrame, must_be_true
    from housekeeping.plan import read_summary

    info = read_run_info(run_dir)
    snapshot = read_snapshot(spark, run_dir)
    actions = materialize(read_actions(spark, run_dir))
    summary = read_summary(Path(run_dir))
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
    known_topics = (
        actions.select("topic", "action")
        .join(snapshot["topics"].select("topic", F.lit(True).alias("known")), "topic", "left")
        .select("topic", "action", F.coalesce("known", F.lit(False)).alias("topic_in_snapshot"))
    )
    return [
        CheckFrame(
            "actions",
            known_topics,
            [
                gxe.ExpectColumnValuesToBeInSet(column="action", value_set=["delete_ledger", "move_cursor"]),
                *must_be_true("topic_in_snapshot"),
            ],
        ),
        CheckFrame(
            "deletions",
            deletions,
            [
                gxe.ExpectCompoundColumnsToBeUnique(column_list=["topic", "ledgerId"]),
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
                gxe.ExpectCompoundColumnsToBeUnique(column_list=["topic", "name"]),
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
        CheckFrame(
            "namespaces",
            namespaces,
            [
                *must_be_true("namespace_in_snapshot", "summary_reconciles"),
                gxe.ExpectColumnValuesToBeBetween(
                    column="deleted_share", min_value=0.0, max_value=float(info["maxDeletedShare"])
                ),
            ],
        ),
    ]


def _summary_checks(spark, moves: DataFrame, summary: dict) -> DataFrame:
    planned = int(summary.get("cursorsToMove", 0))
    counted = moves.count()
    return spark.createDataFrame(
        [(planned, counted, planned == counted)], "planned long, counted long, summary_reconciles boolean"
    )


def expiry_checks(spark, run_dir: str | Path):
    import great_expectations.expectations as gxe

    from housekeeping.gate import CheckFrame, must_be_true
    from housekeeping.plan import read_summary
    from spark_apps.common import EntryReads
    from spark_apps.validate_cursor_moves import expiry_move_checks

    info = read_run_info(run_dir)
    snapshot = read_snapshot(spark, run_dir)
    actions = materialize(read_actions(spark, run_dir))
    moves = expiry_move_checks(spark, info, actions, snapshot, EntryReads())
    return [
        CheckFrame(
            "actions",
            actions.select("action"),
            [gxe.ExpectColumnValuesToBeInSet(column="action", value_set=["move_cursor"])],
        ),
        CheckFrame(
            "cursor_moves",
            moves,
            [
                gxe.ExpectCompoundColumnsToBeUnique(column_list=["topic", "name"]),
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
            _summary_checks(spark, moves, read_summary(Path(run_dir))),
            must_be_true("summary_reconciles"),
        ),
    ]


def backlog_checks(spark, run_dir: str | Path):
    import great_expectations.expectations as gxe

    from housekeeping.gate import CheckFrame, must_be_true
    from housekeeping.plan import read_summary
    from spark_apps.common import EntryReads
    from spark_apps.validate_cursor_moves import backlog_move_checks, quota_flag_checks, read_steps

    info = read_run_info(run_dir)
    snapshot = read_snapshot(spark, run_dir)
    actions = materialize(read_actions(spark, run_dir))
    steps = materialize(read_steps(spark, run_dir))
    moves, step_checks, quota = backlog_move_checks(spark, info, actions, steps, snapshot, EntryReads())
    flags = quota_flag_checks(actions, quota)
    return [
        CheckFrame(
            "actions",
            actions.select("action"),
            [
                gxe.ExpectColumnValuesToBeInSet(
                    column="action", value_set=["move_cursor", "flag_backlog_quota"]
                )
            ],
        ),
        CheckFrame(
            "cursor_moves",
            moves,
            [
                gxe.ExpectCompoundColumnsToBeUnique(column_list=["topic", "name"]),
                *must_be_true(
                    *MOVE_COMMON_CHECKS, "quota_exceeded_with_eviction_policy", "move_is_justified"
                ),
            ],
        ),
        CheckFrame(
            "eviction_steps",
            step_checks,
            [
                gxe.ExpectCompoundColumnsToBeUnique(column_list=["topic", "step"]),
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
                gxe.ExpectCompoundColumnsToBeUnique(column_list=["topic", "quotaType"]),
                *must_be_true(
                    "topic_in_snapshot",
                    "exceeded_flag_only_for_producer_policies",
                    "flag_matches_rederived_quota_state",
                ),
            ],
        ),
        CheckFrame(
            "summary",
            _summary_checks(spark, moves, read_summary(Path(run_dir))),
            must_be_true("summary_reconciles"),
        ),
    ]


MOVE_COMMON_CHECKS = (
    "cursor_in_snapshot",
    "cursor_is_durable",
    "not_compaction_subscription",
    "not_system_topic",
    "from_is_current_mark_delete",
    "moves_forward",
    "to_is_an_entry_of_a_listed_ledger",
    "not_past_last_entry",
)


def gc_checks(spark, run_dir: str | Path):
    from spark_apps.validate_gc import gc_checks as build

    return build(spark, run_dir)


def compaction_checks(spark, run_dir: str | Path):
    from spark_apps.validate_compaction import compaction_checks as build

    return build(spark, run_dir)


def hold_checks(actions: DataFrame, holds: DataFrame, names: DataFrame) -> DataFrame:
    """One row per deleting or cursor-moving action: ``not_held`` is false when a hold covers its topic (the
    topic itself, its namespace or its partitioned topic, read from the name by ``topic_names``)."""
    forbidden = actions.where(F.col("action").isin(*HELD_FORBIDDEN_ACTIONS)).select("topic", "action")
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


def with_hold_checks(spark, run_dir: str | Path, checks: list) -> list:
    from housekeeping.gate import CheckFrame, must_be_true

    actions = spark.read.schema(ACTIONS_SCHEMA).json(str(Path(run_dir) / "plan" / "actions"))
    holds = read_snapshot(spark, run_dir)["holds"]
    names = topic_name_facts(spark, [actions])
    return [*checks, CheckFrame("holds", hold_checks(actions, holds, names), must_be_true("not_held"))]


CHECK_BUILDERS = {
    "trim": trim_checks,
    "expiry": expiry_checks,
    "backlog": backlog_checks,
    "gc": gc_checks,
    "compaction": compaction_checks,
}


def run(spark, run_dir: str | Path, mechanism: str) -> dict:
    from housekeeping.gate import run_gate

    with run_scoped_cache(spark):
        checks = with_hold_checks(spark, run_dir, CHECK_BUILDERS[mechanism](spark, run_dir))
        return run_gate(Path(run_dir), mechanism, checks)


def main(argv: list[str] | None = None) -> int:
    from housekeeping.gate import describe_failures

    args = parse_args(argv)
    spark = get_spark(f"housekeeping-validate-{args.mechanism}")
    document = run(spark, args.run_dir, args.mechanism)
    if not document["success"]:
        print(
            f"GATE REJECTED the {args.mechanism} plan in {args.run_dir}; apply will not run:", file=sys.stderr
        )
        print(describe_failures(document), file=sys.stderr)
        return 1
    print(
        f"gate passed: {len(document['expectations'])} expectations on the {args.mechanism} plan in {args.run_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
