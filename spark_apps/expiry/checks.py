"""Message expiry's gate checks over one topic, re-derived from the snapshot and, where timestamps decide, from the
entries themselves, apart from the planner: plain Python over the topic's rows (``spark_apps.expiry.gate`` runs
them in one Spark pass; the unit tests call them alone).

Every ``move_cursor`` passes the common cursor-move checks (``spark_apps.shared.move_checks``); TTL is on; every
newly acknowledged entry is expired (its ledger closed before the cutoff, or its timestamp is before the cutoff:
read from the entries unless the ledger's newest timestamp already is); Pulsar's connected-consumer guard holds (a
small backlog with consumers connected moves only when its oldest unacknowledged entry, read again here, is older
than the age factor x TTL).
"""

from __future__ import annotations

import math

from housekeeping.engine.documents import RunInfo
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from spark_apps.shared.move_checks import (
    MOVE_COMMON_CHECKS,
    Entries,
    TopicFacts,
    common_move_checks,
    entries_expired,
    position,
)
from spark_apps.shared.rows import Row

EXPIRY_CHECKS = (
    *MOVE_COMMON_CHECKS,
    "ttl_enabled",
    "acknowledged_entries_expired",
    "consumer_guard_allows",
)


def guard_allows(facts: TopicFacts, move: Row, info: RunInfo, read: Entries) -> bool:
    """``isOldestMessageExpired`` where Pulsar's guard applies (consumers connected, backlog below the minimum):
    the oldest unacknowledged entry's publish time + (long)(ttl x factor) s is before the as-of."""
    broker = info.broker
    cursor = facts.cursors.get(move["subscription"])
    acked = facts.entries_at_or_before(*position(move["from"]))
    consumers = None if cursor is None else cursor["consumers"]
    backlog = None if acked is None else facts.entries - acked
    guarded = (
        None not in (consumers, backlog)
        and consumers > 0
        and backlog < int(broker["housekeepingExpiryGuardMinimumBacklog"])
    )
    if not guarded:
        return True
    oldest = facts.entry_at(acked)  # type: ignore[arg-type]
    publish_time = None
    if oldest is not None and oldest[0]["entriesStored"]:
        ledger, entry_id = oldest
        publish_time = next(
            (e["publishTime"] for e in read(ledger["ledgerId"], ledger["size"]) if e["entryId"] == entry_id),
            None,
        )
    ttl = facts.value("messageTtlSeconds")
    if publish_time is None or ttl is None:
        return False
    threshold_ms = math.floor(ttl * float(broker["housekeepingExpiryGuardAgeFactor"])) * 1000
    return int(info.as_of_ms) > publish_time + threshold_ms


def check_topic(facts: TopicFacts, actions: list[Row], info: RunInfo, read: Entries) -> dict[str, list[Row]]:
    """Every check frame's rows of one topic (of the snapshot, or only named by the plan)."""
    ttl = facts.value("messageTtlSeconds")
    cutoff_ms = None if ttl is None else int(info.as_of_ms) - ttl * 1000
    moves = []
    for move in (a for a in actions if a["action"] == MOVE_CURSOR.name):
        moves.append(
            {
                "topic": move["topic"],
                "name": move["subscription"],
                "from": move["from"],
                "to": move["to"],
                **common_move_checks(facts, move, allow_ledger_start=False),
                "ttl_enabled": ttl is not None and ttl > 0,
                "acknowledged_entries_expired": entries_expired(facts, move, cutoff_ms, read),
                "consumer_guard_allows": guard_allows(facts, move, info, read),
            }
        )
    return {"actions": [{"topic": a["topic"], "action": a["action"]} for a in actions], "cursor_moves": moves}
