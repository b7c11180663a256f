"""Backlog quota (Pulsar ``BacklogQuotaManager``): its spec, and the alert for exceeded producer-policy quotas. The
report is the cursor mechanisms' (``housekeeping.report.build_cursor_report``) with the quota states."""

from __future__ import annotations

from typing import Any

from housekeeping.mechanism import MechanismSpec, TaskIds
from housekeeping.report import build_cursor_report


def report_notifiers() -> tuple[Any, ...]:
    from housekeeping.alerts import BacklogQuotaNotifier

    return (BacklogQuotaNotifier(),)


SPEC = MechanismSpec(
    name="backlog",
    title="backlog quota",
    pulsar="BacklogQuotaManager#handleExceededBacklogQuota",
    dag_id="backlog_quota",
    schedule="*/5 * * * *",
    tags=("backlog-quota",),
    task_ids=TaskIds(
        plan="plan_backlog_quota",
        validate="validate_backlog_plan",
        apply="apply_backlog_quota",
        report="write_backlog_report",
    ),
    plan_app="spark_apps.backlog.plan",
    gate_checks="spark_apps.backlog.gate",
    actions=("move_cursor", "flag_backlog_quota"),
    snapshot_tables=("quota_states",),
    report=build_cursor_report,
    report_template="backlog_report.md.j2",
    report_notifiers=report_notifiers,
)
