"""Inactive-topic GC for one topic (Pulsar ``PersistentTopic#checkGC``; docs/semantics.md §6), as Pulsar's own checks
read, in their order: the first check that keeps the topic names why. Plain Python over the topic's rows: the planner
calls it once per topic inside its one Spark pass (``spark_apps.gc.plan``), the unit tests call it alone.

0. the monitor runs only when the broker's ``brokerDeleteInactiveTopicsEnabled`` is true; system topics are never
   collected;
1. the resolved ``inactive_topic_policies`` must have ``deleteWhileInactive``;
2. active (-> lastActive = as-of, keep): ``delete_when_no_subscriptions``: any subscription (durable or a reader's)
   exists; ``delete_when_subscriptions_caught_up``: any subscription has a backlog; both modes: any producer or
   consumer connected;
3. inactive: delete only when as-of - lastActive >= maxInactiveDurationSeconds and retention time does not keep it
   (time < 0 keeps it forever, else kept while as-of - lastActive < retention time; size never counts). A topic
   whose lastActive is unknown is stamped as loaded now (Pulsar sets lastActive at topic load).

Partitioned metadata is decided over every partition at once (``spark_apps.gc.plan``): :func:`metadata_deletion`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from housekeeping.mechanisms.gc.actions import DELETE_PARTITIONED_METADATA, DELETE_TOPIC, REFRESH_LAST_ACTIVE
from spark_apps.shared.rows import Row, keep_held, text, utc_second, whole

NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
CAUGHT_UP = "delete_when_subscriptions_caught_up"
ACTIVE_KINDS = ("subscriptions", "backlog", "connected_clients", "last_active_unknown")


@dataclass
class TopicPlan:
    """One topic's rows of GC's plan tables."""

    decision: Row
    actions: list[Row]
    blockers: list[Row]


def activity(topic: Row, ledgers: list[Row], cursors: list[Row]) -> dict[str, Any]:
    """The topic's bytes, ledgers, subscriptions, subscriptions with a backlog (an entry exists after the
    mark-delete: Pulsar's non-precise ``getNumberOfEntriesInBacklog(false) > 0``) and connected clients."""
    written = [(r["ledgerId"], r["entries"] - 1) for r in ledgers if r["entries"] > 0]
    last_entry = max(written) if written else None
    backlog = sum(
        1
        for c in cursors
        if last_entry is not None and (c["markDeleteLedger"], c["markDeleteEntry"]) < last_entry
    )
    return {
        "bytes": sum(r["size"] for r in ledgers),
        "ledgers": len(ledgers),
        "subscriptions": len(cursors),
        "backlogSubscriptions": backlog,
        "subscriptionNames": sorted(c["name"] for c in cursors),
        "clients": topic["producers"] + topic["consumers"],
    }


def gc_kind(topic: Row, facts: dict[str, Any], inactive_for: int | None, gc_enabled: bool) -> str:
    """``checkGC``'s checks in its order: the first that keeps the topic names why (``inactive``: none did)."""
    mode = topic["inactiveDeleteMode"]
    by_mode = facts["subscriptions"] > 0 if mode == NO_SUBSCRIPTIONS else facts["backlogSubscriptions"] > 0
    max_inactive = topic["maxInactiveSeconds"]
    within_limit = None not in (inactive_for, max_inactive) and inactive_for < max_inactive * 1000
    retention = topic["retentionTimeMs"]
    checks = (
        (not gc_enabled, "gc_disabled"),
        (topic["isSystemTopic"], "system_topic"),
        (topic["deleteWhileInactive"] is False, "delete_while_inactive_off"),
        (by_mode and mode == NO_SUBSCRIPTIONS, "subscriptions"),
        (by_mode, "backlog"),
        (facts["clients"] > 0, "connected_clients"),
        (topic["lastActiveMs"] is None, "last_active_unknown"),
        (within_limit, "inactive_less_than_limit"),
        (retention < 0, "retention_time_infinite"),
        (inactive_for is not None and inactive_for < retention, "retention_time"),
    )
    return next((kind for keeps, kind in checks if keeps), "inactive")


def gc_reason(kind: str, topic: Row, facts: dict[str, Any], inactive_for: int | None) -> str:
    """Why (for a person), by ``kind``; ``inactive``: every check passed, the topic goes."""
    mode, max_inactive, source = (
        topic["inactiveDeleteMode"],
        topic["maxInactiveSeconds"],
        topic["inactivePolicySource"],
    )
    last_active = topic["lastActiveMs"]
    idle = f"inactive {text(whole(None if inactive_for is None else inactive_for / 1000))} s since lastActive {text(None if last_active is None else utc_second(last_active))}"
    policy = f"{text(mode)}, maxInactiveDurationSeconds {text(max_inactive)} ({text(source)})"
    retention_s = text(whole(None if topic["retentionTimeMs"] is None else topic["retentionTimeMs"] / 1000))
    reasons = {
        "gc_disabled": "brokerDeleteInactiveTopicsEnabled is false: the monitor does not run",
        "system_topic": "system topic: Pulsar's internal topics are never deleted for inactivity",
        "delete_while_inactive_off": f"deleteWhileInactive is false ({text(source)})",
        "subscriptions": "active: {} subscription(s) {} exist ({})".format(
            facts["subscriptions"], ", ".join(facts["subscriptionNames"][:5]), policy
        ),
        "backlog": f"active: {facts['backlogSubscriptions']} subscription(s) have a backlog ({policy})",
        "connected_clients": f"active: {topic['producers']} producer(s), {topic['consumers']} consumer(s) connected",
        "last_active_unknown": "lastActive unknown: stamped with this run's time, as Pulsar stamps a topic when it loads",
        "inactive_less_than_limit": f"{idle}; < maxInactiveDurationSeconds {text(max_inactive)} ({text(source)})",
        "retention_time_infinite": f"{idle}; retention time is infinite ({text(topic['retentionSource'])})",
        "retention_time": f"{idle}; within retention time {retention_s} s ({text(topic['retentionSource'])})",
    }
    if kind in reasons:
        return reasons[kind]
    return "; ".join(
        (
            idle,
            f">= maxInactiveDurationSeconds {text(max_inactive)}",
            f"no subscription blocks it ({text(mode)})",
            "no client connected",
            f"retention time {retention_s} s does not keep it ({text(topic['retentionSource'])})",
        )
    )


def plan_topic(
    topic: Row, ledgers: list[Row], cursors: list[Row], as_of_ms: int, gc_enabled: bool
) -> TopicPlan:
    """GC's plan of one topic: its decision (a held topic's kept), its actions and its blocker."""
    facts = activity(topic, ledgers, cursors)
    last_active = topic["lastActiveMs"]
    inactive_for = None if last_active is None else as_of_ms - last_active
    kind = gc_kind(topic, facts, inactive_for, gc_enabled)
    reason = gc_reason(kind, topic, facts, inactive_for)
    # checkGC stamps lastActive on a topic it finds active (and here, on one it sees for the first time); never
    # backward, so a backfill of an older date leaves a newer stamp alone.
    refresh = kind in ACTIVE_KINDS and (last_active is None or last_active < as_of_ms)
    decision = keep_held(
        {
            "topic": topic["topic"],
            "namespace": topic["namespace"],
            "partitionedTopic": topic["partitionedTopic"],
            "decision": "delete" if kind == "inactive" else "keep",
            "kind": kind,
            "reason": reason,
            "refreshLastActive": refresh,
            "bytes": facts["bytes"],
            "ledgers": facts["ledgers"],
            "subscriptions": facts["subscriptions"],
            "backlogSubscriptions": facts["backlogSubscriptions"],
            "producers": topic["producers"],
            "consumers": topic["consumers"],
            "lastActiveMs": last_active,
            "inactiveForMs": inactive_for,
            "inactiveDeleteMode": topic["inactiveDeleteMode"],
            "maxInactiveSeconds": topic["maxInactiveSeconds"],
            "deleteWhileInactive": topic["deleteWhileInactive"],
            "retentionTimeMs": topic["retentionTimeMs"],
            "isSystemTopic": topic["isSystemTopic"],
        },
        topic.get("heldBy"),
        decision="decision",
        keep="keep",
    )
    actions, blockers = [], []
    if decision["decision"] == "delete":
        actions.append(
            {
                "topic": decision["topic"],
                "action": DELETE_TOPIC.name,
                "bytes": decision["bytes"],
                "reason": decision["reason"],
                "lastActiveMs": last_active,
            }
        )
    else:
        blockers.append(
            {
                "topic": decision["topic"],
                "kind": decision["kind"],
                "detail": decision["reason"],
                "bytes": decision["bytes"],
                "ledgers": decision["ledgers"],
            }
        )
    if refresh:
        actions.append(
            {
                "topic": decision["topic"],
                "action": REFRESH_LAST_ACTIVE.name,
                "reason": f"lastActive := as-of ({decision['reason']})",
                "lastActiveMs": as_of_ms,
            }
        )
    return TopicPlan(decision, actions, blockers)


def metadata_deletion(partitioned: Row, deleted_partitions: int, enabled: bool) -> Row | None:
    """Pulsar's ``tryToDeletePartitionedMetadata``: a partitioned topic's metadata goes when the broker allows and
    this run deletes every partition that still exists (a held partitioned topic keeps it)."""
    if not enabled or partitioned.get("heldBy") is not None or deleted_partitions == 0:
        return None
    if deleted_partitions != partitioned["existingPartitions"]:
        return None
    return {
        "topic": partitioned["partitionedTopic"],
        "action": DELETE_PARTITIONED_METADATA.name,
        "reason": f"every existing partition ({deleted_partitions} of {partitioned['partitions']}) is deleted by "
        "this run and brokerDeleteInactivePartitionedTopicMetadataEnabled is true",
    }
