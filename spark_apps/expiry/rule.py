"""Message expiry (TTL) for one topic, Pulsar ``PersistentMessageExpiryMonitor`` with a safer entry search
(docs/semantics.md §4). Plain Python over the topic's rows: the planner calls it once per topic inside its one Spark
pass (``spark_apps.expiry.plan``), the unit tests call it alone with entries of their own.

Per durable subscription:

1. TTL = topic > namespace ``message_ttl_in_seconds`` > broker ``ttlDurationDefaultInSeconds``; 0 = off. System
   topics and the compaction subscription ``__compaction`` are never expired; readers are not subscriptions with a
   mark-delete that TTL acknowledges.
2. Nothing to do with no backlog. Pulsar's guard: with connected consumers and a backlog below
   ``housekeepingExpiryGuardMinimumBacklog`` (1000) entries, expire only when the oldest unacknowledged entry's
   publish time is older than ``housekeepingExpiryGuardAgeFactor`` (1.5) x TTL (``isOldestMessageExpired``; an
   entry that cannot be read is not old).
3. cutoff = asOf - TTL; expired = timestamp < cutoff (strict, as ``MessageImpl#isEntryExpired``).
4. Move the mark-delete to the end of the run of expired entries right after it (``spark_apps.shared.cursor_rule``).

A held topic's subscriptions keep their mark-delete (the reason names the hold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.documents import RunInfo
from spark_apps.shared.cursor_rule import (
    EntryReader,
    Layout,
    cursor_blocker,
    expire,
    keep_cursor,
    move_actions,
    move_to,
    position_facts,
)
from spark_apps.shared.rows import Row, java_fixed, position_text, text, utc_millis


@dataclass
class TopicPlan:
    """One topic's rows of expiry's plan tables."""

    subscriptions: list[Row]
    actions: list[Row]
    blockers: list[Row]


@dataclass(frozen=True)
class Guard:
    """Pulsar's connected-consumer guard settings (broker settings of the run)."""

    min_backlog: int
    age_factor: float

    @classmethod
    def of(cls, info: RunInfo) -> Guard:
        broker = info.broker
        return cls(
            int(broker["housekeepingExpiryGuardMinimumBacklog"]),
            float(broker["housekeepingExpiryGuardAgeFactor"]),
        )


def guard_blocks(
    layout: Layout, acked: int, ttl: int, as_of_ms: int, guard: Guard, read: EntryReader
) -> tuple[bool, int | None]:
    """``PersistentTopic#isOldestMessageExpired`` on the oldest unacknowledged entry (its publish time):
    ``now > publishTime + (long)(ttl * factor) s``; (blocks, that publish time)."""
    span = layout.holding(acked)
    if span is None:
        return False, None
    publish_time = None
    if span.ledger["entriesStored"]:
        wanted = acked - span.start
        publish_time = next(
            (e["publishTime"] for e in read(span.id, span.ledger["size"]) if e["entryId"] == wanted), None
        )
    threshold_ms = math.floor(ttl * guard.age_factor) * 1000
    old_enough = publish_time is not None and as_of_ms > publish_time + threshold_ms
    return not old_enough, publish_time


def expiry_kind(topic: Row, name: str, backlog_entries: int, blocked: bool, moved: bool) -> str:
    ttl = topic["messageTtlSeconds"]
    checks = (
        (topic["isSystemTopic"], "system_topic"),
        (name == COMPACTION_SUBSCRIPTION, "compaction_subscription"),
        (ttl <= 0, "ttl_disabled"),
        (backlog_entries <= 0, "no_backlog"),
        (blocked, "guard_consumers_connected"),
        (moved, "expired"),
    )
    return next((kind for holds, kind in checks if holds), "nothing_expired")


def subscription_row(
    topic: Row, cursor: Row, layout: Layout, as_of_ms: int, guard: Guard, read: EntryReader
) -> Row:
    """One durable subscription's decision."""
    ttl, source = topic["messageTtlSeconds"], topic["messageTtlSource"]
    cutoff_ms = as_of_ms - ttl * 1000
    mark_delete = position_text(cursor["markDeleteLedger"], cursor["markDeleteEntry"])
    facts = position_facts(layout, cursor["markDeleteLedger"], cursor["markDeleteEntry"])
    eligible = (
        ttl > 0
        and not topic["isSystemTopic"]
        and cursor["name"] != COMPACTION_SUBSCRIPTION
        and facts.backlog_entries > 0
    )
    target = expire(layout, facts.acked, cutoff_ms, read) if eligible else None
    blocked, publish_time = False, None
    if eligible and cursor["consumers"] > 0 and facts.backlog_entries < guard.min_backlog:
        blocked, publish_time = guard_blocks(layout, facts.acked, ttl, as_of_ms, guard, read)
    target_acked = facts.acked if target is None or blocked else target.target_acked
    move = move_to(layout, target_acked) if target_acked > facts.acked else None
    kind = expiry_kind(topic, cursor["name"], facts.backlog_entries, blocked, move is not None)
    ttl_text = f"TTL {ttl} s ({text(source)})"
    cutoff_text = utc_millis(cutoff_ms)
    stop_detail = None if target is None else target.stop_detail
    reasons = {
        "system_topic": "system topic: message expiry never runs on it (SystemTopic)",
        "compaction_subscription": "the compaction subscription is never expired",
        "ttl_disabled": None if source is None else f"TTL is 0 (off) ({source})",
        "no_backlog": "no backlog: nothing after the mark-delete",
        "guard_consumers_connected": (
            f"{cursor['consumers']} consumer(s) connected, backlog {facts.backlog_entries} < {guard.min_backlog} "
            "entries and the oldest unacknowledged entry (publish time "
            f"{'unreadable' if publish_time is None else publish_time}) is not older than "
            f"{java_fixed(guard.age_factor, 1)} x TTL"
        ),
        "expired": f"{ttl_text}, cutoff {cutoff_text}: {target_acked - facts.acked} entries after mark-delete "
        f"{mark_delete} are expired; stopped: {text(stop_detail)}",
        "nothing_expired": f"{ttl_text}, cutoff {cutoff_text}: nothing to expire: {text(stop_detail)}",
    }
    return {
        "topic": topic["topic"],
        "namespace": topic["namespace"],
        "subscription": cursor["name"],
        "consumers": cursor["consumers"],
        "from": mark_delete,
        "to": None if move is None else position_text(move.to_ledger, move.to_entry),
        "decision": "keep" if move is None else "move",
        "kind": kind,
        "reason": reasons[kind],
        "messageTtlSeconds": ttl,
        "cutoffMs": cutoff_ms,
        "backlogEntries": facts.backlog_entries,
        "backlogBytes": facts.backlog_bytes,
        "entriesExpired": 0 if move is None else target_acked - facts.acked,
        "bytesExpired": 0 if move is None else facts.backlog_bytes - move.backlog_bytes_after,
        "backlogBytesAfter": facts.backlog_bytes if move is None else move.backlog_bytes_after,
        "oldestRemainingTsMs": (
            target.oldest_remaining_ts if target is not None and facts.backlog_entries > 0 else None
        ),
        "oldestRemainingLedgerTsMs": (
            facts.oldest_backlog_ledger_ts if move is None else move.oldest_ledger_ts_after
        ),
        "asOfMs": as_of_ms,
    }


def plan_topic(
    topic: Row, ledgers: list[Row], cursors: list[Row], info: RunInfo, read: EntryReader
) -> TopicPlan:
    """Expiry's plan of one topic: a row per durable subscription (none on a topic without ledgers: no position to
    measure a backlog from), a ``move_cursor`` per subscription moved, a blocker per kept one with a backlog."""
    if not ledgers:
        return TopicPlan([], [], [])
    layout, as_of_ms, guard = Layout.of(ledgers), int(info.as_of_ms), Guard.of(info)
    rows = [
        keep_cursor(
            subscription_row(topic, cursor, layout, as_of_ms, guard, read),
            topic.get("heldBy"),
            "entriesExpired",
            "bytesExpired",
        )
        for cursor in sorted(cursors, key=lambda c: c["name"])
        if cursor["durable"]
    ]
    actions = move_actions(rows, "bytesExpired")
    blockers = [b for b in map(cursor_blocker, rows) if b is not None]
    return TopicPlan(rows, actions, blockers)
