"""GC's gate checks over one bucket of topics, re-derived from the snapshot apart from the planner: plain Python over
the bucket's rows (``spark_apps.gc.gate`` runs them in one Spark pass; the unit tests call them alone).

Every planned ``delete_topic``: the topic is in the snapshot with the planned bytes and lastActive; the broker runs
the monitor; it is not a system topic (read from the name here: Pulsar's system topic names and system namespaces);
``deleteWhileInactive`` is on; no producer or consumer is connected; in ``delete_when_no_subscriptions`` mode it has
no cursor at all, in ``delete_when_subscriptions_caught_up`` mode no cursor is behind the topic's last entry (checked
cursor by cursor); as-of - lastActive >= maxInactiveDurationSeconds; retention time neither infinite nor still
running.

Every ``refresh_last_active``: the topic is in the snapshot, GC applies to it, it is active (or its lastActive is
unknown), the new value is the run's as-of and later than the current one, and the topic is not also deleted.

Across buckets (the driver, ``spark_apps.gc.gate``): every ``delete_partitioned_metadata`` is allowed by the broker,
its metadata is in the snapshot and the plan deletes as many of its partitions as exist; per namespace, the share of
its topics deleted is within the run's limit and topics and bytes reconcile with the planner's summary.

Unknowns (a topic the snapshot lacks, a fact it does not know, a null the plan holds) fail the check that needs
them: each check is a plain boolean, true only when what it needs is known.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from housekeeping.engine.documents import RunInfo
from housekeeping.mechanisms.gc.actions import DELETE_PARTITIONED_METADATA, DELETE_TOPIC, REFRESH_LAST_ACTIVE
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_names import name_facts, retention_default_fits

NO_SUBSCRIPTIONS, CAUGHT_UP = "delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"
DELETION_CHECKS = (
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
)
REFRESH_CHECKS = (
    "topic_in_snapshot",
    "gc_applies_to_topic",
    "topic_is_active_or_unknown",
    "new_value_is_as_of",
    "moves_last_active_forward",
    "not_also_deleted",
)
METADATA_CHECKS = ("metadata_deletion_enabled", "metadata_in_snapshot", "no_partition_left")


class TopicFacts:
    """What the checks read of one topic in the snapshot: its row, its stored bytes, its cursors and how many of
    them have an entry after their mark-delete."""

    def __init__(self, topic: Row | None, ledgers: list[Row], cursors: list[Row]) -> None:
        self.topic = topic
        self.stored_bytes = sum(r["size"] for r in ledgers) if ledgers else None
        written = [(r["ledgerId"], r["entries"] - 1) for r in ledgers if r["entries"] > 0]
        last = max(written) if written else None
        self.cursor_count = len(cursors)
        self.cursors_behind = sum(
            1 for c in cursors if last is not None and (c["markDeleteLedger"], c["markDeleteEntry"]) < last
        )

    def value(self, column: str) -> Any:
        return None if self.topic is None else self.topic.get(column)

    def subscriptions_keep_it_active(self) -> bool | None:
        """The mode's rule: any cursor (no-subscriptions mode), any cursor with a backlog (caught-up mode)."""
        if self.topic is None:
            return None
        mode = self.topic["inactiveDeleteMode"]
        if mode == NO_SUBSCRIPTIONS:
            return self.cursor_count > 0
        if mode == CAUGHT_UP:
            return self.cursors_behind > 0
        return None


def deletion_rows(facts: TopicFacts, deletions: list[Row], info: RunInfo) -> list[Row]:
    as_of_ms, enabled = int(info.as_of_ms), bool(info.broker["brokerDeleteInactiveTopicsEnabled"])
    rows = []
    for action in deletions:
        names = name_facts(action["topic"])
        last_active = facts.value("lastActiveMs")
        idle = None if last_active is None else as_of_ms - last_active
        max_inactive = facts.value("maxInactiveSeconds")
        retention = facts.value("retentionTimeMs")
        rows.append(
            {
                "topic": action["topic"],
                "topic_in_snapshot": facts.topic is not None,
                "gc_enabled_on_broker": enabled,
                "not_system_topic": names["isSystemTopic"] is False,
                "retention_default_fits_the_name": retention_default_fits(
                    facts.topic, names["isSystemTopicName"]
                ),
                "delete_while_inactive": facts.value("deleteWhileInactive") is True,
                "no_connected_clients": facts.topic is not None
                and facts.topic["producers"] == 0
                and facts.topic["consumers"] == 0,
                "no_subscription_keeps_it_active": facts.subscriptions_keep_it_active() is False,
                "inactive_for_at_least_the_limit": None not in (idle, max_inactive)
                and idle >= max_inactive * 1000,
                "retention_time_does_not_keep_it": None not in (retention, idle) and 0 <= retention <= idle,
                "bytes_match_snapshot": action["bytes"] == (facts.stored_bytes or 0),
                "last_active_matches_snapshot": last_active is not None
                and action["lastActiveMs"] == last_active,
            }
        )
    return rows


def refresh_rows(facts: TopicFacts, refreshes: list[Row], deletions: list[Row], info: RunInfo) -> list[Row]:
    as_of_ms, enabled = int(info.as_of_ms), bool(info.broker["brokerDeleteInactiveTopicsEnabled"])
    last_active = facts.value("lastActiveMs")
    clients = None if facts.topic is None else facts.topic["producers"] + facts.topic["consumers"]
    active = (
        (clients is not None and clients > 0)
        or facts.subscriptions_keep_it_active() is True
        or last_active is None
    )
    rows = []
    for action in refreshes:
        not_system = name_facts(action["topic"])["isSystemTopic"] is False
        row = {
            "topic": action["topic"],
            "topic_in_snapshot": facts.topic is not None,
            "gc_applies_to_topic": enabled and facts.value("deleteWhileInactive") is True and not_system,
            "topic_is_active_or_unknown": active,
            "new_value_is_as_of": action["lastActiveMs"] == as_of_ms,
            "moves_last_active_forward": last_active is None or last_active < as_of_ms,
        }
        # One row per deletion of the same topic (a join), each failing; one passing row without any.
        rows.extend([{**row, "not_also_deleted": not deletions}] * max(len(deletions), 1))
    return rows


def check_topic(facts: TopicFacts, actions: list[Row], info: RunInfo) -> dict[str, list[Row]]:
    """Every per-bucket frame's rows of one topic (the topic of the snapshot or of the plan), and what the driver
    adds up: the bytes and topics deleted per namespace, the partitions deleted per partitioned topic, the
    partitioned metadata planned."""
    deletions = [a for a in actions if a["action"] == DELETE_TOPIC.name]
    refreshes = [a for a in actions if a["action"] == REFRESH_LAST_ACTIVE.name]
    parents = [name_facts(d["topic"])["partitionedTopic"] for d in deletions]
    return {
        "actions": [{"topic": a["topic"], "action": a["action"]} for a in actions],
        "topic_deletions": deletion_rows(facts, deletions, info),
        "last_active_refreshes": refresh_rows(facts, refreshes, deletions, info),
        "namespace_deleted": [
            {
                "namespace": facts.value("namespace"),
                "deletedTopics": 1,
                "deletedBytes": facts.stored_bytes or 0,
            }
            for _ in deletions
        ],
        "partition_deletions": [{"partitionedTopic": p} for p in parents if p is not None],
        "planned_metadata": [
            {"partitionedTopic": a["topic"]}
            for a in actions
            if a["action"] == DELETE_PARTITIONED_METADATA.name
        ],
    }


def metadata_rows(
    planned: list[str | None], partitioned: Mapping[str, Row], deleted: Mapping[str, int], enabled: bool
) -> list[Row]:
    """Per planned ``delete_partitioned_metadata``: allowed, known, and no partition left by the plan."""
    rows = []
    for parent in planned:
        metadata = partitioned.get(parent) if parent is not None else None
        count = deleted.get(parent) if parent is not None else None
        existing = None if metadata is None else metadata["existingPartitions"]
        rows.append(
            {
                "partitionedTopic": parent,
                "metadata_deletion_enabled": enabled,
                "metadata_in_snapshot": metadata is not None,
                "no_partition_left": None not in (count, existing) and 1 <= count == existing,
            }
        )
    return rows


def namespace_rows(
    deleted: Mapping[str | None, tuple[int, int]], topic_counts: Mapping[str, int], summary: Mapping[str, Any]
) -> list[Row]:
    """Per namespace of the snapshot, of the deletions or of the planner's summary: topics and bytes reconcile with
    the summary, and the share of its topics deleted (a namespace the snapshot lacks: of one topic)."""
    planned = {ns: v for ns, v in summary.items() if ns != ""}
    rows = []
    for namespace in dict.fromkeys([*topic_counts, *deleted, *planned]):
        topics, size = deleted.get(namespace, (0, 0))
        plan = planned.get(namespace, {}) if namespace is not None else {}
        count = topic_counts.get(namespace) if namespace is not None else None
        rows.append(
            {
                "namespace": namespace,
                "namespace_in_snapshot": count is not None,
                "summary_reconciles": topics == int(plan.get("topics", 0))
                and size == int(plan.get("bytes", 0)),
                "deleted_topics": topics,
                "deleted_topic_share": topics / max(count if count is not None else 1, 1),
            }
        )
    return rows
