"""The gate's checks of one topic, re-derived from the snapshot apart from the planner: every planned ledger is in
the snapshot, closed, empty and not the topic's current ledger, with the snapshot's bytes."""

from __future__ import annotations

from spark_apps.shared.rows import Row

LEDGER_CHECKS = ("ledger_in_snapshot", "closed", "empty", "not_current", "bytes_match_snapshot")


def check_topic(ledgers: list[Row], actions: list[Row]) -> dict[str, list[Row]]:
    by_id = {ledger["ledgerId"]: ledger for ledger in ledgers}
    current = max(by_id, default=None)
    rows = []
    for action in actions:
        ledger = by_id.get(action["ledgerId"])
        known = ledger is not None
        rows.append(
            {
                "topic": action["topic"],
                "ledgerId": action["ledgerId"],
                "ledger_in_snapshot": known,
                "closed": known and ledger["closedAtMs"] is not None,
                "empty": known and ledger["entries"] == 0,
                "not_current": known and action["ledgerId"] != current,
                "bytes_match_snapshot": known and ledger["size"] == action["bytes"],
            }
        )
    return {"actions": [{"topic": a["topic"], "action": a["action"]} for a in actions], "ledgers": rows}
