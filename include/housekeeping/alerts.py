"""Airflow alerts for backlog quotas: raised by a notifier on the report task, never failing the run.

When a topic's backlog quota with a producer policy (producer_request_hold / producer_exception) is exceeded,
Pulsar blocks its producers; here the state is recorded for the write path and the operator is alerted:

- a WARNING in the task log naming every exceeded topic and quota (new ones first),
- one JSON line per alert appended to ``<store>/alerts/backlog_quota.jsonl`` (for log shippers),
- a JSON POST to ``HOUSEKEEPING_ALERT_WEBHOOK_URL`` when set (Slack/Teams/PagerDuty-style webhooks).

Delivery problems are logged and swallowed: an alert must never turn a successful housekeeping run red.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from pathlib import Path
from typing import Any

from airflow.sdk import BaseNotifier

log = logging.getLogger(__name__)

WEBHOOK_ENV = "HOUSEKEEPING_ALERT_WEBHOOK_URL"


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


def deliver(alert: dict[str, Any], store_root: str | None) -> list[str]:
    """Send an alert to every configured sink; returns what was done (for the log and tests)."""
    done = []
    log.warning(
        "BACKLOG QUOTA EXCEEDED on %d topic quota(s) (new: %s): %s",
        len(alert["exceeded"]),
        ", ".join(alert["newlyExceeded"]) or "none",
        "; ".join(
            f"{e['topic']} {e['quotaType']} {e['measured']} >= {e['limit']} ({e['policy']})"
            for e in alert["exceeded"]
        ),
    )
    done.append("log")
    if store_root:
        path = Path(store_root) / "alerts" / "backlog_quota.jsonl"
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
            log.error("backlog quota alert webhook %s failed: %s", url, exc)
    return done


class BacklogQuotaNotifier(BaseNotifier):
    """on_success_callback of the backlog_quota DAG's report task."""

    def notify(self, context: Any) -> None:
        try:
            ti = context["ti"]
            snapshot = ti.xcom_pull(task_ids="take_snapshot")
            report_path = Path(snapshot["run_dir"]) / "report" / "report.json"
            report = json.loads(report_path.read_text(encoding="utf-8"))
            alert = backlog_quota_alert(report)
            if alert is not None:
                deliver(alert, report.get("store"))
        except Exception:  # an alert must never fail the run
            log.exception("backlog quota alert could not be raised")
