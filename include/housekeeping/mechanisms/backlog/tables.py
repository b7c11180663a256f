"""Backlog quota's plan tables: per subscription what was evicted, per topic its quotas and
state, and every eviction step of the slowest-cursor walk. Columns are defined here once; the planner writes them and the gate, apply and the
report read them (``housekeeping.engine.contract.Table``)."""

from __future__ import annotations

from housekeeping.engine.contract import table

BACKLOG_SUBSCRIPTIONS = table(
    "subscriptions",
    "topic string, namespace string, subscription string, consumers bigint, from string, to string, "
    "decision string!, kind string, reason string, backlogEntries bigint, backlogBytes bigint, "
    "entriesEvicted bigint, bytesEvicted bigint, backlogBytesAfter bigint, oldestRemainingLedgerTsMs bigint",
)
BACKLOG_QUOTAS = table(
    "quotas",
    "topic string, namespace string, isSystemTopic boolean, sizeQuotaLimitBytes bigint, sizeQuotaPolicy string, "
    "timeQuotaLimitSeconds bigint, timeQuotaPolicy string, backlogBytes bigint, sizeExceeded boolean, "
    "oldestBacklogTsMs bigint, oldestBacklogAgeSeconds bigint, timeExceeded boolean, handled string, note string, "
    "asOfMs bigint!",
)
EVICTION_STEPS = table(
    "eviction_steps",
    "topic string, step int!, quotaType string, cursor string, fromLedger bigint, fromEntry bigint, "
    "toLedger bigint, toEntry bigint, backlogBytesBefore bigint, entriesSkipped bigint, why string",
)
