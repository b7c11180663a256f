"""Backlog quota's plan rows for one topic: the quota rules (``spark_apps.backlog.quota``) and what they ask of the
cursors, as the planner's one pass runs them topic by topic (``spark_apps.backlog.plan``).

Per topic: the durable subscriptions' backlogs (``spark_apps.shared.cursor_rule``); in precise mode the timestamp of
the slowest durable cursor's first unacknowledged entry (read); the rules' quota states and eviction steps; the
precise time eviction (the TTL search with ttl = 0.9 x limit on every durable subscription but the compaction
cursor); then one row per durable subscription (moved where its last eviction step or the search left it, or kept
and why), a ``move_cursor`` per move and a ``flag_backlog_quota`` per quota state. A held topic's cursors do not
move and its eviction steps are left out (its quota state is still recorded: flagging is neither a deletion nor a
cursor move). Plain Python: the unit tests call it alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.core.topic_ledgers import Ledger
from housekeeping.engine.documents import RunInfo
from housekeeping.mechanisms.backlog.actions import FLAG_BACKLOG_QUOTA
from spark_apps.backlog.quota import plan_topic as quota_rules
from spark_apps.shared.cursor_rule import (
    EntryReader,
    Layout,
    PositionFacts,
    cursor_blocker,
    expire,
    keep_cursor,
    move_actions,
    move_to,
    position_facts,
)
from spark_apps.shared.rows import Row, position_text, text


@dataclass
class TopicPlan:
    """One topic's rows of backlog's plan tables, and its quota states (for the summary)."""

    quota: Row
    steps: list[Row]
    subscriptions: list[Row]
    actions: list[Row]
    blockers: list[Row]
    states: list[Row]


@dataclass(frozen=True)
class Move:
    """Where an eviction left a cursor, under which quota, and why."""

    to_ledger: int
    to_entry: int
    quota_type: str
    why: str


def slowest_first_unacked_ts(
    layout: Layout, subscriptions: list[tuple[Row, PositionFacts]], read: EntryReader
) -> int | None:
    """Precise mode: the timestamp of the slowest durable cursor's (lowest mark-delete, then name) first
    unacknowledged entry, read from the entries (None when not stored)."""
    behind = [
        (c["markDeleteLedger"], c["markDeleteEntry"], c["name"], f)
        for c, f in subscriptions
        if f.backlog_entries > 0
    ]
    if not behind:
        return None
    facts = min(behind, key=lambda b: b[:3])[3]
    span = layout.holding(facts.acked)
    if span is None or not span.ledger["entriesStored"]:
        return None
    wanted = facts.acked - span.start
    return next((e["entryTs"] for e in read(span.id, span.ledger["size"]) if e["entryId"] == wanted), None)


def rule_facts(topic: Row, quota_states: list[Row], info: RunInfo, slowest_ts: int | None) -> dict[str, Any]:
    """The facts the quota rules read of a topic (a fact that is unknown left out, as the rules expect)."""
    broker = info.broker
    stored = {
        s["quotaType"]: {
            k: s[k]
            for k in ("policy", "exceeded", "limitValue", "measuredValue", "exceededSinceMs")
            if s[k] is not None
        }
        for s in quota_states
    }
    facts = {
        "topic": topic["topic"],
        "isSystemTopic": topic["isSystemTopic"],
        "sizeQuotaLimitBytes": topic["sizeQuotaLimitBytes"],
        "sizeQuotaPolicy": topic["sizeQuotaPolicy"],
        "timeQuotaLimitSeconds": topic["timeQuotaLimitSeconds"],
        "timeQuotaPolicy": topic["timeQuotaPolicy"],
        "asOfMs": int(info.as_of_ms),
        "precise": bool(broker["preciseTimeBasedBacklogQuotaCheck"]),
        "checkEnabled": bool(broker["backlogQuotaCheckEnabled"]),
        "slowestFirstUnackedTsMs": slowest_ts,
        "stored": stored or None,
    }
    return {k: v for k, v in facts.items() if v is not None}


def evictions(
    result: Mapping[str, Any],
    steps: list[Row],
    layout: Layout,
    subscriptions: list[tuple[Row, PositionFacts]],
    read: EntryReader,
) -> dict[str, list[Move]]:
    """Per cursor, where the eviction loop's last step left it, or the precise time eviction's search."""
    moves: dict[str, list[Move]] = {}
    last: dict[str, Row] = {}
    counts: dict[str, int] = {}
    for step in steps:
        last[step["cursor"]] = step
        counts[step["cursor"]] = counts.get(step["cursor"], 0) + 1
    for cursor, step in last.items():
        why = f"{step['quotaType']} eviction: {counts[cursor]} loop step(s), see plan/eviction_steps"
        moves.setdefault(cursor, []).append(Move(step["toLedger"], step["toEntry"], step["quotaType"], why))
    cutoff = result.get("preciseCutoffMs")
    if cutoff is not None:
        for cursor, facts in subscriptions:
            if cursor["name"] == COMPACTION_SUBSCRIPTION or facts.backlog_entries <= 0:
                continue
            target = expire(layout, facts.acked, cutoff, read)
            moved = move_to(layout, target.target_acked) if target.target_acked > facts.acked else None
            if moved is not None:
                why = (
                    f"precise message_age eviction (TTL search with ttl = 0.9 x limit): {target.stop_detail}"
                )
                moves.setdefault(cursor["name"], []).append(
                    Move(moved.to_ledger, moved.to_entry, "message_age", why)
                )
    return moves


def subscription_rows(
    topic: Row, cursor: Row, facts: PositionFacts, moves: list[Move], layout: Layout
) -> list[Row]:
    """One row per durable subscription (one per move, should two evictions both move it)."""
    base = {
        "topic": topic["topic"],
        "namespace": topic["namespace"],
        "subscription": cursor["name"],
        "consumers": cursor["consumers"],
        "from": position_text(cursor["markDeleteLedger"], cursor["markDeleteEntry"]),
    }
    if not moves:
        compaction = cursor["name"] == COMPACTION_SUBSCRIPTION
        kind = (
            "compaction_subscription"
            if compaction
            else "no_backlog"
            if facts.backlog_entries <= 0
            else "not_evicted"
        )
        reason = (
            "the compaction cursor is never evicted"
            if compaction
            else "no eviction applies to this subscription"
        )
        return [
            {
                **base,
                "to": None,
                "decision": "keep",
                "kind": kind,
                "reason": reason,
                "backlogEntries": facts.backlog_entries,
                "backlogBytes": facts.backlog_bytes,
                "entriesEvicted": 0,
                "bytesEvicted": 0,
                "backlogBytesAfter": facts.backlog_bytes,
                "oldestRemainingLedgerTsMs": facts.oldest_backlog_ledger_ts,
            }
        ]
    rows = []
    for move in moves:
        after = position_facts(layout, move.to_ledger, move.to_entry)
        rows.append(
            {
                **base,
                "to": position_text(move.to_ledger, move.to_entry),
                "decision": "move",
                "kind": f"evicted_{move.quota_type}",
                "reason": move.why,
                "backlogEntries": facts.backlog_entries,
                "backlogBytes": facts.backlog_bytes,
                "entriesEvicted": after.acked - facts.acked,
                "bytesEvicted": facts.backlog_bytes - after.backlog_bytes,
                "backlogBytesAfter": after.backlog_bytes,
                "oldestRemainingLedgerTsMs": after.oldest_backlog_ledger_ts,
            }
        )
    return rows


def flag_action(topic: str, state: Row) -> Row:
    if state["exceeded"]:
        reason = (
            f"{text(state['quotaType'])} quota exceeded: measured {text(state['measuredValue'])} >= limit "
            f"{text(state['limitValue'])} ({text(state['policy'])}); producers are refused while exceeded"
        )
    else:
        reason = f"{text(state['quotaType'])} quota state cleared: {text(state['why'])}"
    return {
        "topic": topic,
        "action": FLAG_BACKLOG_QUOTA.name,
        "from": "exceeded" if state["wasExceeded"] else "clear",
        "to": "exceeded" if state["exceeded"] else "clear",
        "reason": reason,
        "quotaType": state["quotaType"],
        "policy": state["policy"],
        "exceeded": state["exceeded"],
        "limitValue": state["limitValue"],
        "measuredValue": state["measuredValue"],
        "exceededSinceMs": state["exceededSinceMs"],
    }


def plan_topic(
    topic: Row,
    ledgers: list[Row],
    cursors: list[Row],
    quota_states: list[Row],
    info: RunInfo,
    read: EntryReader,
) -> TopicPlan:
    """Backlog's plan of one topic (its subscriptions only when it has ledgers: no position to measure a backlog
    from otherwise)."""
    durable = sorted((c for c in cursors if c["durable"]), key=lambda c: c["name"])
    layout = Layout.of(ledgers)
    subscriptions = (
        [(c, position_facts(layout, c["markDeleteLedger"], c["markDeleteEntry"])) for c in durable]
        if ledgers
        else []
    )
    precise = bool(info.broker["preciseTimeBasedBacklogQuotaCheck"])
    timed = [(c, f) for c, f in subscriptions if topic["timeQuotaLimitSeconds"] > 0]
    slowest_ts = slowest_first_unacked_ts(layout, timed, read) if precise else None
    result = quota_rules(
        rule_facts(topic, quota_states, info, slowest_ts),
        [Ledger(r["ledgerId"], r["entries"], r["size"], r["closedAtMs"]) for r in ledgers],
        {c["name"]: (c["markDeleteLedger"], c["markDeleteEntry"]) for c in durable},
    )
    steps = [{"topic": topic["topic"], "step": i, **s} for i, s in enumerate(result["steps"], start=1)]
    moves = evictions(result, steps, layout, subscriptions, read)
    held_by = topic.get("heldBy")
    rows = [
        keep_cursor(row, held_by, "entriesEvicted", "bytesEvicted")
        for cursor, facts in subscriptions
        for row in subscription_rows(topic, cursor, facts, moves.get(cursor["name"], []), layout)
    ]
    actions = move_actions(
        rows,
        "bytesEvicted",
        lambda row: {
            "quotaType": row["kind"].removeprefix("evicted_"),
            "policy": "consumer_backlog_eviction",
        },
    )
    states = [{"topic": topic["topic"], **s} for s in result["states"]]
    quota = {
        "topic": topic["topic"],
        "namespace": topic["namespace"],
        "isSystemTopic": topic["isSystemTopic"],
        "sizeQuotaLimitBytes": topic["sizeQuotaLimitBytes"],
        "sizeQuotaPolicy": topic["sizeQuotaPolicy"],
        "timeQuotaLimitSeconds": topic["timeQuotaLimitSeconds"],
        "timeQuotaPolicy": topic["timeQuotaPolicy"],
        **{
            k: result.get(k)
            for k in (
                "backlogBytes",
                "sizeExceeded",
                "oldestBacklogTsMs",
                "oldestBacklogAgeSeconds",
                "timeExceeded",
                "handled",
                "note",
            )
        },
        "asOfMs": int(info.as_of_ms),
    }
    return TopicPlan(
        quota,
        [] if held_by is not None else steps,
        rows,
        actions + [flag_action(topic["topic"], s) for s in states],
        [b for b in map(cursor_blocker, rows) if b is not None],
        states,
    )
