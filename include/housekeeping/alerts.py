"""Airflow alerts: raised by notifiers on the DAGs' tasks, never failing (or un-failing) a run.

Three alerts:

- ``backlog_quota_exceeded`` (the backlog_quota DAG's report task, on success): a topic's backlog quota with a
  producer policy (producer_request_hold / producer_exception) is exceeded. Pulsar blocks its producers; here
  the state is recorded for the write path and the operator is told.
- ``gate_failed`` (every DAG's validate task, on failure): the Great Expectations gate rejected the plan (which
  expectations, on which frame), or produced no verdict at all (the Spark app failed). Nothing was applied; a
  person has to look.
- ``deletion_lag_breached`` (the storage_report DAG's task, on success): a namespace's deletion lag is above its
  objective (``HOUSEKEEPING_DELETION_LAG_OBJECTIVES``): deletable data is being kept too long.

Each goes to every sink: a WARNING in the task log; one JSON line appended to ``<store>/alerts/``
(``ALERT_FILES``, for log shippers); a JSON POST to ``HOUSEKEEPING_ALERT_WEBHOOK_URL`` when set (Slack/Teams/PagerDuty-style).
Delivery problems are logged and swallowed.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from pathlib import Path
from typing import Any

from airflow.sdk import BaseNotifier

from housekeeping.contract import RunDir, read_json, read_run_info

log = logging.getLogger(__name__)

WEBHOOK_ENV = "HOUSEKEEPING_ALERT_WEBHOOK_URL"
# <store>/alerts/<file> per alert (backlog_quota.jsonl is the name log shippers already read).
ALERT_FILES = {
    "backlog_quota_exceeded": "backlog_quota.jsonl",
    "gate_failed": "gate_failed.jsonl",
    "deletion_lag_breached": "deletion_lag.jsonl",
}


def backlog_quota_alert(report: dict[str, Any]) -> dict[str, Any] | None:
    """The alert a backlog report calls for, or None when no producer-policy quota is exceeded."""
    exceeded = [f for f in report.get("quotaFlags", []) if f.get("exceeded")]
    if not exceeded:
        return None
    new = [f for f in exceeded if f.get("from") != "exceeded"]
    return {
        "alert": "backlog_quota_exceeded",
        "runId": report["runId"],
        "asOf": report["asOf"],
        "dryRun": report["dryRun"],
        "newlyExceeded": [f"{f['topic']} {f['quotaType']}" for f in new],
        "exceeded": [
            {
                "topic": f["topic"],
                "quotaType": f["quotaType"],
                "policy": f["policy"],
                "measured": f["measuredValue"],
                "limit": f["limitValue"],
                "exceededSinceMs": f["exceededSinceMs"],
            }
            for f in exceeded
        ],
    }


def quota_summary(alert: dict[str, Any]) -> str:
    return "BACKLOG QUOTA EXCEEDED on {} topic quota(s) (new: {}): {}".format(
        len(alert["exceeded"]),
        ", ".join(alert["newlyExceeded"]) or "none",
        "; ".join(
            f"{e['topic']} {e['quotaType']} {e['measured']} >= {e['limit']} ({e['policy']})"
            for e in alert["exceeded"]
        ),
    )


def gate_failed_alert(run_dir: Path) -> dict[str, Any]:
    """The alert for a validate task that failed: the gate's failed expectations, or no verdict at all."""
    run = RunDir(run_dir)
    info = read_run_info(run)
    result = read_json(run.gate_result)
    return {
        "alert": "gate_failed",
        "runId": info["runId"],
        "mechanism": info["mechanism"],
        "asOf": info["asOf"],
        "runDir": str(run_dir),
        "verdict": "rejected" if result is not None else "none (the gate app failed before a verdict)",
        "failed": [
            {
                "frame": f.get("frame"),
                "expectation": f.get("expectation"),
                "column": (f.get("kwargs") or {}).get("column"),
            }
            for f in (result or {}).get("failed", [])
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


def deliver(alert: dict[str, Any], store_root: str | None, summary: str) -> list[str]:
    """Send an alert to every configured sink; returns what was done (for the log and tests)."""
    done = []
    log.warning("%s", summary)
    done.append("log")
    if store_root:
        path = Path(store_root) / "alerts" / ALERT_FILES[alert["alert"]]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(alert, sort_keys=True) + "\n")
            done.append(str(path))
        except OSError as exc:
            log.error("could not append the alert to %s: %s", path, exc)
    url = os.environ.get(WEBHOOK_ENV)
    if url:
        request = urllib.request.Request(
            url, data=json.dumps(alert).encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (operator-configured URL)
                done.append(f"webhook {response.status}")
        except Exception as exc:  # network trouble must not fail the run
            log.error("%s alert webhook %s failed: %s", alert["alert"], url, exc)
    return done


class BacklogQuotaNotifier(BaseNotifier):
    """on_success_callback of the backlog_quota DAG's report task."""

    def notify(self, context: Any) -> None:
        try:
            ti = context["ti"]
            snapshot = ti.xcom_pull(task_ids="take_snapshot")
            report = read_json(RunDir(snapshot["run_dir"]).report_json)
            alert = backlog_quota_alert(report)
            if alert is not None:
                deliver(alert, report.get("store"), quota_summary(alert))
        except Exception:  # an alert must never fail the run
            log.exception("backlog quota alert could not be raised")


class GateFailedNotifier(BaseNotifier):
    """on_failure_callback of every DAG's validate task."""

    def notify(self, context: Any) -> None:
        try:
            snapshot = context["ti"].xcom_pull(task_ids="take_snapshot")
            run_dir = Path(snapshot["run_dir"])
            alert = gate_failed_alert(run_dir)
            store = read_run_info(run_dir).get("store")
            deliver(alert, store, gate_summary(alert))
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
                deliver(alert, report.get("store"), lag_summary(alert))
        except Exception:  # an alert must never fail the run
            log.exception("deletion-lag alert could not be raised")
