"""Consumed-ledger trim (Pulsar ``ManagedLedgerImpl#internalTrimLedgers``): below the slowest durable
subscription's mark-delete, delete the oldest closed ledgers whose retention has run out. Its package: the mechanism
(here), its action kind (``actions``), its plan table (``tables``), its report (``report``, ``report.md.j2``); its
Spark apps are ``spark_apps/trim``."""

from __future__ import annotations

from typing import Any

from housekeeping.engine.live import Narrowed, TopicNow, TopicThen
from housekeeping.engine.mechanism import Mechanism, TaskIds
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from housekeeping.mechanisms.trim.actions import DELETE_LEDGER, DELETE_LOCAL_COPY
from housekeeping.mechanisms.trim.recheck import recheck


class Trim(Mechanism):
    def recheck(self, now: TopicNow, then: TopicThen, rows: list[dict[str, Any]], as_of_ms: int) -> Narrowed:
        """The planned ledgers the durable cursors and the retention in force still allow (an oldest prefix), the
        readers' fast-forwards to the end of that range (``recheck``)."""
        return recheck(now, then, rows, as_of_ms)


MECHANISM = Trim(
    name="trim",
    title="consumed-ledger trim",
    pulsar="ManagedLedgerImpl#internalTrimLedgers",
    dag_id="consumed_ledger_trim",
    schedule="@hourly",
    tags=("retention",),
    task_ids=TaskIds(
        plan="plan_ledger_trim",
        validate="validate_trim_plan",
        apply="apply_ledger_trim",
        report="write_trim_report",
    ),
    actions=(DELETE_LEDGER, MOVE_CURSOR, DELETE_LOCAL_COPY),
    sweeps=("retention-time", "retention-size", "offload-deletion-lag"),
    recheck_reads_cursors=True,
)
