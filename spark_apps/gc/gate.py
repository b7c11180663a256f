"""Quality-gate checks for inactive-topic GC, re-derived from the snapshot apart from the planner.

Every planned ``delete_topic``: the topic is in the snapshot with the planned bytes and lastActive; the broker
runs the monitor; it is not a system topic (read from the name here, ``topic_names``: Pulsar's system topic
names and system namespaces); ``deleteWhileInactive`` is on; no producer or consumer is connected; in
``delete_when_no_subscriptions`` mode it has no cursor at all, in ``delete_when_subscriptions_caught_up``
mode no cursor is behind the topic's last entry (checked cursor by cursor); as-of - lastActive >=
maxInactiveDurationSeconds; retention time neither infinite nor still running; one row per topic.

Every ``refresh_last_active``: the topic is in the snapshot, GC applies to it, it is active (or its lastActive
is unknown), the new value is the run's as-of and later than the current one, and the topic is not also
deleted.

Every ``delete_partitioned_metadata``: the broker allows it, the metadata is in the snapshot, and the plan
deletes as many of its partitions as exist in the store.

Per namespace: the share of its topics deleted is within the run's limit (the blast radius), and topics and
bytes reconcile with the planner's summary.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from housekeeping.engine.contract import RunDir, read_run_info
from housekeeping.engine.gate import CheckFrame, expect, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import read_summary
from housekeeping.mechanisms.gc.actions import DELETE_PARTITIONED_METADATA, DELETE_TOPIC, REFRESH_LAST_ACTIVE
from spark_apps.shared.io import read_actions, read_snapshot
from spark_apps.shared.positions import position_key
from spark_apps.shared.session import materialize
from spark_apps.shared.topic_names import retention_default_fits_name, topic_name_facts


def _not_system() -> F.Column:
    """From the gate's reading of the name (``isSystemTopic`` of ``topic_name_facts``); unknown -> false."""
    return F.coalesce(~F.col("isSystemTopic"), F.lit(False))


def _known_true(check: F.Column) -> F.Column:
    """A check on a fact the snapshot does not have (null) fails."""
    return F.coalesce(check, F.lit(False))


def cursors_behind_last_entry(ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    """Per topic: cursors that have at least one entry after their mark-delete, counted one by one."""
    entries = ledgers.where(F.col("entries") > 0).select(
        "topic", "ledgerId", (F.col("entries") - 1).alias("lastE")
    )
    return (
        cursors.join(entries, "topic")
        .where(
            position_key(F.col("markDeleteLedger"), F.col("markDeleteEntry"))
            < position_key(F.col("ledgerId"), F.col("lastE"))
        )
        .select("topic", "name")
        .distinct()
        .groupBy("topic")
        .agg(F.count("*").alias("cursorsBehind"))
    )


def topic_facts(snapshot: dict) -> DataFrame:
    """Snapshot topics with ``known``, their cursor count and how many cursors are behind the last entry."""
    cursors, ledgers = snapshot["cursors"], snapshot["ledgers"]
    cursor_count = cursors.groupBy("topic").agg(F.count("*").alias("cursorCount"))
    return (
        snapshot["topics"]
        .drop("isSystemTopic")  # the gate reads it from the name (topic_names), not from the snapshot
        .withColumn("known", F.lit(True))
        .join(cursor_count, "topic", "left")
        .join(cursors_behind_last_entry(ledgers, cursors), "topic", "left")
        .withColumn("cursorCount", F.coalesce(F.col("cursorCount"), F.lit(0)))
        .withColumn("cursorsBehind", F.coalesce(F.col("cursorsBehind"), F.lit(0)))
    )


def _subscriptions_keep_it_active() -> F.Column:
    """The mode's rule: any cursor (no-subscriptions mode), any cursor with a backlog (caught-up mode)."""
    return F.when(
        F.col("inactiveDeleteMode") == "delete_when_no_subscriptions", F.col("cursorCount") > 0
    ).when(F.col("inactiveDeleteMode") == "delete_when_subscriptions_caught_up", F.col("cursorsBehind") > 0)


def deletion_checks(
    info: dict, actions: DataFrame, facts: DataFrame, ledgers: DataFrame, names: DataFrame
) -> DataFrame:
    as_of = F.lit(int(info["asOfMs"]))
    planned = actions.where(F.col("action") == DELETE_TOPIC.name).select(
        "topic", F.col("bytes").alias("plannedBytes"), F.col("lastActiveMs").alias("plannedLastActiveMs")
    )
    stored = ledgers.groupBy("topic").agg(F.sum("size").alias("storedBytes"))
    frame = (
        planned.join(facts, "topic", "left")
        .join(stored, "topic", "left")
        .join(names.select("topic", "isSystemTopic", "isSystemTopicName"), "topic", "left")
    )
    idle_ms = as_of - F.col("lastActiveMs")
    return frame.select(
        "topic",
        F.coalesce(F.col("known"), F.lit(False)).alias("topic_in_snapshot"),
        F.lit(bool(info["broker"]["brokerDeleteInactiveTopicsEnabled"])).alias("gc_enabled_on_broker"),
        _not_system().alias("not_system_topic"),
        _known_true(retention_default_fits_name()).alias("retention_default_fits_the_name"),
        _known_true(F.col("deleteWhileInactive")).alias("delete_while_inactive"),
        _known_true((F.col("producers") == 0) & (F.col("consumers") == 0)).alias("no_connected_clients"),
        _known_true(~_subscriptions_keep_it_active()).alias("no_subscription_keeps_it_active"),
        _known_true(idle_ms >= F.col("maxInactiveSeconds") * 1000).alias("inactive_for_at_least_the_limit"),
        _known_true((F.col("retentionTimeMs") >= 0) & (idle_ms >= F.col("retentionTimeMs"))).alias(
            "retention_time_does_not_keep_it"
        ),
        _known_true(F.coalesce(F.col("storedBytes"), F.lit(0)) == F.col("plannedBytes")).alias(
            "bytes_match_snapshot"
        ),
        _known_true(F.col("plannedLastActiveMs") == F.col("lastActiveMs")).alias(
            "last_active_matches_snapshot"
        ),
    )


def refresh_checks(info: dict, actions: DataFrame, facts: DataFrame, names: DataFrame) -> DataFrame:
    as_of_ms = int(info["asOfMs"])
    refreshes = actions.where(F.col("action") == REFRESH_LAST_ACTIVE.name).select(
        "topic", F.col("lastActiveMs").alias("newLastActiveMs")
    )
    deleted = actions.where(F.col("action") == DELETE_TOPIC.name).select(
        "topic", F.lit(True).alias("alsoDeleted")
    )
    frame = (
        refreshes.join(facts, "topic", "left")
        .join(deleted, "topic", "left")
        .join(names.select("topic", "isSystemTopic"), "topic", "left")
    )
    active = (
        (F.col("producers") + F.col("consumers") > 0)
        | _subscriptions_keep_it_active()
        | F.col("lastActiveMs").isNull()
    )
    gc_applies = (
        F.lit(bool(info["broker"]["brokerDeleteInactiveTopicsEnabled"]))
        & F.col("deleteWhileInactive")
        & _not_system()
    )
    return frame.select(
        "topic",
        F.coalesce(F.col("known"), F.lit(False)).alias("topic_in_snapshot"),
        F.coalesce(gc_applies, F.lit(False)).alias("gc_applies_to_topic"),
        F.coalesce(active, F.lit(False)).alias("topic_is_active_or_unknown"),
        F.coalesce(F.col("newLastActiveMs") == F.lit(as_of_ms), F.lit(False)).alias("new_value_is_as_of"),
        F.coalesce(
            F.col("lastActiveMs").isNull() | (F.col("lastActiveMs") < F.lit(as_of_ms)), F.lit(False)
        ).alias("moves_last_active_forward"),
        F.col("alsoDeleted").isNull().alias("not_also_deleted"),
    )


def partitioned_metadata_checks(
    info: dict, actions: DataFrame, snapshot: dict, names: DataFrame
) -> DataFrame:
    partitioned = snapshot["partitioned_topics"]
    planned = actions.where(F.col("action") == DELETE_PARTITIONED_METADATA.name).select(
        F.col("topic").alias("partitionedTopic")
    )
    # Partition names are parsed here from the deleted topics' names, not taken from the planner's columns.
    deleted_partitions = (
        actions.where(F.col("action") == DELETE_TOPIC.name)
        .join(names.select("topic", "partitionedTopic"), "topic")
        .where(F.col("partitionedTopic").isNotNull())
        .groupBy("partitionedTopic")
        .agg(F.count("*").alias("deletedPartitions"))
    )
    frame = planned.join(partitioned.withColumn("known", F.lit(True)), "partitionedTopic", "left").join(
        deleted_partitions, "partitionedTopic", "left"
    )
    return frame.select(
        "partitionedTopic",
        F.lit(bool(info["broker"]["brokerDeleteInactivePartitionedTopicMetadataEnabled"])).alias(
            "metadata_deletion_enabled"
        ),
        F.coalesce(F.col("known"), F.lit(False)).alias("metadata_in_snapshot"),
        F.coalesce(
            (F.col("deletedPartitions") >= 1) & (F.col("deletedPartitions") == F.col("existingPartitions")),
            F.lit(False),
        ).alias("no_partition_left"),
    )


def namespace_checks(spark, info: dict, actions: DataFrame, snapshot: dict, summary: dict) -> DataFrame:
    topics, ledgers, namespaces = snapshot["topics"], snapshot["ledgers"], snapshot["namespaces"]
    stored = ledgers.groupBy("topic").agg(F.sum("size").alias("size"))
    deleted = (
        actions.where(F.col("action") == DELETE_TOPIC.name)
        .select("topic")
        .join(topics.select("topic", "namespace"), "topic", "left")
        .join(stored, "topic", "left")
        .groupBy("namespace")
        .agg(F.count("*").alias("deletedTopics"), F.sum(F.coalesce("size", F.lit(0))).alias("deletedBytes"))
    )
    per_ns = summary.get("perNamespace", {})
    planned = spark.createDataFrame(
        [(ns, int(v["topics"]), int(v["bytes"])) for ns, v in per_ns.items()] or [("", 0, 0)],
        "namespace string, summaryTopics long, summaryBytes long",
    ).where(F.col("namespace") != "")
    frame = namespaces.join(deleted, "namespace", "full").join(planned, "namespace", "full")
    share = F.coalesce(F.col("deletedTopics"), F.lit(0)) / F.greatest(F.col("topicCount"), F.lit(1))
    zero = F.lit(0)
    return frame.select(
        "namespace",
        F.col("topicCount").isNotNull().alias("namespace_in_snapshot"),
        (
            F.coalesce(F.col("deletedTopics"), zero).eqNullSafe(F.coalesce(F.col("summaryTopics"), zero))
            & F.coalesce(F.col("deletedBytes"), zero).eqNullSafe(F.coalesce(F.col("summaryBytes"), zero))
        ).alias("summary_reconciles"),
        F.coalesce(F.col("deletedTopics"), zero).alias("deleted_topics"),
        share.alias("deleted_topic_share"),
    )


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    info = read_run_info(run)
    snapshot = read_snapshot(spark, run)
    actions = materialize(read_actions(spark, run))
    summary = read_summary(run.path)
    facts = materialize(topic_facts(snapshot))
    names = materialize(topic_name_facts(spark, [actions]))
    max_share = float(info.get("maxDeletedTopicShare", 0.5))
    return [
        CheckFrame(
            "actions",
            actions.select("topic", "action"),
            [
                expect("ExpectColumnValuesToBeInSet", column="action", value_set=list(spec.action_names)),
                expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "action"]),
            ],
        ),
        CheckFrame(
            "topic_deletions",
            deletion_checks(info, actions, facts, snapshot["ledgers"], names),
            [
                expect("ExpectColumnValuesToBeUnique", column="topic"),
                *must_be_true(
                    "topic_in_snapshot",
                    "gc_enabled_on_broker",
                    "not_system_topic",
                    "retention_default_fits_the_name",
                    "delete_while_inactive",
                    "no_connected_clients",
                    "no_subscription_keeps_it_active",
                    "inactive_for_at_least_the_limit",
                    "retention_time_does_not_keep_it",
                    "bytes_match_snapshot",
                    "last_active_matches_snapshot",
                ),
            ],
        ),
        CheckFrame(
            "last_active_refreshes",
            refresh_checks(info, actions, facts, names),
            must_be_true(
                "topic_in_snapshot",
                "gc_applies_to_topic",
                "topic_is_active_or_unknown",
                "new_value_is_as_of",
                "moves_last_active_forward",
                "not_also_deleted",
            ),
        ),
        CheckFrame(
            "partitioned_metadata",
            partitioned_metadata_checks(info, actions, snapshot, names),
            must_be_true("metadata_deletion_enabled", "metadata_in_snapshot", "no_partition_left"),
        ),
        CheckFrame(
            "namespaces",
            namespace_checks(spark, info, actions, snapshot, summary),
            [
                *must_be_true("namespace_in_snapshot", "summary_reconciles"),
                expect(
                    "ExpectColumnValuesToBeBetween",
                    column="deleted_topic_share",
                    min_value=0.0,
                    max_value=max_share,
                ),
            ],
        ),
    ]
