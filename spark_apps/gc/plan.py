"""Spark app: plan inactive-topic GC (Pulsar ``PersistentTopic#checkGC``, docs/semantics.md §6).

Reads a run's snapshot and decides every in-scope topic in one Spark pass (``spark_apps.shared.topic_pass``: a task
per snapshot bucket runs :func:`spark_apps.gc.rule.plan_topic` topic by topic), and writes:

- ``plan/decisions``  one row per topic: delete or keep, a typed ``kind``, a human ``reason`` and the facts
- ``plan/actions``    ``delete_topic`` rows; ``refresh_last_active`` rows (checkGC stamps ``lastActive = now``
                      on every topic it finds active); ``delete_partitioned_metadata`` rows
- ``plan/blockers``   per kept topic: why, with its bytes
- ``plan/summary.json`` totals per namespace that the gate reconciles independently

Partitioned topics: each partition is a topic decided on its own. The partitioned metadata goes only when
``brokerDeleteInactivePartitionedTopicMetadataEnabled`` is true and this run deletes every partition that
still exists (Pulsar's ``tryToDeletePartitionedMetadata`` runs after a partition's deletion): the partitions of one
partitioned topic fall in different buckets, so the tasks count the partitions they delete and the driver decides
the metadata (:func:`spark_apps.gc.rule.metadata_deletion`) and writes those actions in a part file of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from housekeeping.engine.contract import ACTIONS, BLOCKERS, CURSORS, LEDGERS, NAMESPACES, PARTITIONED_TOPICS
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot_reads import has_snapshot_table, read_snapshot_table
from housekeeping.mechanisms.gc.tables import GC_DECISIONS
from spark_apps.gc.rule import metadata_deletion, plan_topic
from spark_apps.shared.plan_app import PlanApp, topic_pass_plan
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import bucket_count, part_file, write_part

READS = (LEDGERS.name, CURSORS.name)
OUTPUTS = (
    GC_DECISIONS,
    ACTIONS,
    BLOCKERS,
)


def gc_topic(topic: Row, rows: Mapping[str, list[Row]], info: RunInfo) -> dict[str, list[Row]]:
    """The pass's rule: one topic's rows of GC's plan tables."""
    gc_enabled = bool(info.broker["brokerDeleteInactiveTopicsEnabled"])
    plan = plan_topic(topic, rows[LEDGERS.name], rows[CURSORS.name], int(info.as_of_ms), gc_enabled)
    return {GC_DECISIONS.name: [plan.decision], ACTIONS.name: plan.actions, BLOCKERS.name: plan.blockers}


def tally(decided: Mapping[str, list[Row]]) -> dict[str, Any]:
    """A bucket's share of the summary, and the partitions it deletes per partitioned topic."""
    per_namespace: dict[str, dict[str, int]] = {}
    kinds: dict[str, int] = {}
    partitions: dict[str, int] = {}
    refreshes = 0
    for d in decided[GC_DECISIONS.name]:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
        refreshes += bool(d["refreshLastActive"])
        if d["decision"] != "delete":
            continue
        counts = per_namespace.setdefault(d["namespace"], {"topics": 0, "bytes": 0, "ledgers": 0})
        counts["topics"] += 1
        counts["bytes"] += d["bytes"]
        counts["ledgers"] += d["ledgers"]
        if d["partitionedTopic"] is not None:
            partitions[d["partitionedTopic"]] = partitions.get(d["partitionedTopic"], 0) + 1
    return {
        "perNamespace": per_namespace,
        "topicsByKind": kinds,
        "lastActiveRefreshes": refreshes,
        "deletedPartitions": partitions,
    }


def figures(totals: dict[str, Any], run: RunDir, info: RunInfo) -> dict[str, Any]:
    """After the pass: the partitioned topics' metadata deletions (decided here, from the partitions the buckets
    delete), and the summary's figures."""
    broker = info.broker
    gc_enabled = bool(broker["brokerDeleteInactiveTopicsEnabled"])
    metadata_enabled = bool(broker["brokerDeleteInactivePartitionedTopicMetadataEnabled"])
    deleted_partitions = totals.get("deletedPartitions", {})
    partitioned = (
        read_snapshot_table(run, PARTITIONED_TOPICS) if has_snapshot_table(run, PARTITIONED_TOPICS) else []
    )
    metadata = [
        action
        for row in partitioned
        if (
            action := metadata_deletion(
                row, deleted_partitions.get(row["partitionedTopic"], 0), metadata_enabled
            )
        )
    ]
    # After the buckets' part files: the one the driver decides.
    write_part(
        run.plan_table(ACTIONS) / part_file(bucket_count(info)),
        metadata,
        ACTIONS,
    )
    topic_counts = {r["namespace"]: r["topicCount"] for r in read_snapshot_table(run, NAMESPACES)}
    per_namespace = {
        namespace: {**counts, "namespaceTopics": int(topic_counts.get(namespace) or 0)}
        for namespace, counts in totals.get("perNamespace", {}).items()
    }
    return {
        "gcEnabled": gc_enabled,
        "partitionedMetadataDeletionEnabled": metadata_enabled,
        "topicsToDelete": sum(v["topics"] for v in per_namespace.values()),
        "bytesToDelete": sum(v["bytes"] for v in per_namespace.values()),
        "ledgersToDelete": sum(v["ledgers"] for v in per_namespace.values()),
        "lastActiveRefreshes": totals.get("lastActiveRefreshes", 0),
        "partitionedMetadataToDelete": sorted(a["topic"] for a in metadata),
        "topicsByKind": totals.get("topicsByKind", {}),
        "perNamespace": per_namespace,
    }


APP = PlanApp(
    "gc",
    "Plan inactive-topic GC for one run's snapshot.",
    topic_pass_plan(rule=gc_topic, reads=READS, outputs=OUTPUTS, tally=tally, figures=figures),
)
parse_args, run, main = APP.parse_args, APP.run, APP.main
