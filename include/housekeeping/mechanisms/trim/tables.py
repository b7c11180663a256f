"""Consumed-ledger trim's plan table: one decision per ledger of every topic in scope, with why. Columns are defined here once; the planner writes them and the gate, apply and the
report read them (``housekeeping.engine.contract.Table``)."""

from __future__ import annotations

from housekeeping.engine.contract import table

TRIM_DECISIONS = table(
    "decisions",
    "topic string, namespace string, ledgerId bigint, rank int!, entries bigint, size bigint, closedAtMs bigint, "
    "decision string!, kind string!, reason string, isCurrent boolean, consumed boolean, expired boolean, "
    "overQuota boolean, remainingAfter bigint, boundLedgerId bigint, slowestCursor string, "
    "slowestMarkDelete string, slowestCursorLastActiveMs bigint",
)
