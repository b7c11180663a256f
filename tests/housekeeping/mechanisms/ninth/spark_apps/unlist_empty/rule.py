"""The rule, one topic at a time: a closed ledger that holds no entry leaves the topic's ledger list. The topic's
newest ledger is its current one and stays, empty or not; a held topic is left alone."""

from __future__ import annotations

from spark_apps.shared.rows import Row

FORGET_EMPTY_LEDGER = "forget_empty_ledger"


def plan_topic(topic: Row, ledgers: list[Row]) -> list[Row]:
    """The topic's ``forget_empty_ledger`` actions, each with its reason."""
    if topic["heldBy"] is not None or not ledgers:
        return []
    current = max(ledger["ledgerId"] for ledger in ledgers)
    return [
        {
            "topic": topic["topic"],
            "action": FORGET_EMPTY_LEDGER,
            "ledgerId": ledger["ledgerId"],
            "bytes": ledger["size"],
            "reason": f"closed ledger {ledger['ledgerId']} holds no entry (the current ledger is {current})",
        }
        for ledger in sorted(ledgers, key=lambda ledger: ledger["ledgerId"])
        if ledger["entries"] == 0 and ledger["closedAtMs"] is not None and ledger["ledgerId"] < current
    ]
