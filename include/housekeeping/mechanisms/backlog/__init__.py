"""Backlog quota (Pulsar ``BacklogQuotaManager``): evicts the slowest cursors of a topic over its
consumer_backlog_eviction quota, and records the producer policies' quota states (with an alert when one is
exceeded). Its package: the mechanism (here), its action kind (``actions``), its plan tables (``tables``), its
report (``report``, ``report.md.j2``), its alert (``alerts``); it plans the shared ``move_cursor``; its Spark apps
are ``spark_apps/backlog``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.engine.live import Narrowed, TopicNow, TopicThen, changed, moved_back, policy_changes
from housekeeping.engine.mechanism import Mechanism, TaskIds
from housekeeping.mechanisms.backlog.actions import FLAG_BACKLOG_QUOTA
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR


class Backlog(Mechanism):
    @property
    def template_dirs(self) -> tuple[Path, ...]:
        from housekeeping.mechanisms.shared.cursor_report import TEMPLATES

        return (*super().template_dirs, TEMPLATES)

    def report_notifiers(self) -> tuple[Any, ...]:
        from housekeeping.mechanisms.backlog.alerts import BacklogQuotaNotifier

        return (BacklogQuotaNotifier(),)

    def recheck(self, now: TopicNow, then: TopicThen, rows: list[dict[str, Any]], as_of_ms: int) -> Narrowed:
        """Backlog quotas changed since the snapshot: the topic is left alone (its evictions and recorded states were
        measured against the quotas then). A durable subscription created, or a cursor reset backward, since the
        snapshot: no cursor is evicted (Pulsar's eviction loop moves the slowest cursors first, and the slowest are
        not the snapshot's any more); the quota states are still recorded as measured at the run's as-of."""
        quotas = changed(then, now, "backlog_quotas")
        if quotas is not None:
            return Narrowed.nothing(
                f"the backlog quotas in force changed since the snapshot ({policy_changes(then, now, ['backlog_quotas'])})"
            )
        evictions = [row for row in rows if row["action"] == MOVE_CURSOR.name]
        back = moved_back(then, now) if evictions else []
        if not back:
            return Narrowed.as_planned(rows)
        return Narrowed(
            [row for row in rows if row["action"] != MOVE_CURSOR.name],
            f"no eviction: {'; '.join(back)}; the eviction order was decided on the cursors of the snapshot",
        )


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
    actions=(MOVE_CURSOR, FLAG_BACKLOG_QUOTA),
    snapshot_tables=("quota_states",),
    recheck_reads_cursors=True,
)
