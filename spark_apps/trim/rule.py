"""Consumed-ledger trim for one topic (Pulsar ``ManagedLedgerImpl#internalTrimLedgers``; docs/semantics.md §3), as
Pulsar's own loop reads: the slowest durable cursor sets the bound, then the ledgers are walked oldest first and
deleted while consumed and expired or over the size quota, stopping at the first that is neither. Plain Python over
the topic's rows: the planner calls it once per topic inside its one Spark pass (``spark_apps.trim.plan``), the unit
tests call it alone.

1. bound (exclusive) = current ledger + 1 with no durable cursor; else the slowest durable mark-delete (L, e):
   L + 1 when L is a closed ledger and e is its last entry, else L. Readers never pin data.
2. walk ledgers below the bound oldest -> newest; stop at the current ledger (never deleted); delete while
   ``expired`` (time >= 0 and asOf - closedAt > time, strict) or ``overQuota`` (size >= 0 and
   TOTAL - bytesDeletedSoFar >= size, TOTAL including backlog and current ledger); stop at the first ledger that
   is neither (a contiguous oldest prefix).
3. Pulsar ``advanceCursorsIfNecessary``: a cursor below the last entry of the deleted range moves there.
4. Trim's offload-deletion lag (docs/semantics.md §9, ``isOffloadedNeedsDelete``): an offloaded ledger retention
   keeps loses its local copy once ``asOf - offloadedAt > lag`` (strict), where an offloader applies, never on a
   held topic, never when the lag is -1 or the completion time unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from housekeeping.mechanisms.trim.actions import DELETE_LEDGER, DELETE_LOCAL_COPY
from spark_apps.shared.rows import Row, join_present, keep_held, position_text, text, utc_second, whole

RETENTION_KINDS = ("retention_window", "retention_infinite")


@dataclass
class TopicPlan:
    """One topic's rows of trim's plan tables."""

    decisions: list[Row] = field(default_factory=list)
    actions: list[Row] = field(default_factory=list)
    blockers: list[Row] = field(default_factory=list)


@dataclass(frozen=True)
class Bound:
    """What the slowest durable cursor makes of the ledger list (step 1)."""

    current_ledger_id: int
    total_size: int
    ledger_id: int
    cursor: Row | None

    def describe(self, as_of_ms: int) -> str:
        """The subscription that sets the bound, with how long it has been idle (what tells a stale subscription
        from a slow one)."""
        if self.cursor is None:
            return "no durable subscription (readers never pin data)"
        c = self.cursor
        described = "slowest durable subscription '{}' at mark-delete {}".format(
            text(c["name"]), text(position_text(c["markDeleteLedger"], c["markDeleteEntry"]))
        )
        if c.get("lastActiveMs") is None:
            return described
        hours = whole((as_of_ms - c["lastActiveMs"]) / 3_600_000)
        return described + f", last active {utc_second(c['lastActiveMs'])} ({hours} h before as-of)"


def trim_bound(ledgers: list[Row], cursors: list[Row]) -> Bound:
    """Step 1 over a topic's ledgers (sorted by id, at least one) and cursors."""
    current = ledgers[-1]["ledgerId"]
    total = sum(r["size"] for r in ledgers if r["size"] is not None)
    durable = [c for c in cursors if c["durable"]]
    if not durable:
        return Bound(current, total, current + 1, None)
    slowest = min(durable, key=lambda c: (c["markDeleteLedger"], c["markDeleteEntry"], c["name"]))
    md_ledger, md_entry = slowest["markDeleteLedger"], slowest["markDeleteEntry"]
    entries = next((r["entries"] for r in ledgers if r["ledgerId"] == md_ledger), None)
    on_last_entry_of_closed = entries is not None and md_ledger != current and entries == md_entry + 1
    return Bound(current, total, md_ledger + 1 if on_last_entry_of_closed else md_ledger, slowest)


def _time_part(ledger: Row, topic: Row) -> str:
    retention = topic["retentionTimeMs"]
    age_s, retention_s = whole(_div(ledger["ageMs"], 1000)), whole(_div(retention, 1000))
    if retention < 0:
        return "retention time infinite"
    if ledger["expired"]:
        return f"closed {text(age_s)} s before as-of > retention time {text(retention_s)} s"
    return f"closed {text(age_s)} s before as-of, within retention time {text(retention_s)} s"


def _size_part(ledger: Row, topic: Row) -> str:
    remaining, quota = ledger["remainingAfter"], topic["retentionSizeBytes"]
    if quota < 0:
        return "retention size infinite"
    if ledger["overQuota"]:
        return f"{text(remaining)} bytes would remain >= retention size {text(quota)} bytes"
    return f"only {text(remaining)} bytes would remain < retention size {text(quota)} bytes"


def _div(value: int | None, by: int) -> float | None:
    return None if value is None else value / by


def _kind_and_reason(
    ledger: Row, topic: Row, bound: Bound, first_kept: int | None, slowest: str
) -> tuple[str, str | None]:
    """Why a ledger goes or stays: a typed kind (the report groups by it) and a reason for a person."""
    if ledger["delete"]:
        return "consumed_and_expired", join_present(
            "; ",
            f"consumed: below the trim bound ledger {bound.ledger_id} ({slowest})",
            _time_part(ledger, topic) if ledger["expired"] else None,
            _size_part(ledger, topic) if ledger["overQuota"] else None,
        )
    if ledger["isCurrent"]:
        return "current_ledger", "current (open) ledger: the ledger being written is never deleted"
    if not ledger["consumed"]:
        return "slowest_subscription", (
            f"unconsumed: at or after the trim bound ledger {bound.ledger_id} set by {slowest}"
        )
    if first_kept is not None and ledger["ledgerId"] > first_kept:
        return "prefix_blocked", (
            f"older ledger {first_kept} is kept and trim removes only a contiguous oldest prefix"
        )
    source = topic["retentionSource"]
    if topic["retentionTimeMs"] < 0 and topic["retentionSizeBytes"] < 0:
        return "retention_infinite", None if source is None else f"retention is infinite ({source})"
    return "retention_window", join_present(
        "; ",
        f"within retention ({text(source)}: {text(topic['retentionDescription'])})",
        _time_part(ledger, topic),
        _size_part(ledger, topic),
    )


def ledger_decisions(topic: Row, ledgers: list[Row], cursors: list[Row], as_of_ms: int) -> list[Row]:
    """Steps 1-2: one row per ledger of the topic (trim's ``decisions`` table), a held topic's kept."""
    if not ledgers:
        return []
    ledgers = sorted(ledgers, key=lambda r: r["ledgerId"])
    bound = trim_bound(ledgers, cursors)
    retention_ms, retention_bytes = topic["retentionTimeMs"], topic["retentionSizeBytes"]
    walked, prefix = 0, True
    facts = []
    for rank, ledger in enumerate(ledgers, start=1):
        walked += ledger["size"] or 0
        closed = ledger["closedAtMs"]
        age = None if closed is None else as_of_ms - closed
        is_current = ledger["ledgerId"] == bound.current_ledger_id
        consumed = ledger["ledgerId"] < bound.ledger_id
        expired = retention_ms >= 0 and age is not None and age > retention_ms
        remaining = bound.total_size - walked
        over_quota = retention_bytes >= 0 and remaining >= retention_bytes
        eligible = consumed and not is_current and (expired or over_quota)
        prefix = prefix and eligible  # a ledger goes only if it and every older ledger are eligible
        facts.append(
            {
                **ledger,
                "rank": rank,
                "ageMs": age,
                "isCurrent": is_current,
                "consumed": consumed,
                "expired": expired,
                "overQuota": over_quota,
                "remainingAfter": remaining,
                "eligible": eligible,
                "delete": prefix,
            }
        )
    first_kept = min(
        (f["ledgerId"] for f in facts if f["consumed"] and not f["isCurrent"] and not f["eligible"]),
        default=None,
    )
    slowest = bound.describe(as_of_ms)
    cursor = bound.cursor or {}
    decisions = []
    for f in facts:
        kind, reason = _kind_and_reason(f, topic, bound, first_kept, slowest)
        row = {
            "topic": topic["topic"],
            "namespace": topic["namespace"],
            "ledgerId": f["ledgerId"],
            "rank": f["rank"],
            "entries": f["entries"],
            "size": f["size"],
            "closedAtMs": f["closedAtMs"],
            "decision": "delete" if f["delete"] else "keep",
            "kind": kind,
            "reason": reason,
            "isCurrent": f["isCurrent"],
            "consumed": f["consumed"],
            "expired": f["expired"],
            "overQuota": f["overQuota"],
            "remainingAfter": f["remainingAfter"],
            "boundLedgerId": bound.ledger_id,
            "slowestCursor": cursor.get("name"),
            "slowestMarkDelete": position_text(cursor.get("markDeleteLedger"), cursor.get("markDeleteEntry")),
            "slowestCursorLastActiveMs": cursor.get("lastActiveMs"),
        }
        decisions.append(keep_held(row, topic.get("heldBy"), decision="decision", keep="keep"))
    return decisions


def cursor_fast_forwards(decisions: list[Row], cursors: list[Row]) -> list[Row]:
    """Step 3: ``move_cursor`` actions. Durable cursors are never below the deleted range (the bound guarantees
    that), so in practice this moves readers."""
    deleted = [d for d in decisions if d["decision"] == "delete"]
    if not deleted:
        return []
    last = max(deleted, key=lambda d: (d["ledgerId"], d["entries"]))
    to_ledger, to_entry = last["ledgerId"], last["entries"] - 1
    moves = []
    for c in cursors:
        md_ledger, md_entry = c["markDeleteLedger"], c["markDeleteEntry"]
        if md_ledger is None or md_entry is None or (md_ledger, md_entry) >= (to_ledger, to_entry):
            continue
        moves.append(
            {
                "topic": last["topic"],
                "action": MOVE_CURSOR.name,
                "subscription": c["name"],
                "from": position_text(md_ledger, md_entry),
                "to": position_text(to_ledger, to_entry),
                "reason": "fast-forward {} cursor past the deleted ledgers (Pulsar advanceCursorsIfNecessary)".format(
                    "durable" if c["durable"] else "non-durable (reader)"
                ),
            }
        )
    return moves


def local_copy_deletions(topic: Row, ledgers: list[Row], decisions: list[Row], as_of_ms: int) -> list[Row]:
    """Step 4: ``delete_local_copy`` actions of the ledgers retention keeps."""
    lag = topic["offloadDeletionLagMs"]
    if not topic["offloader"] or topic.get("heldBy") is not None or lag is None or lag < 0:
        return []
    deleted = {d["ledgerId"] for d in decisions if d["decision"] == "delete"}
    actions = []
    for ledger in ledgers:
        offloaded = ledger["offloadedAtMs"]
        if not ledger["offloadComplete"] or ledger["localDeleted"] or offloaded is None:
            continue
        age = as_of_ms - offloaded
        if age > lag and ledger["ledgerId"] not in deleted:
            actions.append(
                {
                    "topic": ledger["topic"],
                    "action": DELETE_LOCAL_COPY.name,
                    "ledgerId": ledger["ledgerId"],
                    "bytes": ledger["size"],
                    "reason": f"offloaded {age} ms ago > offload deletion lag {lag} ms: the local copy goes, the "
                    "tier's stays",
                    "offloadedAtMs": offloaded,
                }
            )
    return actions


def blockers(decisions: list[Row]) -> list[Row]:
    """Per kind: bytes kept and the first ledger's reason (the answer to 'why is this kept?'); a ledger the
    prefix blocks counts under the retention that keeps the ledger before it."""
    kept = [d for d in decisions if d["decision"] == "keep"]
    retention_kind = next((d["kind"] for d in kept if d["kind"] in RETENTION_KINDS), None)
    groups: dict[Any, list[Row]] = {}
    for d in kept:
        groups.setdefault(retention_kind if d["kind"] == "prefix_blocked" else d["kind"], []).append(d)
    rows = []
    for kind, group in groups.items():
        sizes = [d["size"] for d in group if d["size"] is not None]
        first = min(group, key=lambda d: d["ledgerId"])
        rows.append(
            {
                "topic": first["topic"],
                "kind": kind,
                "detail": first["reason"],
                "bytes": sum(sizes) if sizes else None,
                "ledgers": len(group),
            }
        )
    return rows


def plan_topic(topic: Row, ledgers: list[Row], cursors: list[Row], as_of_ms: int) -> TopicPlan:
    """Trim's plan of one topic: every ledger's decision, the actions and the blockers."""
    decisions = ledger_decisions(topic, ledgers, cursors, as_of_ms)
    deletions = [
        {
            "topic": d["topic"],
            "action": DELETE_LEDGER.name,
            "ledgerId": d["ledgerId"],
            "bytes": d["size"],
            "reason": d["reason"],
        }
        for d in decisions
        if d["decision"] == "delete"
    ]
    return TopicPlan(
        decisions,
        deletions
        + cursor_fast_forwards(decisions, cursors)
        + local_copy_deletions(topic, ledgers, decisions, as_of_ms),
        blockers(decisions),
    )
