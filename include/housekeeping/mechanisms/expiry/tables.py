"""Message expiry's plan table: one row per subscription, what expired and why. Columns are defined here once; the planner writes them and the gate, apply and the
report read them (``housekeeping.engine.contract.Table``)."""

from __future__ import annotations

from housekeeping.engine.contract import table

EXPIRY_SUBSCRIPTIONS = table(
    "subscriptions",
    "topic string, namespace string, subscription string, consumers bigint, from string, to string, "
    "decision string!, kind string!, reason string, messageTtlSeconds bigint, cutoffMs bigint, "
    "backlogEntries bigint, backlogBytes bigint, entriesExpired bigint, bytesExpired bigint, "
    "backlogBytesAfter bigint, oldestRemainingTsMs bigint, oldestRemainingLedgerTsMs bigint, asOfMs bigint!",
)
