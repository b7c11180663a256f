"""Ledger offload for one topic (Pulsar ``ManagedLedgerImpl#maybeOffload``; docs/semantics.md §9), as Pulsar's own loop
reads: walk the closed ledgers from the newest to the oldest summing their sizes, and offload each one a threshold
selects. Plain Python over the topic's rows: the planner calls it once per topic inside its one Spark pass
(``spark_apps.offload.plan``), the unit tests call it alone.

Per ledger, the first of these that holds names why (``kind``): no offloader applies to the topic; it is the current
ledger (or not closed); its offload completed; both thresholds are off (< 0); neither threshold is crossed (size:
``sizeSummed > bytes``, strict; time: ``asOf - closedAt >= seconds * 1000``, inclusive); it is empty; its entries
are not stored; else the size or the time threshold offloads it. Holds do not stop an offload: it copies, it deletes
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from housekeeping.mechanisms.offload.actions import OFFLOAD_LEDGER
from spark_apps.offload.units import threshold_ms
from spark_apps.shared.rows import Row, whole

NO_OFFLOADER = "no object tier is configured (HOUSEKEEPING_OFFLOAD_URL): like Pulsar's NullLedgerOffloader, nothing is offloaded"
OFFLOADING_KINDS = ("size_threshold", "time_threshold")
# What keeps a ledger local although its topic's policy offloads: a blocker each (under_threshold and the current
# ledger are the policy working as meant, already_offloaded is done).
BLOCKER_KINDS = ("no_offloader", "empty_ledger", "entries_not_stored")


@dataclass
class TopicPlan:
    """One topic's rows of offload's plan tables."""

    decisions: list[Row]
    actions: list[Row]
    blockers: list[Row]


def offload_kind(topic: Row, ledger: Row, walked: Row) -> str:
    """Why the ledger is offloaded or kept, in precedence order."""
    size_off, time_off = topic["offloadThresholdBytes"] < 0, topic["offloadThresholdSeconds"] < 0
    checks = (
        (not topic["offloader"], "no_offloader"),
        (walked["isCurrent"] or not walked["isClosed"], "current_ledger"),
        (ledger["offloadComplete"], "already_offloaded"),
        (size_off and time_off, "offload_disabled"),
        (not (walked["overSize"] or walked["overTime"]), "under_threshold"),
        (ledger["entries"] == 0, "empty_ledger"),
        (not ledger["entriesStored"], "entries_not_stored"),
        (walked["overSize"], "size_threshold"),
    )
    return next((kind for holds, kind in checks if holds), "time_threshold")


def offload_reason(kind: str, topic: Row, ledger: Row, walked: Row) -> str:
    """Why, for a person, by ``kind``."""
    description = topic["offloadPolicyDescription"]
    reasons = {
        "no_offloader": NO_OFFLOADER,
        "current_ledger": "the current ledger is never offloaded",
        "already_offloaded": "its offload completed earlier",
        "offload_disabled": f"offload disabled: {description}",
        "under_threshold": f"under the thresholds: {description}",
        "empty_ledger": "an empty ledger is never offloaded",
        "entries_not_stored": "its entries are not stored (metadata only): nothing to upload",
    }
    if kind in reasons:
        return reasons[kind]
    time = f"closed {whole(walked['ageMs'] / 1000)} s ago >= offload threshold {topic['offloadThresholdSeconds']} s"
    retry = " (retries an attempt that did not complete)" if ledger["offloadAttempted"] else ""
    if kind == "size_threshold":
        size = (
            f"the newest closed ledgers down to this one hold {walked['sizeSummed']} bytes > offload threshold "
            f"{topic['offloadThresholdBytes']} bytes"
        )
        return size + (f"; {time}" if walked["overTime"] else "") + retry
    return time + retry


def offload_walk(topic: Row, ledgers: list[Row], as_of_ms: int) -> dict[int, Row]:
    """Per ledger id what the rule reads: whether it is current or closed, the newest-first running size of the
    closed ledgers (offloaded ones included), its age, and whether each threshold is crossed."""
    current = max((r["ledgerId"] for r in ledgers), default=None)
    walked: dict[int, Row] = {}
    size_summed = 0
    for ledger in sorted(ledgers, key=lambda r: r["ledgerId"], reverse=True):
        closed_at = ledger["closedAtMs"]
        is_current = ledger["ledgerId"] == current
        is_closed = closed_at is not None and not is_current
        if is_closed:
            size_summed += ledger["size"]
        age = None if closed_at is None else as_of_ms - closed_at
        by_bytes, by_seconds = topic["offloadThresholdBytes"], topic["offloadThresholdSeconds"]
        walked[ledger["ledgerId"]] = {
            "isCurrent": is_current,
            "isClosed": is_closed,
            "sizeSummed": size_summed if is_closed else None,
            "ageMs": age,
            "overSize": is_closed and by_bytes >= 0 and size_summed > by_bytes,
            "overTime": is_closed and by_seconds >= 0 and age >= threshold_ms(by_seconds),
        }
    return walked


def plan_topic(topic: Row, ledgers: list[Row], as_of_ms: int) -> TopicPlan:
    """Offload's plan of one topic: a decision per ledger (oldest first), an ``offload_ledger`` action per ledger
    selected, a blocker per kind that keeps ledgers local against the policy."""
    walked = offload_walk(topic, ledgers, as_of_ms)
    decisions, actions = [], []
    blocked: dict[str, Row] = {}
    for ledger in sorted(ledgers, key=lambda r: r["ledgerId"]):
        facts = walked[ledger["ledgerId"]]
        kind = offload_kind(topic, ledger, facts)
        reason = offload_reason(kind, topic, ledger, facts)
        decision = "offload" if kind in OFFLOADING_KINDS else "keep"
        decisions.append(
            {
                "topic": topic["topic"],
                "namespace": topic["namespace"],
                "ledgerId": ledger["ledgerId"],
                "entries": ledger["entries"],
                "size": ledger["size"],
                "closedAtMs": ledger["closedAtMs"],
                "isCurrent": facts["isCurrent"],
                "offloadAttempted": ledger["offloadAttempted"],
                "offloadComplete": ledger["offloadComplete"],
                "sizeSummed": facts["sizeSummed"],
                "ageMs": facts["ageMs"],
                "overSize": facts["overSize"],
                "overTime": facts["overTime"],
                "decision": decision,
                "kind": kind,
                "reason": reason,
            }
        )
        if decision == "offload":
            actions.append(
                {
                    "topic": topic["topic"],
                    "action": OFFLOAD_LEDGER.name,
                    "ledgerId": ledger["ledgerId"],
                    "bytes": ledger["size"],
                    "reason": reason,
                }
            )
        if kind in BLOCKER_KINDS:
            # The detail is the oldest such ledger's reason.
            blocker = blocked.setdefault(
                kind, {"topic": topic["topic"], "kind": kind, "detail": reason, "bytes": 0, "ledgers": 0}
            )
            blocker["bytes"] += ledger["size"]
            blocker["ledgers"] += 1
    return TopicPlan(decisions, actions, [blocked[k] for k in sorted(blocked)])


def local_bytes_left(topic: Row, ledgers: list[Row], plan: TopicPlan) -> int:
    """The topic's local bytes left once the offload-deletion lag in force has passed for every offloaded ledger:
    ledgers not offloaded after this plan, and all of them where the lag is -1 (or unset) or no offloader applies;
    retention not counted."""
    lag = topic["offloadDeletionLagMs"]
    copies_go = topic["offloader"] and lag is not None and lag >= 0
    offloading = {a["ledgerId"] for a in plan.actions}
    return sum(
        r["size"]
        for r in ledgers
        if not r["localDeleted"] and not (copies_go and (r["offloadComplete"] or r["ledgerId"] in offloading))
    )
