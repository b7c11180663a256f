"""Ledger offload (Pulsar's tiered storage: ``ManagedLedgerImpl#maybeOffload`` and ``#offloadLoop``): closed ledgers
copied to the object tier (``HOUSEKEEPING_OFFLOAD_URL``) once the newest closed ledgers exceed the size threshold or
a ledger closed longer ago than the time threshold. Its package: the mechanism with its fault points (here), its
action kind (``actions``), its plan table (``tables``), its apply (``apply``: prepare a UUID, upload, read back,
complete), its report (``report``, ``report.md.j2``); its Spark apps are ``spark_apps/offload``. The local copy of
an offloaded ledger is deleted by consumed-ledger trim once the offload-deletion lag has passed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.engine.mechanism import Mechanism, TaskIds
from housekeeping.mechanisms.offload.actions import OFFLOAD_LEDGER

if TYPE_CHECKING:
    from housekeeping.store.store import Store


class Offload(Mechanism):
    def apply(
        self, store: Store, run_dir: Path, *, purge_grace_seconds: int, spark_master: str | None = None
    ) -> dict[str, Any]:
        from housekeeping.mechanisms.offload.apply import apply_plan

        return apply_plan(store, Path(run_dir), self, purge_grace_seconds=purge_grace_seconds)


MECHANISM = Offload(
    name="offload",
    title="ledger offload",
    pulsar="ManagedLedgerImpl#maybeOffload / #offloadLoop",
    dag_id="ledger_offload",
    schedule="@hourly",
    tags=("tiered-storage",),
    task_ids=TaskIds(
        plan="plan_ledger_offload",
        validate="validate_offload_plan",
        apply="apply_ledger_offload",
        report="write_offload_report",
    ),
    actions=(OFFLOAD_LEDGER,),
    sweeps=("offload-threshold",),
    fault_points=(
        "offload_apply_after_prepare",  # the attempt's UUID recorded, nothing uploaded
        "offload_apply_after_upload",  # the object written, not read back, not complete
        "offload_apply_after_complete",  # a ledger recorded complete, the next not started
    ),
)
