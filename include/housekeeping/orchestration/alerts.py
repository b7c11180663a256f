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
- ``capacity_limit_near`` (the capacity_report DAG's task, on success): a namespace meets a backlog quota within
  ``HOUSEKEEPING_CAPACITY_ALERT_QUOTA_SECONDS``, or a tenant a budget within
  ``HOUSEKEEPING_CAPACITY_ALERT_BUDGET_SECONDS``, at the forecast's soonest credible answer (the Prometheus rules
  alert on the same, from the metrics).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow.sdk import BaseNotifier

from housekeeping.core.settings import Setting
from housekeeping.engine.alerts import deliver
from housekeeping.engine.documents import read_gate_result, read_run_info
from housekeeping.engine.run_dir import RunDir, read_json

log = logging.getLogger(__name__)

# <store>/alerts/<file> per alert.
ALERT_FILES = {
    "gate_failed": "gate_failed.jsonl",
    "deletion_lag_breached": "deletion_lag.jsonl",
    "run_deadline_missed": "run_deadline.jsonl",
    "capacity_limit_near": "capacity.jsonl",
}
CAPACITY_ALERT_QUOTA = Setting(
    "HOUSEKEEPING_CAPACITY_ALERT_QUOTA_SECONDS",
    int,
    7 * 86_400,
    minimum=0,
    help="the capacity report alerts a backlog quota met within this long (0: never)",
)
CAPACITY_ALERT_BUDGET = Setting(
    "HOUSEKEEPING_CAPACITY_ALERT_BUDGET_SECONDS",
    int,
    30 * 86_400,
    minimum=0,
    help="the capacity report alerts a tenant's budget met within this long (0: never)",
)
QUOTA_LIMITS = ("backlog_quota_size", "backlog_quota_time")
BUDGET_LIMITS = ("local_budget", "tier_budget")


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


def capacity_alert(
    forecast: dict[str, Any], store: str | None, quota_within_s: int, budget_within_s: int
) -> dict[str, Any] | None:
    """The alert a capacity report calls for: its limits met within their alerting horizon at the soonest
    credible answer (docs/semantics.md §12.3), soonest first; None when there are none."""
    near = []
    for row in forecast["limits"]:
        soonest = row.get("soonestSecondsUntil", row["secondsUntil"])
        within = quota_within_s if row["limit"] in QUOTA_LIMITS else budget_within_s
        if soonest is not None and row["limit"] in (*QUOTA_LIMITS, *BUDGET_LIMITS) and soonest <= within:
            near.append(
                {
                    "tenant": row["tenant"],
                    "namespace": row["namespace"],
                    "limit": row["limit"],
                    "topic": row.get("topic"),
                    "secondsUntil": row["secondsUntil"],
                    "soonestSecondsUntil": soonest,
                }
            )
    if not near:
        return None
    near.sort(key=lambda r: (r["soonestSecondsUntil"], r["tenant"], r["namespace"] or "", r["limit"]))
    return {"alert": "capacity_limit_near", "asOf": forecast["asOf"], "store": store, "limits": near}


def capacity_summary(alert: dict[str, Any]) -> str:
    return "CAPACITY LIMIT NEAR as of {}: {}".format(
        alert["asOf"],
        "; ".join(
            f"{r['namespace'] or 'tenant ' + r['tenant']} meets its {r['limit']} within {r['soonestSecondsUntil']} s"
            for r in alert["limits"]
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


class CapacityNotifier(BaseNotifier):
    """on_success_callback of the capacity_report DAG's task (its return value is the report page's path)."""

    def notify(self, context: Any) -> None:
        try:
            page = Path(context["ti"].xcom_pull(task_ids="write_capacity_report"))
            forecast = read_json(page.parent / "forecast.json")
            from housekeeping.core.settings import Settings
            from housekeeping.store.store import Store

            store = str(Store.of_settings(Settings.from_env()).root)  # the store the task wrote the report of
            alert = capacity_alert(
                forecast, store, int(CAPACITY_ALERT_QUOTA.read()), int(CAPACITY_ALERT_BUDGET.read())
            )
            if alert is not None:
                deliver(alert, store, capacity_summary(alert), ALERT_FILES["capacity_limit_near"])
        except Exception:  # an alert must never fail the run
            log.exception("capacity alert could not be raised")
