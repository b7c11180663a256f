"""Trim's re-check at apply: the plan narrowed to what the topic allows now (``housekeeping.engine.live``).

Pulsar's trim reads the slowest durable cursor and the retention under the ledger's lock as it trims. Here the plan
was made on a snapshot; in the topic's transaction, with its version unchanged (the same ledger list), apply keeps a
planned ledger only while

- every durable cursor now has consumed it whole (its mark-delete at or past the ledger's last entry): a subscription
  created after the snapshot (at ``earliest``, say) or a cursor reset backward keeps what it has not acknowledged;
- the retention in force now lets it go (closed longer ago than the retention time, strict, or the bytes that would
  remain still at or over the retention size, as the planner's walk from the oldest ledger counts them): a retention
  raised since the snapshot keeps what it keeps;

and only as an oldest prefix: the first planned ledger the state now keeps keeps every later one. The readers the
plan fast-forwarded past the deleted range go only to the end of what is still deleted. A local copy planned for
deletion stays when the offload policy changed since the snapshot. Nothing is ever added: the rows are the plan's,
fewer, or with a nearer cursor target.

The checks are written here again, not imported from the planner (``spark_apps/trim/rule.py``): apply is the third
independent look at each deletion, after the planner's rule and the gate's.
"""

from __future__ import annotations

from typing import Any

from housekeeping.core.positions import format_position, parse_position
from housekeeping.engine.live import LedgerNow, Narrowed, TopicNow, TopicThen, changed, moved_back
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from housekeeping.mechanisms.trim.actions import DELETE_LEDGER, DELETE_LOCAL_COPY


def recheck(now: TopicNow, then: TopicThen, rows: list[dict[str, Any]], as_of_ms: int) -> Narrowed:
    """Trim's planned rows of one topic as the topic allows them now (see the module docstring)."""
    deletions = sorted(
        (r for r in rows if r["action"] == DELETE_LEDGER.name), key=lambda r: int(r["ledgerId"])
    )
    moves = [r for r in rows if r["action"] == MOVE_CURSOR.name]
    local = [r for r in rows if r["action"] == DELETE_LOCAL_COPY.name]
    whys: list[str] = []
    offload = changed(then, now, "offload")
    if local and offload is not None:
        whys.append("the offload policy changed since the snapshot: no local copy is deleted")
        local = []
    kept = deletions
    if deletions and not _as_planned(now, then, int(deletions[-1]["ledgerId"])):
        kept, why = _still_deletable(now, then, deletions, as_of_ms)
        if why is not None:
            whys.append(why)
    if len(kept) < len(deletions):
        moves = _nearer_moves(now, moves, kept)
    narrowed = [*kept, *moves, *local]
    if not whys:
        return Narrowed.as_planned(rows)
    return Narrowed(narrowed, "; ".join(whys))


def _as_planned(now: TopicNow, then: TopicThen, last_planned: int) -> bool:
    """The cheap answer for almost every topic: the retention is the snapshot's and every durable cursor has consumed
    the last planned ledger whole (so every planned ledger is still consumed and expired)."""
    return changed(then, now, "retention") is None and all(c.past(last_planned) for c in now.durable)


def _still_deletable(
    now: TopicNow, then: TopicThen, deletions: list[dict[str, Any]], as_of_ms: int
) -> tuple[list[dict[str, Any]], str | None]:
    """The planned deletions the topic allows now (an oldest prefix of them), and why fewer (None: all)."""
    ledgers = now.ledgers
    retention = now.policies["retention"]
    time_ms = -1 if retention["time_minutes"] < 0 else retention["time_minutes"] * 60_000
    size_bytes = -1 if retention["size_mb"] < 0 else retention["size_mb"] * 1024 * 1024
    total = sum(ledger.size for ledger in ledgers)
    walked = 0
    allowed: set[int] = set()
    stop: str | None = None
    current = ledgers[-1].ledger_id if ledgers else None
    for ledger in ledgers:
        walked += ledger.size
        if ledger.ledger_id == current:
            break
        behind = [c for c in now.durable if c.position < ledger.last_position]
        if behind:
            stop = _cursor_reason(now, then, ledger, behind)
            break
        expired = (
            time_ms >= 0 and ledger.closed_at_ms is not None and as_of_ms - ledger.closed_at_ms > time_ms
        )
        over_quota = size_bytes >= 0 and total - walked >= size_bytes
        if not (expired or over_quota):
            stop = _retention_reason(then, now, ledger)
            break
        allowed.add(ledger.ledger_id)
    kept = []
    for row in deletions:
        if int(row["ledgerId"]) not in allowed:
            break
        kept.append(row)
    if len(kept) == len(deletions):
        return kept, None
    first_kept = int(deletions[len(kept)]["ledgerId"])
    return kept, (
        f"{len(deletions) - len(kept)} of {len(deletions)} planned ledgers kept from ledger {first_kept} on: "
        f"{stop or 'no longer in the ledger list'}"
    )


def _cursor_reason(now: TopicNow, then: TopicThen, ledger: LedgerNow, behind: list[Any]) -> str:
    changes = moved_back(then, now)
    names = {c.name for c in behind}
    described = [d for d in changes if any(f"{n!r}" in d for n in names)] or [c.describe() for c in behind]
    return f"ledger {ledger.ledger_id} is not consumed by " + ", ".join(sorted(described))


def _retention_reason(then: TopicThen, now: TopicNow, ledger: LedgerNow) -> str:
    change = changed(then, now, "retention")
    retention = now.policies["retention"]
    text = f"time {retention['time_minutes']} min, size {retention['size_mb']} MB"
    if change is None:
        return f"the retention in force ({text}) keeps ledger {ledger.ledger_id}"
    before = change[0] or {}
    return (
        f"the retention in force changed since the snapshot (time {before.get('time_minutes')} min, size "
        f"{before.get('size_mb')} MB -> {text}) and keeps ledger {ledger.ledger_id}"
    )


def _nearer_moves(
    now: TopicNow, moves: list[dict[str, Any]], kept: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The plan's fast-forwards of readers past the deleted range, to the end of what is still deleted: none when
    nothing is; a cursor already there or past it is not moved."""
    if not kept:
        return []
    last = now.ledger(int(kept[-1]["ledgerId"]))
    if last is None:
        return []
    target = last.last_position
    nearer = []
    for move in moves:
        where = f"topic {now.name} cursor {move.get('subscription')}"
        if parse_position(move["from"], where) >= target:
            continue
        to = parse_position(move["to"], where)
        nearer.append({**move, "to": format_position(min(to, target))})
    return nearer
