"""The DAGs' own alerts, raised by notifiers on their tasks, never failing (or un-failing) a run (sinks:
``housekeeping.engine.alerts``; a mechanism's own alert is in its package, backlog quota's
``housekeeping.mechanisms.backlog.alerts``):

- ``gate_failed`` (every DAG's validate task, on failure): the Great Expectations gate rejected the plan (which
  expectations, on which frame), or produced no verdict at all (the Spark app failed). Nothing was applied; a
  person has to look.
- ``deletion_lag_breached`` (the storage_report DAG's task, on success): a namespace's deletion lag is above its
  objective (``HOUSEKEEPING_DELETION_LAG_OBJECTIVES``): deletable data is being kept too long.
- ``run_deadline_missed`` (every housekeeping DAG's Deadline Alert, in the triggerer): a run is not finished
  ``HOUSEKEEPING_RUN_DEADLINE_SECONDS`` after it was queued (stuck on a cluster, waiting for a person, or slower
  than it should be).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow.sdk import BaseNotifier

from housekeeping.engine.alerts import deliver
from housekeeping.engine.documents import read_gate_result, read_run_info
from housekeeping.engine.run_dir import RunDir, read_json

log = logging.getLogger(__name__)

# <store>/alerts/<file> per alert.
ALERT_FILES = {
    "gate_failed": "gate_failed.jsonl",
    "deletion_lag_breached": "deletion_lag.jsonl",
    "run_deadline_missed": "run_deadline.jsonl",
}


def deadline_alert(mechanism: str, deadline_seconds: int, context: dict[str, Any] | None) -> dict[str, Any]:
    """The alert of a run past its deadline, from what Airflow's deadline callback receives."""
    dag_run = (context or {}).get("dag_run") or {}
    deadline = (context or {}).get("deadline") or {}
    return {
        "alert": "run_deadline_missed",
        "mechanism": mechanism,
        "dagId": dag_run.get("dag_id"),
        "runId": dag_run.get("dag_run_id"),
        "state": dag_run.get("state"),
        "queuedAt": dag_run.get("queued_at"),
        "deadline": str(deadline.get("deadline_time")),
        "deadlineSeconds": deadline_seconds,
    }


async def run_deadline_missed(
    mechanism: str, deadline_seconds: int, context: dict[str, Any] | None = None
) -> None:
    """The Deadline Alert's callback (the triggerer runs it): the alert to every sink, off the event loop."""
    import asyncio
    import os

    alert = deadline_alert(mechanism, deadline_seconds, context)
    summary = (
        f"RUN DEADLINE MISSED: {alert['dagId']} run {alert['runId']} ({alert['state']}) is not finished "
        f"{deadline_seconds} s after it was queued at {alert['queuedAt']}"
    )
    await asyncio.to_thread(
        deliver, alert, os.environ.get("HOUSEKEEPING_STORE_ROOT"), summary, ALERT_FILES["run_deadline_missed"]
    )


def gate_failed_alert(run_dir: Path) -> dict[str, Any]:
    """The alert for a validate task that failed: the gate's failed expectations, or no verdict at all."""
    run = RunDir(run_dir)
    info = read_run_info(run)
    result = read_gate_result(run)
    return {
        "alert": "gate_failed",
        "runId": info.run_id,
        "mechanism": info.mechanism,
        "asOf": info.as_of,
        "runDir": str(run_dir),
        "verdict": "rejected" if result is not None else "none (the gate app failed before a verdict)",
        "failed": [
            {"frame": f.frame, "expectation": f.expectation, "column": f.kwargs.get("column")}
            for f in (result.failed if result is not None else ())
        ],
    }


def gate_summary(alert: dict[str, Any]) -> str:
    failed = "; ".join(f"{f['frame']}.{f['column']} ({f['expectation']})" for f in alert["failed"])
    return (
        f"GATE FAILED for {alert['mechanism']} run {alert['runId']} as of {alert['asOf']}: verdict "
        f"{alert['verdict']}{': ' + failed if failed else ''}. Nothing was applied. Run dir: {alert['runDir']}"
    )


def deletion_lag_alert(report: dict[str, Any]) -> dict[str, Any] | None:
    """The alert a storage report calls for, or None when every namespace is within its objective."""
    breached = [row for row in report.get("deletionLag", []) if row["breached"]]
    if not breached:
        return None
    return {
        "alert": "deletion_lag_breached",
        "asOf": report["asOf"],
        "store": report["store"],
        "breached": [
            {
                "namespace": row["namespace"],
                "lagSeconds": row["lagSeconds"],
                "objectiveSeconds": row["objectiveSeconds"],
                "deletableBytes": row["deletableBytes"],
            }
            for row in breached
        ],
    }


def lag_summary(alert: dict[str, Any]) -> str:
    return "DELETION LAG OBJECTIVE BREACHED as of {} in {} namespace(s): {}".format(
        alert["asOf"],
        len(alert["breached"]),
        "; ".join(
            f"{b['namespace']} waited {b['lagSeconds']:.0f} s > {b['objectiveSeconds']} s "
            f"({b['deletableBytes']} bytes deletable)"
            for b in alert["breached"]
        ),
    )


class GateFailedNotifier(BaseNotifier):
    """on_failure_callback of every DAG's validate task."""

    def notify(self, context: Any) -> None:
        try:
            snapshot = context["ti"].xcom_pull(task_ids="take_snapshot")
            run_dir = Path(snapshot["run_dir"])
            alert = gate_failed_alert(run_dir)
            store = read_run_info(run_dir).store
            deliver(alert, store, gate_summary(alert), ALERT_FILES["gate_failed"])
        except Exception:  # the task has failed already; the alert must not hide why
            log.exception("gate-failed alert could not be raised")


class DeletionLagNotifier(BaseNotifier):
    """on_success_callback of the storage_report DAG's task (its return value is the page's path)."""

    def notify(self, context: Any) -> None:
        try:
            page = Path(context["ti"].xcom_pull(task_ids="write_storage_report"))
            report = read_json(page.parent / "report.json")
            alert = deletion_lag_alert(report)
            if alert is not None:
                deliver(alert, report.get("store"), lag_summary(alert), ALERT_FILES["deletion_lag_breached"])
        except Exception:  # an alert must never fail the run
            log.exception("deletion-lag alert could not be raised")
