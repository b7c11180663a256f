"""Backlog quota (Pulsar ``BacklogQuotaManager``): evicts the slowest cursors of a topic over its
consumer_backlog_eviction quota, and records the producer policies' quota states (with an alert when one is
exceeded). Its package: the mechanism (here), its action kind (``actions``), its plan tables (``tables``), its
report (``report``, ``report.md.j2``), its alert (``alerts``); it plans the shared ``move_cursor``; its Spark apps
are ``spark_apps/backlog``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.engine.mechanism import Mechanism, TaskIds
from housekeeping.mechanisms.backlog.actions import FLAG_BACKLOG_QUOTA
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR


class Backlog(Mechanism):
    def build_report(self, run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
        from housekeeping.mechanisms.backlog.report import build_report

        return build_report(run_dir, dry_run=dry_run)

    @property
    def template_dirs(self) -> tuple[Path, ...]:
        from housekeeping.mechanisms.shared.cursor_report import TEMPLATES

        return (*super().template_dirs, TEMPLATES)

    def report_notifiers(self) -> tuple[Any, ...]:
        from housekeeping.mechanisms.backlog.alerts import BacklogQuotaNotifier

        return (BacklogQuotaNotifier(),)


MECHANISM = Backlog(
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
    actions=(MOVE_CURSOR, FLAG_BACKLOG_QUOTA),
    snapshot_tables=("quota_states",),
    report_template=Path(__file__).with_name("report.md.j2"),
)
