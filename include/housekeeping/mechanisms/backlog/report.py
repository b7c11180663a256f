"""Backlog quota's report: the cursor mechanisms' (evictions per subscription) with the quota states it recorded
and every topic's quotas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import ACTIONS
from housekeeping.engine.plan import read_table
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.backlog.actions import FLAG_BACKLOG_QUOTA
from housekeeping.mechanisms.backlog.tables import BACKLOG_QUOTAS, BACKLOG_SUBSCRIPTIONS
from housekeeping.mechanisms.shared.cursor_report import cursor_report

# Spark's JSON writer leaves null fields out; the template expects every field present.
QUOTA_KEYS = ("oldestBacklogTsMs", "oldestBacklogAgeSeconds", "handled", "note", "backlogBytes")
FLAG_KEYS = ("measuredValue", "exceededSinceMs", "exceeded", "policy", "limitValue")


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    run = RunDir(run_dir)
    report = cursor_report(run.path, BACKLOG_SUBSCRIPTIONS, dry_run=dry_run)
    quotas = [{**dict.fromkeys(QUOTA_KEYS), **q} for q in read_table(run.path, BACKLOG_QUOTAS.name)]
    flags = [
        {**dict.fromkeys(FLAG_KEYS), **a}
        for a in read_table(run.path, ACTIONS.name)
        if a["action"] == FLAG_BACKLOG_QUOTA.name
    ]
    report.update(
        quotas=[
            dict(
                q,
                oldestBacklog=format_ms(q["oldestBacklogTsMs"])
                if q["oldestBacklogTsMs"] is not None
                else None,
            )
            for q in quotas
            if q.get("sizeQuotaLimitBytes", -1) >= 0 or q.get("timeQuotaLimitSeconds", -1) > 0
        ],
        quotaFlags=flags,
        exceededQuotas=[f for f in flags if f.get("exceeded")],
    )
    return report
