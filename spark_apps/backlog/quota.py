"""Backlog quota rules per topic (Pulsar ``BacklogQuotaManager``, ``PersistentTopic`` quota checks), as pure
Python over one topic's ledgers and durable cursors. The planner's one pass runs :func:`plan_topic` once per topic
(``spark_apps.backlog.rule``); tests call it directly.

Exceeded (docs/semantics.md §5), measured on the slowest durable cursor, readers never count:

- destination_storage: limit >= 0 and estimated backlog bytes >= limit (note ``>=``);
- message_age: limit > 0 and asOf > ts + limit, ts = the close time of the ledger holding the first
  unacknowledged entry (default; no estimate while that is the open ledger) or, with
  ``preciseTimeBasedBacklogQuotaCheck``, that entry's timestamp.

With no durable cursor the estimate is 0, so a size limit of 0 is exceeded. Size is checked first; only when it is
not exceeded is time checked and acted on (``monitorBacklogQuota``). consumer_backlog_eviction moves durable
cursors (steps below); the producer policies only record state. With ``backlogQuotaCheckEnabled`` off the monitor
does not run (no eviction), but producer admission (``ServerCnx#handleProducer``) still checks the quotas, so the
states are recorded all the same.

Deliberate differences (docs/semantics.md §11): the compaction cursor ``__compaction`` is never moved: the size
loop stops when it is the slowest (moving others cannot lower the measured backlog) and the time loop
evicts the other cursors as Pulsar would and leaves it; a mark-delete in a ledger already trimmed is
measured from the next ledger (Pulsar's estimate answers "not exceeded" there); the precise time eviction moves
durable subscriptions only, never a reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.core.topic_ledgers import Ledger, Position, TopicLedgers

SIZE_REDUCTION_FACTOR = 0.9
PRODUCER_POLICIES = ("producer_request_hold", "producer_exception")


def slowest(positions: dict[str, Position], exclude: tuple[str, ...] = ()) -> str | None:
    """The durable cursor with the lowest mark-delete (ties: by name, so plans are deterministic)."""
    candidates = [(pos, name) for name, pos in positions.items() if name not in exclude]
    return min(candidates)[1] if candidates else None


def still_slowest(positions: dict[str, Position], moved: str, exclude: tuple[str, ...] = ()) -> str | None:
    """The slowest cursor after ``moved`` (the slowest) advanced, as Pulsar's cursor container answers it
    (``ManagedCursorContainerImpl#cursorUpdated``): its heap sifts a moved cursor down only past a strictly smaller
    position, so ``moved`` stays the slowest unless another cursor is now strictly behind it; then the lowest of
    those (ties by name)."""
    behind = {n: p for n, p in positions.items() if n not in exclude and p < positions[moved]}
    return slowest(behind) if behind else moved


@dataclass
class Step:
    cursor: str
    from_position: Position
    to_position: Position
    backlog_bytes_before: int
    entries_skipped: int
    why: str


@dataclass
class Eviction:
    steps: list[Step] = field(default_factory=list)
    stopped: str = ""


def evict_for_size(ledgers: TopicLedgers, cursors: dict[str, Position], limit_bytes: int) -> Eviction:
    """``BacklogQuotaManager#dropBacklogForSizeLimit``: skip entries on the slowest cursor until the estimated
    backlog is <= 90% of the limit; stop when nothing is skipped, no cursor is left or the same cursor is
    the slowest twice in a row (a cursor skipped onto another's position stays the slowest: see
    :func:`still_slowest`)."""
    positions = dict(cursors)
    target = SIZE_REDUCTION_FACTOR * limit_bytes
    result = Eviction()
    previous: str | None = None
    name = slowest(positions)
    backlog = ledgers.estimated_backlog_bytes(positions[name]) if name else 0
    while backlog > target:
        if name is None:
            result.stopped = "no durable cursor"
            break
        if name == COMPACTION_SUBSCRIPTION:
            result.stopped = "the compaction cursor is the slowest and is never evicted"
            break
        factor = (backlog - target) / backlog
        if name == previous:
            result.stopped = f"cursors not progressing (cursor {name!r} is still the slowest)"
            break
        entries_in_backlog = ledgers.backlog_entries(positions[name])
        skip = int(factor * entries_in_backlog)
        if skip == 0:
            result.stopped = f"nothing to skip on cursor {name!r}"
            break
        start = positions[name]
        new = ledgers.position_of(ledgers.acked(start) + skip)
        result.steps.append(
            Step(
                name,
                start,
                new,
                backlog,
                skip,
                f"estimated backlog {backlog} B > target {target:.0f} B (90% of {limit_bytes} B): skip "
                f"{skip} of {entries_in_backlog} entries",
            )
        )
        positions[name] = new
        previous, name = name, still_slowest(positions, name)
        backlog = ledgers.estimated_backlog_bytes(positions[name])
    else:
        result.stopped = result.stopped or f"estimated backlog {backlog} B <= target {target:.0f} B"
    return result


def evict_for_time(
    ledgers: TopicLedgers, cursors: dict[str, Position], limit_seconds: int, as_of_ms: int
) -> Eviction:
    """``BacklogQuotaManager#dropBacklogForTimeLimit`` (not precise): while the slowest cursor's mark-delete
    ledger is closed and older than the limit (or gone), mark-delete (next ledger, -1), as long as the cursor
    accepts that position (:meth:`TopicLedgers.accepts_mark_delete`: never past the last entry, so an empty
    current ledger after a roll stops the loop one ledger early, as in Pulsar). The current ledger is never
    evicted. The compaction cursor is left where it is (see module doc)."""
    positions = dict(cursors)
    result = Eviction()
    name = slowest(positions, exclude=(COMPACTION_SUBSCRIPTION,))
    while True:
        if name is None:
            result.stopped = "no durable cursor other than the compaction cursor"
            break
        position = positions[name]
        info = ledgers.by_id.get(position[0])
        next_id = ledgers.next_valid_ledger(position[0])
        if info is None:
            if next_id is None:
                result.stopped = f"cursor {name!r}: no ledger after {position[0]}"
                break
            new = (next_id, -1)
            why = f"mark-delete ledger {position[0]} is no longer in the ledger list"
        elif info.closed_at_ms is not None and as_of_ms - info.closed_at_ms > limit_seconds * 1000:
            new = (next_id, -1) if next_id is not None else position
            if new == position:
                result.stopped = f"cursor {name!r}: nothing after ledger {position[0]}"
                break
            why = (
                f"ledger {position[0]} closed {(as_of_ms - info.closed_at_ms) // 1000} s before as-of "
                f"> limit {limit_seconds} s: skip the whole ledger"
            )
        else:
            result.stopped = (
                f"slowest cursor {name!r} is in the open ledger {position[0]}"
                if info.closed_at_ms is None
                else f"slowest cursor {name!r} is in ledger {position[0]}, closed "
                f"{(as_of_ms - info.closed_at_ms) // 1000} s before as-of <= limit {limit_seconds} s"
            )
            break
        if not ledgers.accepts_mark_delete(position, new):
            last = ledgers.last_entry()
            result.stopped = (
                f"cursor {name!r}: {new[0]}:{new[1]} is past the last entry "
                f"{'(none)' if last is None else f'{last[0]}:{last[1]}'}, a mark-delete the cursor refuses"
            )
            break
        skipped = ledgers.acked(new) - ledgers.acked(position)
        result.steps.append(
            Step(name, position, new, ledgers.estimated_backlog_bytes(position), skipped, why)
        )
        positions[name] = new
        name = still_slowest(positions, name, exclude=(COMPACTION_SUBSCRIPTION,))
    return result


def size_measure(ledgers: TopicLedgers, cursors: dict[str, Position]) -> int:
    name = slowest(cursors)
    return ledgers.estimated_backlog_bytes(cursors[name]) if name else 0


def time_measure_ms(ledgers: TopicLedgers, cursors: dict[str, Position]) -> int | None:
    """Non-precise age source: close time of the ledger holding the slowest cursor's first unacknowledged
    entry; None when there is no backlog or that ledger is still open."""
    name = slowest(cursors)
    if name is None:
        return None
    holding = ledgers.first_unacked_ledger(cursors[name])
    if holding is None or holding.closed_at_ms is None:
        return None
    return holding.closed_at_ms


def plan_topic(topic: dict[str, Any], ledger_rows: list[Ledger], cursors: dict[str, Position]) -> dict:
    """Everything the backlog quota decides for one topic.

    ``topic`` holds: topic, isSystemTopic, sizeQuotaLimitBytes, sizeQuotaPolicy, timeQuotaLimitSeconds,
    timeQuotaPolicy, asOfMs, precise (bool), checkEnabled (bool), slowestFirstUnackedTsMs (precise mode),
    and ``stored`` = {quotaType: recorded state dict}.
    Returns {"states": [...], "steps": [...], "precise": cutoff or None, "handled": quota type or None, ...}.
    """
    ledgers = TopicLedgers(ledger_rows)
    as_of = int(topic["asOfMs"])
    out: dict[str, Any] = {"states": [], "steps": [], "preciseCutoffMs": None, "handled": None, "note": ""}
    stored = topic.get("stored") or {}
    if topic["isSystemTopic"]:
        why = "system topic (exempt)"
        out["note"] = why
        for quota_type, state in stored.items():
            if state["exceeded"]:
                out["states"].append(
                    _state(topic, quota_type, state["policy"], False, state["limitValue"], None, stored, why)
                )
        return out

    size_limit, size_policy = int(topic["sizeQuotaLimitBytes"]), topic["sizeQuotaPolicy"]
    time_limit, time_policy = int(topic["timeQuotaLimitSeconds"]), topic["timeQuotaPolicy"]
    backlog_bytes = size_measure(ledgers, cursors)
    # no durable cursor: Pulsar's estimate is 0, so a limit of 0 is exceeded (0 >= 0)
    size_exceeded = size_limit >= 0 and backlog_bytes >= size_limit
    if topic["precise"]:
        ts = topic.get("slowestFirstUnackedTsMs")
    else:
        ts = time_measure_ms(ledgers, cursors)
    age_seconds = (as_of - ts) // 1000 if ts is not None else None
    time_exceeded = time_limit > 0 and ts is not None and as_of > ts + time_limit * 1000
    out.update(
        backlogBytes=backlog_bytes,
        sizeExceeded=size_exceeded,
        oldestBacklogTsMs=ts,
        oldestBacklogAgeSeconds=age_seconds,
        timeExceeded=time_exceeded,
    )

    # Quota state for the producer policies (each type measured on its own, as producer admission does).
    for quota_type, limit, policy, exceeded, measured, enabled in (
        ("destination_storage", size_limit, size_policy, size_exceeded, backlog_bytes, size_limit >= 0),
        ("message_age", time_limit, time_policy, time_exceeded, age_seconds, time_limit > 0),
    ):
        previous = stored.get(quota_type)
        if enabled and policy in PRODUCER_POLICIES and exceeded:
            out["states"].append(_state(topic, quota_type, policy, True, limit, measured, stored, ""))
        elif previous is not None and previous["exceeded"]:
            why = (
                "back under the limit"
                if enabled and policy in PRODUCER_POLICIES
                else "quota disabled or no longer a producer policy"
            )
            out["states"].append(_state(topic, quota_type, policy, False, limit, measured, stored, why))

    # Actions: size first, else time (BrokerService#monitorBacklogQuota), only while the monitor runs; producer
    # admission checks the quota states either way (ServerCnx#handleProducer), so they are recorded above.
    if not topic["checkEnabled"]:
        out["note"] = (
            "backlog quota check disabled: quota states recorded for producer admission, no eviction"
        )
    elif size_exceeded:
        out["handled"] = "destination_storage"
        if size_policy == "consumer_backlog_eviction":
            eviction = evict_for_size(ledgers, cursors, size_limit)
            out["steps"] = [_step("destination_storage", s) for s in eviction.steps]
            out["note"] = eviction.stopped
    elif time_exceeded:
        out["handled"] = "message_age"
        if time_policy == "consumer_backlog_eviction":
            if topic["precise"]:
                # Every subscription's expiry monitor with ttl = (int)(0.9 x limit) (done by the Spark app).
                out["preciseCutoffMs"] = as_of - int(SIZE_REDUCTION_FACTOR * time_limit) * 1000
            else:
                eviction = evict_for_time(ledgers, cursors, time_limit, as_of)
                out["steps"] = [_step("message_age", s) for s in eviction.steps]
                out["note"] = eviction.stopped
    return out


def _step(quota_type: str, step: Step) -> dict[str, Any]:
    return {
        "quotaType": quota_type,
        "cursor": step.cursor,
        "fromLedger": step.from_position[0],
        "fromEntry": step.from_position[1],
        "toLedger": step.to_position[0],
        "toEntry": step.to_position[1],
        "backlogBytesBefore": step.backlog_bytes_before,
        "entriesSkipped": step.entries_skipped,
        "why": step.why,
    }


def _state(
    topic: dict[str, Any],
    quota_type: str,
    policy: str,
    exceeded: bool,
    limit: int,
    measured: int | None,
    stored: dict[str, Any],
    why: str,
) -> dict[str, Any]:
    previous = stored.get(quota_type)
    since = None
    if exceeded:
        since = (
            previous["exceededSinceMs"]
            if previous is not None and previous["exceeded"] and previous.get("exceededSinceMs") is not None
            else int(topic["asOfMs"])
        )
    return {
        "quotaType": quota_type,
        "policy": policy,
        "exceeded": exceeded,
        "limitValue": int(limit),
        "measuredValue": measured,
        "exceededSinceMs": since,
        "wasExceeded": bool(previous and previous["exceeded"]),
        "why": why,
    }
