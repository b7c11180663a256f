"""Empty-ledger unlisting: closed ledgers that hold no entry leave their topic's ledger list. The mechanism's
declaration; its Spark apps are ``spark_apps/unlist_empty`` (found by its name), its report the engine's default."""

from __future__ import annotations

from housekeeping.engine.mechanism import Mechanism, TaskIds
from housekeeping.mechanisms.unlist_empty.actions import FORGET_EMPTY_LEDGER

MECHANISM = Mechanism(
    name="unlist_empty",
    title="empty-ledger unlisting",
    pulsar="(none: the ninth mechanism of a test)",
    dag_id="empty_ledger_unlisting",
    schedule="@daily",
    tags=("test",),
    task_ids=TaskIds(
        plan="plan_empty_ledgers",
        validate="validate_empty_ledger_plan",
        apply="apply_empty_ledgers",
        report="write_empty_ledger_report",
    ),
    actions=(FORGET_EMPTY_LEDGER,),
)
