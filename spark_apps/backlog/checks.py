"""Backlog quota's gate checks over one topic, re-derived from the snapshot apart from the planner (and, in precise
mode, from the entries themselves): plain Python over the topic's rows (``spark_apps.backlog.gate`` runs them in
one Spark pass; the unit tests call them alone).

- quota state: size and time exceeded as Pulsar measures them on the slowest durable cursor (system topics exempt,
  read from the name), with the gate's own arithmetic (``TopicFacts``; ``housekeeping.core.topic_ledgers`` is the
  planner's);
- every ``move_cursor``: the common cursor-move checks (``spark_apps.shared.move_checks``; a ``(L, -1)`` target is
  legal), the quota acted on is exceeded and its policy is consumer_backlog_eviction, and the move is justified:
  it starts where the cursor's first eviction step starts and ends where its last one ends, or (precise time
  eviction) it acknowledges only entries older than 0.9 x the limit;
- every eviction step replays Pulsar's loops: size steps move the slowest cursor (never the same one twice in a row,
  and after the first only one strictly behind where the step before left its cursor: Pulsar's cursor heap keeps a
  cursor skipped onto another's position as the slowest, and the loop then stops) by exactly
  (int)((B - 0.9 L) / B x entriesInBacklog) entries from a backlog B > 0.9 L (the first from B >= L); time steps
  skip exactly one ledger closed longer ago than the limit (or no longer listed) to the next one's start, never
  past the last entry unless the cursor had consumed all of its ledger and lands on the ledger right after the last
  entry's (the mark-delete Pulsar's cursor accepts); no step moves the compaction cursor, and each starts where
  its cursor is after the steps before it;
- every quota-state flag agrees with the re-derived exceeded flag (recorded with the check switched off too, as
  producer admission reads it), and only producer policies are flagged exceeded; no durable cursor measures a
  backlog of 0, which a size limit of 0 exceeds.
"""

from __future__ import annotations

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.documents import RunInfo
from housekeeping.mechanisms.backlog.actions import FLAG_BACKLOG_QUOTA
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from spark_apps.shared.move_checks import (
    MOVE_COMMON_CHECKS,
    Entries,
    TopicFacts,
    common_move_checks,
    entries_expired,
    position,
)
from spark_apps.shared.rows import Row, struct_key
from spark_apps.shared.topic_names import name_facts

EVICTION_POLICY = "consumer_backlog_eviction"
PRODUCER_POLICIES = ("producer_request_hold", "producer_exception")
MOVE_CHECKS = (*MOVE_COMMON_CHECKS, "quota_exceeded_with_eviction_policy", "move_is_justified")
STEP_CHECKS = (
    "not_compaction_subscription",
    "step_starts_where_cursor_is",
    "size_step_moves_the_slowest_cursor",
    "not_same_cursor_twice_in_a_row",
    "previous_cursor_no_longer_the_slowest",
    "step_follows_the_quota_rule",
)
FLAG_CHECKS = (
    "topic_in_snapshot",
    "exceeded_flag_only_for_producer_policies",
    "flag_matches_rederived_quota_state",
)


def estimated_backlog(facts: TopicFacts, ledger_id: int | None, entry_id: int | None) -> int | None:
    """Pulsar's estimated backlog bytes from a mark-delete (``getEstimatedBacklogSize``): the ledgers after it, and
    the part of its own ledger after it by average entry size (None: the topic has no ledger)."""
    if not facts.ledgers:
        return None
    total = 0
    for ledger in facts.ledgers:
        size, entries = ledger["size"], ledger["entries"]
        if ledger_id is not None and ledger["ledgerId"] > ledger_id:
            total += size
        elif ledger["ledgerId"] == ledger_id:
            if entries <= 0 or entry_id is None:
                consumed = 0
            elif entries == entry_id + 1:
                consumed = size
            else:
                consumed = (entry_id + 1) * (size // entries) if entry_id >= 0 else 0
            total += size - consumed
    return total


class QuotaState:
    """The topic's quota state as the gate measures it."""

    def __init__(self, facts: TopicFacts, info: RunInfo, read: Entries) -> None:
        broker = info.broker
        topic = facts.topic
        self.known = topic is not None
        self.enabled = False
        durable = [c for c in facts.cursors.values() if c["durable"]]
        slowest = min(((c["markDeleteLedger"], c["markDeleteEntry"]) for c in durable), default=None)
        self.slowest = slowest
        if not self.known:
            self.size_exceeded = self.time_exceeded = None
            return
        enabled = bool(broker["backlogQuotaCheckEnabled"])
        exempt = name_facts(topic["topic"])["isSystemTopic"]
        backlog = estimated_backlog(facts, *slowest) if slowest else None
        size_limit, time_limit = topic["sizeQuotaLimitBytes"], topic["timeQuotaLimitSeconds"]
        self.enabled = enabled
        self.size_exceeded = bool(exempt is False and size_limit >= 0 and (backlog or 0) >= size_limit)
        age_ts = None
        acked = facts.entries_at_or_before(*slowest) if slowest else None
        holding = None if acked is None else facts.entry_at(acked)
        if holding is not None:
            ledger, entry_id = holding
            if broker["preciseTimeBasedBacklogQuotaCheck"]:
                if ledger["entriesStored"]:
                    age_ts = next(
                        (
                            e["entryTs"]
                            for e in read(ledger["ledgerId"], ledger["size"])
                            if e["entryId"] == entry_id
                        ),
                        None,
                    )
            else:
                age_ts = ledger["closedAtMs"]
        self.time_exceeded = bool(
            exempt is False
            and time_limit > 0
            and age_ts is not None
            and int(info.as_of_ms) > age_ts + time_limit * 1000
        )

    def acted_on(self, facts: TopicFacts, quota_type: str | None) -> bool:
        """The quota a move names is the one Pulsar acts on (size first, else time) with the eviction policy, while
        the check is on."""
        if not self.enabled:
            return False
        if quota_type == "destination_storage":
            return self.size_exceeded is True and facts.value("sizeQuotaPolicy") == EVICTION_POLICY
        if quota_type == "message_age":
            return (
                self.size_exceeded is False
                and self.time_exceeded is True
                and facts.value("timeQuotaPolicy") == EVICTION_POLICY
            )
        return False


def move_rows(
    facts: TopicFacts,
    state: QuotaState,
    moves: list[Row],
    steps: list[Row],
    info: RunInfo,
    read: Entries,
) -> list[Row]:
    precise = bool(info.broker["preciseTimeBasedBacklogQuotaCheck"])
    rows = []
    for move in moves:
        (from_l, from_e), (to_l, to_e) = position(move["from"]), position(move["to"])
        own = sorted(
            (s for s in steps if s["cursor"] == move["subscription"]), key=lambda s: struct_key(s["step"])
        )
        if precise and move["quotaType"] == "message_age":
            limit = facts.value("timeQuotaLimitSeconds")
            cutoff = None if limit is None else int(info.as_of_ms) - int(limit * 0.9) * 1000
            justified = entries_expired(facts, move, cutoff, read)
        else:
            justified = (
                bool(own)
                and None not in (from_l, from_e, to_l, to_e)
                and (own[-1]["toLedger"], own[-1]["toEntry"]) == (to_l, to_e)
                and (own[0]["fromLedger"], own[0]["fromEntry"]) == (from_l, from_e)
            )
        rows.append(
            {
                "topic": move["topic"],
                "name": move["subscription"],
                "from": move["from"],
                "to": move["to"],
                "quotaType": move["quotaType"],
                **common_move_checks(facts, move, allow_ledger_start=True),
                "quota_exceeded_with_eviction_policy": state.acted_on(facts, move["quotaType"]),
                "move_is_justified": justified,
            }
        )
    return rows


def _size_step_ok(facts: TopicFacts, step: Row, backlog: int | None, limit: int | None) -> bool:
    """A size step skips what brings the backlog to 90 % of the limit, from a backlog over it (the first step: at or
    over the limit itself)."""
    acked_from = facts.entries_at_or_before(step["fromLedger"], step["fromEntry"])
    acked_to = facts.entries_at_or_before(step["toLedger"], step["toEntry"])
    if None in (backlog, limit, acked_from, acked_to, step["step"]) or not backlog:
        return False
    target = limit * 0.9
    expected_skip = int((backlog - target) / backlog * (facts.entries - acked_from))
    return (
        backlog > target
        and expected_skip > 0
        and acked_to - acked_from == expected_skip
        and (step["step"] > 1 or backlog >= limit)
    )


def _mark_delete_accepted(facts: TopicFacts, step: Row) -> bool:
    """The step's target is one Pulsar's cursor accepts: at or before the topic's last entry, or in the ledger right
    after the last entry's when the cursor had consumed every entry of its own listed ledger."""
    last_ledger, last_entry = facts.last
    if last_ledger is None:
        return False
    if struct_key(step["toLedger"], step["toEntry"]) <= struct_key(last_ledger, last_entry):
        return True
    own = facts.by_id.get(step["fromLedger"])
    after_last = min((r["ledgerId"] for r in facts.ledgers if r["ledgerId"] > last_ledger), default=None)
    return (
        own is not None
        and step["fromEntry"] is not None
        and step["fromEntry"] + 1 >= own["entries"]
        and after_last is not None
        and step["toLedger"] == after_last
    )


def _time_step_ok(facts: TopicFacts, step: Row, as_of_ms: int, limit: int | None) -> bool:
    """A time step moves to the start of the next ledger, past a ledger closed longer ago than the limit, to a
    mark-delete the cursor accepts."""
    after = step["fromLedger"]
    later = [r["ledgerId"] for r in facts.ledgers if after is not None and r["ledgerId"] > after]
    start = facts.by_id.get(step["fromLedger"])
    closed = None if start is None else start["closedAtMs"]
    old_enough = start is None or (
        closed is not None and limit is not None and as_of_ms - closed > limit * 1000
    )
    return (
        step["toEntry"] == -1
        and later != []
        and step["toLedger"] == min(later)
        and old_enough
        and _mark_delete_accepted(facts, step)
    )


def step_rows(facts: TopicFacts, steps: list[Row], as_of_ms: int) -> list[Row]:
    """Each eviction step replayed: where every durable cursor is just before it (its latest earlier step's target,
    else its snapshot mark-delete)."""
    durable = {
        n: (c["markDeleteLedger"], c["markDeleteEntry"]) for n, c in facts.cursors.items() if c["durable"]
    }
    by_number = {s["step"]: s for s in steps}
    rows = []
    for step in steps:
        positions = dict(durable)
        earlier_steps = (
            s for s in steps if None not in (s["step"], step["step"]) and s["step"] < step["step"]
        )
        for earlier in sorted(earlier_steps, key=lambda s: s["step"]):
            if earlier["cursor"] in positions:
                positions[earlier["cursor"]] = (earlier["toLedger"], earlier["toEntry"])
        own = positions.get(step["cursor"])
        slowest = min((struct_key(*p) for p in positions.values()), default=None)
        previous = by_number.get(step["step"] - 1) if step["step"] is not None else None
        is_size = step["quotaType"] == "destination_storage"
        from_key = struct_key(step["fromLedger"], step["fromEntry"])
        backlog = estimated_backlog(facts, step["fromLedger"], step["fromEntry"])
        rows.append(
            {
                "topic": step["topic"],
                "step": step["step"],
                "cursor": step["cursor"],
                "not_compaction_subscription": step["cursor"] not in (None, COMPACTION_SUBSCRIPTION),
                "step_starts_where_cursor_is": own is not None
                and None not in (*own, step["fromLedger"], step["fromEntry"])
                and own == (step["fromLedger"], step["fromEntry"]),
                "size_step_moves_the_slowest_cursor": (not is_size)
                or (slowest is not None and from_key <= slowest),
                "not_same_cursor_twice_in_a_row": (not is_size)
                or previous is None
                or previous["cursor"] != step["cursor"],
                "previous_cursor_no_longer_the_slowest": (not is_size)
                or previous is None
                or struct_key(previous["toLedger"], previous["toEntry"]) > from_key,
                "step_follows_the_quota_rule": (
                    _size_step_ok(facts, step, backlog, facts.value("sizeQuotaLimitBytes"))
                    if is_size
                    else step["quotaType"] == "message_age"
                    and _time_step_ok(facts, step, as_of_ms, facts.value("timeQuotaLimitSeconds"))
                ),
            }
        )
    return rows


def flag_rows(state: QuotaState, flags: list[Row]) -> list[Row]:
    rows = []
    for flag in flags:
        rederived = state.size_exceeded if flag["quotaType"] == "destination_storage" else state.time_exceeded
        rows.append(
            {
                "topic": flag["topic"],
                "quotaType": flag["quotaType"],
                "topic_in_snapshot": state.known,
                "exceeded_flag_only_for_producer_policies": flag["exceeded"] is False
                or flag["policy"] in PRODUCER_POLICIES,
                "flag_matches_rederived_quota_state": None not in (flag["exceeded"], rederived)
                and flag["exceeded"] == rederived,
            }
        )
    return rows


def check_topic(
    facts: TopicFacts, actions: list[Row], steps: list[Row], info: RunInfo, read: Entries
) -> dict[str, list[Row]]:
    """Every check frame's rows of one topic (of the snapshot, or only named by the plan)."""
    state = QuotaState(facts, info, read)
    moves = [a for a in actions if a["action"] == MOVE_CURSOR.name]
    flags = [a for a in actions if a["action"] == FLAG_BACKLOG_QUOTA.name]
    return {
        "actions": [{"topic": a["topic"], "action": a["action"]} for a in actions],
        "cursor_moves": move_rows(facts, state, moves, steps, info, read),
        "eviction_steps": step_rows(facts, steps, int(info.as_of_ms)),
        "quota_flags": flag_rows(state, flags),
    }
