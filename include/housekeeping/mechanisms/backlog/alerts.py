"""The backlog_quota DAG's alert ``backlog_quota_exceeded`` (its report task, on success): a topic's backlog quota
with a producer policy (producer_request_hold / producer_exception) is exceeded. Pulsar blocks its producers; here
the state is recorded for the write path and the operator is told (``housekeeping.engine.alerts`` sinks)."""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseNotifier

from housekeeping.engine.alerts import deliver
from housekeeping.engine.run_dir import RunDir, read_json

log = logging.getLogger(__name__)

# <store>/alerts/<file>: the name log shippers already read.
ALERT_FILE = "backlog_quota.jsonl"


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


class BacklogQuotaNotifier(BaseNotifier):
    """on_success_callback of the backlog_quota DAG's report task."""

    def notify(self, context: Any) -> None:
        try:
            ti = context["ti"]
            snapshot = ti.xcom_pull(task_ids="take_snapshot")
            report = read_json(RunDir(snapshot["run_dir"]).report_json)
            alert = backlog_quota_alert(report)
            if alert is not None:
                deliver(alert, report.get("store"), quota_summary(alert), ALERT_FILE)
        except Exception:  # an alert must never fail the run
            log.exception("backlog quota alert could not be raised")
