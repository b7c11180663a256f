"""Ledger offload's plan table: one decision per ledger of every topic in scope, with why. Columns are defined here
once; the planner writes them and the gate and the report read them (``housekeeping.engine.contract.Table``)."""

from __future__ import annotations

from housekeeping.engine.contract import table

# sizeSummed: the sizes of the topic's closed ledgers from the newest down to this one (Pulsar's running sum in
# maybeOffload, offloaded ledgers included, the current ledger never); ageMs: as-of - close time.
OFFLOAD_DECISIONS = table(
    "decisions",
    "topic string!, namespace string!, ledgerId bigint!, entries bigint!, size bigint!, closedAtMs bigint, "
    "isCurrent boolean!, offloadAttempted boolean!, offloadComplete boolean!, sizeSummed bigint, ageMs bigint, "
    "overSize boolean!, overTime boolean!, decision string!, kind string!, reason string!",
)
