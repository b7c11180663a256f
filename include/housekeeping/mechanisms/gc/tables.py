"""Inactive-topic GC's plan table: one decision per topic in scope, with why. Columns are defined here once; the planner writes them and the gate, apply and the
report read them (``housekeeping.engine.contract.Table``)."""

from __future__ import annotations

from housekeeping.engine.contract import table

GC_DECISIONS = table(
    "decisions",
    "topic string, namespace string, partitionedTopic string, decision string!, kind string!, reason string, "
    "refreshLastActive boolean, bytes bigint!, ledgers bigint!, subscriptions bigint!, "
    "backlogSubscriptions bigint!, producers bigint, consumers bigint, lastActiveMs bigint, inactiveForMs bigint, "
    "inactiveDeleteMode string, maxInactiveSeconds bigint, deleteWhileInactive boolean, retentionTimeMs bigint, "
    "isSystemTopic boolean",
)
