"""Inactive-topic GC's action kinds: ``delete_topic`` (every row of an inactive topic, its ledgers to the
pending-deletion log, the rest saved in ``deleted_topics`` for restore), ``refresh_last_active`` (Pulsar stamps a
topic with no known lastActive at the check) and ``delete_partitioned_metadata`` (a partitioned topic's metadata
once no partition is left), with how the shared apply executes each."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import bindparam, insert, select

from housekeeping.core.names import TopicName
from housekeeping.core.policies import resolve_policies
from housekeeping.engine.actions import ActionKind, Changes, Effect, Frees, PlanView, TopicTally, namespace_of
from housekeeping.store import metadata_schema as t
from housekeeping.store.clients import last_entry, stamp_last_active
from housekeeping.store.topic_rows import delete_topic_rows

# Statements compiled once (GC re-checks tens of thousands of topics in one apply; built per topic, they cost more
# than the database's work).
_TOPIC = select(t.topics).where(t.topics.c.name == bindparam("gc_topic"))
_CURSORS = select(t.cursors).where(t.cursors.c.topic == bindparam("gc_topic"))
_NAMESPACE_POLICIES = select(t.namespaces.c.policies).where(t.namespaces.c.name == bindparam("gc_namespace"))


def topic_busy(conn: Any, context: Any, topic: str, action: Mapping[str, Any]) -> str | None:
    """Why the topic may not be deleted now (None: it may). Reads the current metadata, not the snapshot."""
    row = conn.execute(_TOPIC, {"gc_topic": topic}).first()
    if row is None:
        return None  # reported as "topic no longer exists" by the version check
    if row.producers or row.consumers:
        return f"topic became active: {row.producers} producer(s), {row.consumers} consumer(s) connected"
    if row.last_active_ms != action.get("lastActiveMs"):
        return (
            f"topic became active: lastActive moved from {action.get('lastActiveMs')} to {row.last_active_ms}"
        )
    namespace_policies = conn.execute(_NAMESPACE_POLICIES, {"gc_namespace": row.namespace}).scalar_one()
    broker = context.broker
    if not broker["brokerDeleteInactiveTopicsEnabled"]:
        return "brokerDeleteInactiveTopicsEnabled is now false"
    effective = resolve_policies(
        topic,
        json.loads(row.policies),
        row.namespace,
        json.loads(namespace_policies),
        broker,
    )
    then = context.then(topic)
    if then is not None and effective.document() != then.document:
        return "the topic's effective policies changed since the snapshot"
    mode = effective.inactive_topic_policies.delete_mode
    cursors = list(conn.execute(_CURSORS, {"gc_topic": topic}))
    if mode == "delete_when_no_subscriptions" and cursors:
        return f"topic became active: subscription(s) {sorted(c.name for c in cursors)[:5]} exist"
    if mode == "delete_when_subscriptions_caught_up":
        last = last_entry(conn, topic)
        behind = [
            c.name for c in cursors if last is not None and (c.mark_delete_ledger, c.mark_delete_entry) < last
        ]
        if behind:
            return f"topic became active: subscription(s) {sorted(behind)[:5]} have a backlog"
    return None


def _partitions_left(conn: Any, name: str) -> list[str]:
    namespace = str(TopicName.parse(name).namespace_name)
    return [
        r.name
        for r in conn.execute(select(t.topics.c.name).where(t.topics.c.namespace == namespace))
        if TopicName.parse(r.name).partitioned_parent == name
    ]


def delete_partitioned_metadata(conn: Any, context: Any, name: str) -> tuple[str | None, dict[str, Any]]:
    """Delete a partitioned topic's metadata when no partition is left now (in the caller's transaction)."""
    row = conn.execute(select(t.partitioned_topics).where(t.partitioned_topics.c.name == name)).first()
    left = _partitions_left(conn, name)
    why = None
    if row is None:
        why = "partitioned topic metadata no longer exists"
    elif left:
        why = f"partition(s) {left[:5]} still exist"
    elif not context.broker["brokerDeleteInactivePartitionedTopicMetadataEnabled"]:
        why = "brokerDeleteInactivePartitionedTopicMetadataEnabled is now false"
    if why is not None:
        return why, {}
    conn.execute(t.partitioned_topics.delete().where(t.partitioned_topics.c.name == name))
    conn.execute(
        insert(t.deleted_topics).values(
            topic=name,
            kind="partitioned_metadata",
            saved_rows=json.dumps({"partitionedTopic": dict(row._mapping)}, sort_keys=True),
            run_id=context.run_id,
            deleted_as_of_ms=context.as_of_ms,
            purge_after_ms=context.purge_after_ms,
            status="pending",
        )
    )
    return None, {"partitions": row.partitions}


class DeleteTopic(ActionKind):
    def effect(self, row: Mapping[str, Any], view: PlanView) -> Effect:
        topic = row["topic"]
        own = view.ledgers(topic)
        freed = self.freed_bytes(row)
        return Effect(
            namespace_of(topic),
            (self.name, topic),
            topics=1,
            ledgers=len(own),
            entries=sum(int(r["entries"]) for r in own),
            bytes=sum(int(r["size"]) for r in own),
            freed=freed,
        )

    def listed_deletions(self, row: Mapping[str, Any], listed: Mapping[int, int]) -> list[int]:
        return list(listed)

    def check_topic(self, conn: Any, run: Any, topic: str, row: Mapping[str, Any]) -> str | None:
        # Pulsar's delete(failIfHasSubscriptions, failIfHasBacklogs, closeIfClientsConnected=false): re-checked
        # against the metadata now, not the snapshot.
        return topic_busy(conn, run, topic, row)

    def apply_in_topic(self, conn: Any, run: Any, tally: TopicTally, row: Mapping[str, Any]) -> None:
        deleted, size = delete_topic_rows(
            conn, tally.topic, run_id=run.run_id, as_of_ms=run.as_of_ms, purge_after_ms=run.purge_after_ms
        )
        tally.ledgers_deleted.extend(deleted)
        tally.bytes_deleted += size
        tally.add("topicsDeleted", [tally.topic])
        tally.note("topicDeleted", True)
        tally.note("reason", row.get("reason"))


class RefreshLastActive(ActionKind):
    def apply_in_topic(self, conn: Any, run: Any, tally: TopicTally, row: Mapping[str, Any]) -> None:
        tally.add("lastActiveRefreshed", stamp_last_active(conn, tally.topic, int(row["lastActiveMs"])))


class DeletePartitionedMetadata(ActionKind):
    def apply_after_topics(
        self, conn: Any, run: Any, row: Mapping[str, Any]
    ) -> tuple[str | None, dict[str, Any]]:
        return delete_partitioned_metadata(conn, run, row["topic"])


DELETE_TOPIC = DeleteTopic(
    "delete_topic",
    "an inactive topic deleted with every row it has (restorable until purge)",
    Changes.TOPICS,
    Frees.DATA,
    result_keys={"topicsDeleted": []},
)
REFRESH_LAST_ACTIVE = RefreshLastActive(
    "refresh_last_active",
    "a topic's lastActive stamped with the run's as-of (it had none)",
    Changes.STATE,
    held_forbidden=False,
    result_keys={"lastActiveRefreshed": 0},
)
DELETE_PARTITIONED_METADATA = DeletePartitionedMetadata(
    "delete_partitioned_metadata",
    "a partitioned topic's metadata deleted once no partition is left (after every topic of the plan)",
    Changes.METADATA,
    after_topics=True,
    result_keys={"partitionedMetadataDeleted": []},
)
