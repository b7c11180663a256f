"""Offload's gate checks over one topic, re-derived from the snapshot apart from the planner: plain Python over the
topic's rows (``spark_apps.offload.gate`` runs them in one Spark pass; the unit tests call them alone). No running
sum: a closed ledger's bytes from the newest down to it are the topic's closed bytes less those of the closed
ledgers older than it.

- offloads: every planned ``offload_ledger``: the ledger exists in the snapshot with the planned size; it is closed
  and not the topic's current ledger; it has entries and they are stored; its offload did not complete; an
  offloader applies to its topic; the size or the time threshold selects it. (topic, ledgerId) is unique.
- selection: every ledger the rule selects is planned (nothing the policy asks for is left out silently).
- actions: only offload_ledger, on topics of the snapshot.

Unknowns (a ledger the snapshot lacks, a null the plan holds) fail the check that needs them.
"""

from __future__ import annotations

from housekeeping.mechanisms.offload.actions import OFFLOAD_LEDGER
from spark_apps.offload.units import threshold_ms
from spark_apps.shared.rows import Row

OFFLOAD_CHECKS = (
    "ledger_in_snapshot",
    "bytes_match_snapshot",
    "closed_and_not_current",
    "not_empty",
    "entries_stored",
    "not_offloaded_yet",
    "offloader_applies",
    "threshold_selects_it",
)


def threshold_selection(topic: Row | None, ledgers: list[Row], as_of_ms: int) -> dict[int, Row]:
    """Per closed, non-current ledger of a topic of the snapshot: whether a threshold selects it
    (``thresholdSelects``) and whether Pulsar's rule offloads it (``selected``)."""
    if topic is None or not ledgers:
        return {}
    current = max(r["ledgerId"] for r in ledgers)
    closed = sorted(
        (r for r in ledgers if r["closedAtMs"] is not None and r["ledgerId"] < current),
        key=lambda r: r["ledgerId"],
    )
    total = sum(r["size"] for r in closed)
    by_bytes, by_seconds = topic["offloadThresholdBytes"], topic["offloadThresholdSeconds"]
    older = 0
    derived = {}
    for ledger in closed:
        from_newest = total - older
        older += ledger["size"]
        selects = (by_bytes >= 0 and from_newest > by_bytes) or (
            by_seconds >= 0 and as_of_ms - ledger["closedAtMs"] >= threshold_ms(by_seconds)
        )
        derived[ledger["ledgerId"]] = {
            "thresholdSelects": selects,
            "selected": topic["offloader"]
            and selects
            and not ledger["offloadComplete"]
            and ledger["entries"] > 0
            and ledger["entriesStored"],
        }
    return derived


def check_topic(
    topic: Row | None, ledgers: list[Row], actions: list[Row], as_of_ms: int
) -> dict[str, list[Row]]:
    """Every check frame's rows of one topic (of the snapshot, or only named by the plan)."""
    derived = threshold_selection(topic, ledgers, as_of_ms)
    by_id = {r["ledgerId"]: r for r in ledgers}
    offloads = [a for a in actions if a["action"] == OFFLOAD_LEDGER.name]
    planned = {a["ledgerId"] for a in offloads}
    rows = []
    for action in offloads:
        ledger, rule = by_id.get(action["ledgerId"]), derived.get(action["ledgerId"])
        rows.append(
            {
                "topic": action["topic"],
                "ledgerId": action["ledgerId"],
                "ledger_in_snapshot": ledger is not None,
                "bytes_match_snapshot": ledger is not None and action["bytes"] == ledger["size"],
                "closed_and_not_current": rule is not None,
                "not_empty": ledger is not None and ledger["entries"] > 0,
                "entries_stored": ledger is not None and ledger["entriesStored"],
                "not_offloaded_yet": ledger is not None and not ledger["offloadComplete"],
                "offloader_applies": rule is not None and topic is not None and topic["offloader"] is True,
                "threshold_selects_it": rule is not None and rule["thresholdSelects"],
            }
        )
    return {
        "actions": [
            {"topic": a["topic"], "action": a["action"], "topic_in_snapshot": topic is not None}
            for a in actions
        ],
        "offloads": rows,
        "selection": [
            {"topic": topic["topic"], "ledgerId": ledger_id, "planned": ledger_id in planned}
            for ledger_id, rule in derived.items()
            if rule["selected"] and topic is not None
        ],
    }
