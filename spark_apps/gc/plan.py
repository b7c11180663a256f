"""Spark app: plan inactive-topic GC (Pulsar ``PersistentTopic#checkGC``, docs/semantics.md §6).

Reads a run's snapshot, decides every in-scope topic in one application, and writes:

- ``plan/decisions``  one row per topic: delete or keep, a typed ``kind``, a human ``reason`` and the facts
- ``plan/actions``    ``delete_topic`` rows; ``refresh_last_active`` rows (checkGC stamps ``lastActive = now``
                      on every topic it finds active); ``delete_partitioned_metadata`` rows
- ``plan/blockers``   per kept topic: why, with its bytes
- ``plan/summary.json`` totals per namespace that the gate reconciles independently

The rule, per topic, in Pulsar's order:

0. the monitor runs only when the broker's ``brokerDeleteInactiveTopicsEnabled`` is true;
   system topics (``BrokerService#isSystemTopic``: Pulsar's system topic names and the system and heartbeat
   namespaces, ``housekeeping.core.names``) are never collected;
1. the resolved ``inactive_topic_policies`` (topic > namespace > broker) must have ``deleteWhileInactive``;
2. active (-> lastActive = as-of, keep): ``delete_when_no_subscriptions``: any subscription (durable or
   a reader's) exists; ``delete_when_subscriptions_caught_up``: any subscription has a backlog; both modes:
   any producer or consumer connected;
3. inactive: delete only when as-of - lastActive >= maxInactiveDurationSeconds and retention time does not
   keep it (time < 0 keeps it forever, else kept while as-of - lastActive < retention time; size never counts).
   A topic whose lastActive is unknown is stamped as loaded now (Pulsar sets lastActive at topic load).

Partitioned topics: each partition is a topic decided on its own. The partitioned metadata goes only when
``brokerDeleteInactivePartitionedTopicMetadataEnabled`` is true and this run deletes every partition that
still exists (Pulsar's ``tryToDeletePartitionedMetadata`` runs after a partition's deletion).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from housekeeping.engine.contract import ACTIONS, BLOCKERS, RunDir, read_run_info
from housekeeping.mechanisms.gc.actions import DELETE_PARTITIONED_METADATA, DELETE_TOPIC, REFRESH_LAST_ACTIVE
from housekeeping.mechanisms.gc.tables import GC_DECISIONS
from spark_apps.shared.holds import keep_held
from spark_apps.shared.io import action_rows, read_snapshot, write_summary, write_table
from spark_apps.shared.plan_app import parse_plan_args, plan_main
from spark_apps.shared.session import materialize, run_scoped_cache

NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
CAUGHT_UP = "delete_when_subscriptions_caught_up"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_plan_args("Plan inactive-topic GC for one run's snapshot.", argv)


def _iso(ms: Column) -> Column:
    return F.date_format(F.timestamp_millis(ms), "yyyy-MM-dd'T'HH:mm:ss'Z'")


def topic_activity(topics: DataFrame, ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    """Per topic: bytes, ledgers, subscriptions, subscriptions with a backlog, connected clients."""
    storage = ledgers.groupBy("topic").agg(
        F.sum("size").alias("bytes"),
        F.count("*").alias("ledgers"),
        # The last entry: the newest ledger that has entries, at its last entry (none when nothing was written).
        F.max(
            F.when(F.col("entries") > 0, F.struct("ledgerId", (F.col("entries") - 1).alias("entryId")))
        ).alias("lastEntry"),
    )
    # A subscription has a backlog when an entry exists after its mark-delete (Pulsar's non-precise
    # getNumberOfEntriesInBacklog(false) > 0).
    subscriptions = (
        cursors.join(storage.select("topic", "lastEntry"), "topic", "left")
        .withColumn(
            "hasBacklog",
            F.coalesce(
                F.struct(
                    F.col("markDeleteLedger").alias("ledgerId"), F.col("markDeleteEntry").alias("entryId")
                )
                < F.col("lastEntry"),
                F.lit(False),
            ),
        )
        .groupBy("topic")
        .agg(
            F.count("*").alias("subscriptions"),
            F.sum(F.col("hasBacklog").cast("long")).alias("backlogSubscriptions"),
            F.sort_array(F.collect_list("name")).alias("subscriptionNames"),
        )
    )
    return (
        topics.join(storage, "topic", "left")
        .join(subscriptions, "topic", "left")
        .select(
            topics["*"],
            F.coalesce("bytes", F.lit(0)).alias("bytes"),
            F.coalesce("ledgers", F.lit(0)).alias("ledgers"),
            F.coalesce("subscriptions", F.lit(0)).alias("subscriptions"),
            F.coalesce("backlogSubscriptions", F.lit(0)).alias("backlogSubscriptions"),
            F.coalesce("subscriptionNames", F.array().cast("array<string>")).alias("subscriptionNames"),
            (F.col("producers") + F.col("consumers")).alias("clients"),
        )
    )


def gc_kind(gc_enabled: bool) -> Column:
    """``PersistentTopic#checkGC``'s checks in its order: the first that keeps the topic names why (``inactive``:
    none did). Reads ``inactiveForMs`` (the topic's idle time at the as-of)."""
    by_mode = F.when(F.col("inactiveDeleteMode") == NO_SUBSCRIPTIONS, F.col("subscriptions") > 0).otherwise(
        F.col("backlogSubscriptions") > 0
    )
    within_limit = F.col("inactiveForMs") < F.col("maxInactiveSeconds") * 1000
    retained = (F.col("retentionTimeMs") < 0) | (F.col("inactiveForMs") < F.col("retentionTimeMs"))
    return (
        F.when(F.lit(not gc_enabled), F.lit("gc_disabled"))
        .when(F.col("isSystemTopic"), F.lit("system_topic"))
        .when(~F.col("deleteWhileInactive"), F.lit("delete_while_inactive_off"))
        .when(by_mode & (F.col("inactiveDeleteMode") == NO_SUBSCRIPTIONS), F.lit("subscriptions"))
        .when(by_mode, F.lit("backlog"))
        .when(F.col("clients") > 0, F.lit("connected_clients"))
        .when(F.col("lastActiveMs").isNull(), F.lit("last_active_unknown"))
        .when(within_limit, F.lit("inactive_less_than_limit"))
        .when(F.col("retentionTimeMs") < 0, F.lit("retention_time_infinite"))
        .when(retained, F.lit("retention_time"))
        .otherwise(F.lit("inactive"))
    )


def _idle() -> Column:
    return F.format_string(
        "inactive %d s since lastActive %s",
        (F.col("inactiveForMs") / 1000).cast("long"),
        _iso(F.col("lastActiveMs")),
    )


def _kept_because_active() -> dict[str, Column]:
    """The reasons of the checks that find the topic in use."""
    policy = F.format_string(
        "%s, maxInactiveDurationSeconds %d (%s)",
        F.col("inactiveDeleteMode"),
        F.col("maxInactiveSeconds"),
        F.col("inactivePolicySource"),
    )
    return {
        "gc_disabled": F.lit("brokerDeleteInactiveTopicsEnabled is false: the monitor does not run"),
        "system_topic": F.lit("system topic: Pulsar's internal topics are never deleted for inactivity"),
        "delete_while_inactive_off": F.format_string(
            "deleteWhileInactive is false (%s)", F.col("inactivePolicySource")
        ),
        "subscriptions": F.format_string(
            "active: %d subscription(s) %s exist (%s)",
            F.col("subscriptions"),
            F.array_join(F.slice("subscriptionNames", 1, 5), ", "),
            policy,
        ),
        "backlog": F.format_string(
            "active: %d subscription(s) have a backlog (%s)", F.col("backlogSubscriptions"), policy
        ),
        "connected_clients": F.concat(
            F.lit("active: "),
            F.format_string(
                "%d producer(s), %d consumer(s) connected", F.col("producers"), F.col("consumers")
            ),
        ),
        "last_active_unknown": F.lit(
            "lastActive unknown: stamped with this run's time, as Pulsar stamps a topic when it loads"
        ),
    }


def _kept_because_idle_briefly() -> dict[str, Column]:
    """The reasons of the checks that find the topic idle, but not long enough."""
    retention_s = (F.col("retentionTimeMs") / 1000).cast("long")
    return {
        "inactive_less_than_limit": F.concat_ws(
            "; ",
            _idle(),
            F.format_string(
                "< maxInactiveDurationSeconds %d (%s)",
                F.col("maxInactiveSeconds"),
                F.col("inactivePolicySource"),
            ),
        ),
        "retention_time_infinite": F.concat_ws(
            "; ", _idle(), F.format_string("retention time is infinite (%s)", F.col("retentionSource"))
        ),
        "retention_time": F.concat_ws(
            "; ",
            _idle(),
            F.format_string("within retention time %d s (%s)", retention_s, F.col("retentionSource")),
        ),
    }


def gc_reason() -> Column:
    """Why (for a person), by ``kind``; ``inactive``: every check passed, the topic goes."""
    deleted = F.concat_ws(
        "; ",
        _idle(),
        F.format_string(">= maxInactiveDurationSeconds %d", F.col("maxInactiveSeconds")),
        F.format_string("no subscription blocks it (%s)", F.col("inactiveDeleteMode")),
        F.lit("no client connected"),
        F.format_string(
            "retention time %d s does not keep it (%s)",
            (F.col("retentionTimeMs") / 1000).cast("long"),
            F.col("retentionSource"),
        ),
    )
    reason = deleted
    for kind, text in reversed([*_kept_because_active().items(), *_kept_because_idle_briefly().items()]):
        reason = F.when(F.col("kind") == kind, text).otherwise(reason)
    return reason


def plan_topic_decisions(
    topics: DataFrame, ledgers: DataFrame, cursors: DataFrame, as_of_ms: int, gc_enabled: bool
) -> DataFrame:
    """One row per topic: ``decision`` delete|keep, ``kind``, ``reason``, ``refreshLastActive``. Pure."""
    as_of = F.lit(as_of_ms)
    frame = (
        topic_activity(topics, ledgers, cursors)
        .withColumn("inactiveForMs", as_of - F.col("lastActiveMs"))
        .withColumn("kind", gc_kind(gc_enabled))
    )
    # checkGC stamps lastActive on a topic it finds active (and here, on one it sees for the first time);
    # never backward, so a backfill of an older date leaves a newer stamp alone.
    refresh = F.col("kind").isin("subscriptions", "backlog", "connected_clients", "last_active_unknown") & (
        F.col("lastActiveMs").isNull() | (F.col("lastActiveMs") < as_of)
    )
    return frame.select(
        "topic",
        "namespace",
        "partitionedTopic",
        F.when(F.col("kind") == "inactive", F.lit("delete")).otherwise(F.lit("keep")).alias("decision"),
        "kind",
        gc_reason().alias("reason"),
        refresh.alias("refreshLastActive"),
        "bytes",
        "ledgers",
        "subscriptions",
        "backlogSubscriptions",
        "producers",
        "consumers",
        "lastActiveMs",
        "inactiveForMs",
        "inactiveDeleteMode",
        "maxInactiveSeconds",
        "deleteWhileInactive",
        "retentionTimeMs",
        F.col("isSystemTopic").alias("isSystemTopic"),
    )


def partitioned_metadata_deletions(
    decisions: DataFrame, partitioned: DataFrame, metadata_deletion_enabled: bool
) -> DataFrame:
    """Partitioned topics whose every existing partition this plan deletes (only when the broker allows)."""
    deleted = (
        decisions.where((F.col("decision") == "delete") & F.col("partitionedTopic").isNotNull())
        .groupBy("partitionedTopic")
        .agg(F.count("*").alias("deletedPartitions"))
    )
    return (
        partitioned.join(deleted, "partitionedTopic")
        .where(F.lit(metadata_deletion_enabled) & (F.col("deletedPartitions") == F.col("existingPartitions")))
        .select("partitionedTopic", "namespace", "partitions", "deletedPartitions")
    )


def gc_actions(decisions: DataFrame, metadata: DataFrame, as_of_ms: int) -> DataFrame:
    """The contract's actions. ``lastActiveMs``: for delete_topic the value the decision was made on (apply
    skips the topic when it changed since), for refresh_last_active the new value."""
    deletes = action_rows(
        decisions.where(F.col("decision") == "delete"),
        DELETE_TOPIC.name,
        topic=F.col("topic"),
        bytes=F.col("bytes"),
        reason=F.col("reason"),
        lastActiveMs=F.col("lastActiveMs"),
    )
    refreshes = action_rows(
        decisions.where(F.col("refreshLastActive")),
        REFRESH_LAST_ACTIVE.name,
        topic=F.col("topic"),
        reason=F.concat(F.lit("lastActive := as-of ("), F.col("reason"), F.lit(")")),
        lastActiveMs=F.lit(as_of_ms),
    )
    metadata_rows = action_rows(
        metadata,
        DELETE_PARTITIONED_METADATA.name,
        topic=F.col("partitionedTopic"),
        reason=F.format_string(
            "every existing partition (%d of %d) is deleted by this run and "
            "brokerDeleteInactivePartitionedTopicMetadataEnabled is true",
            F.col("deletedPartitions"),
            F.col("partitions"),
        ),
    )
    return deletes.unionByName(refreshes).unionByName(metadata_rows)


def gc_blockers(decisions: DataFrame) -> DataFrame:
    return decisions.where(F.col("decision") == "keep").select(
        "topic", "kind", F.col("reason").alias("detail"), "bytes", "ledgers"
    )


def plan_summary(decisions: DataFrame, metadata: DataFrame, namespaces: DataFrame) -> dict:
    rows = (
        decisions.where(F.col("decision") == "delete")
        .groupBy("namespace")
        .agg(F.count("*").alias("topics"), F.sum("bytes").alias("bytes"), F.sum("ledgers").alias("ledgers"))
        .join(namespaces.select("namespace", "topicCount"), "namespace", "left")
        .collect()
    )
    per_namespace = {
        r["namespace"]: {
            "topics": int(r["topics"]),
            "bytes": int(r["bytes"]),
            "ledgers": int(r["ledgers"]),
            "namespaceTopics": int(r["topicCount"] or 0),
        }
        for r in rows
    }
    kinds = {r["kind"]: int(r["count"]) for r in decisions.groupBy("kind").count().collect()}
    return {
        "topicsToDelete": sum(v["topics"] for v in per_namespace.values()),
        "bytesToDelete": sum(v["bytes"] for v in per_namespace.values()),
        "ledgersToDelete": sum(v["ledgers"] for v in per_namespace.values()),
        "lastActiveRefreshes": decisions.where(F.col("refreshLastActive")).count(),
        "partitionedMetadataToDelete": sorted(r["partitionedTopic"] for r in metadata.collect()),
        "topicsByKind": kinds,
        "perNamespace": per_namespace,
    }


def run(spark, run_dir: str | Path) -> dict:
    run = RunDir(run_dir)
    with run_scoped_cache(spark):
        info = read_run_info(run)
        as_of_ms = int(info["asOfMs"])
        gc_enabled = bool(info["broker"]["brokerDeleteInactiveTopicsEnabled"])
        metadata_enabled = bool(info["broker"]["brokerDeleteInactivePartitionedTopicMetadataEnabled"])
        snapshot = read_snapshot(spark, run)
        decisions = (
            plan_topic_decisions(
                snapshot["topics"], snapshot["ledgers"], snapshot["cursors"], as_of_ms, gc_enabled
            )
            .transform(lambda d: keep_held(d, snapshot["topics"], decision="decision", keep="keep"))
            .transform(materialize)
        )
        # A held partitioned topic keeps its metadata (its partitions are held too, so none is deleted).
        unheld_partitioned = snapshot["partitioned_topics"].where(F.col("heldBy").isNull()).drop("heldBy")
        metadata = partitioned_metadata_deletions(decisions, unheld_partitioned, metadata_enabled)
        metadata = materialize(metadata)
        write_table(decisions, run, GC_DECISIONS, ["topic"])
        write_table(gc_actions(decisions, metadata, as_of_ms), run, ACTIONS, ["topic", "action"])
        write_table(gc_blockers(decisions), run, BLOCKERS, ["topic", "kind"])
        summary = {
            "mechanism": "gc",
            "runId": info["runId"],
            "asOfMs": as_of_ms,
            "gcEnabled": gc_enabled,
            "partitionedMetadataDeletionEnabled": metadata_enabled,
            **plan_summary(decisions, metadata, snapshot["namespaces"]),
        }
        write_summary(run, summary)
        return summary


def main(argv: list[str] | None = None) -> int:
    return plan_main("gc", run, parse_args(argv))
