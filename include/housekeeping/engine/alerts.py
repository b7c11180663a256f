"""Where an alert goes: every sink, never failing (or un-failing) a run. A WARNING in the task log; one JSON line
appended to ``<store>/alerts/<file>`` (for log shippers); a JSON POST to ``HOUSEKEEPING_ALERT_WEBHOOK_URL`` when set
(Slack/Teams/PagerDuty-style). Delivery problems are logged and swallowed.

Which alerts there are: ``gate_failed`` and ``deletion_lag_breached`` (``housekeeping.orchestration.alerts``),
``backlog_quota_exceeded`` (``housekeeping.mechanisms.backlog.alerts``).
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

WEBHOOK_ENV = "HOUSEKEEPING_ALERT_WEBHOOK_URL"
ALERTS_DIR = "alerts"


def deliver(alert: dict[str, Any], store_root: str | None, summary: str, file_name: str) -> list[str]:
    """Send an alert to every configured sink (``file_name``: its file under ``<store>/alerts/``); returns what was
    done (for the log and tests)."""
    done = []
    log.warning("%s", summary)
    done.append("log")
    if store_root:
        path = Path(store_root) / ALERTS_DIR / file_name
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
