"""Message expiry (TTL, Pulsar ``PersistentMessageExpiryMonitor``, with a safer entry search): moves each
subscription's cursor past its expired entries, never past an unexpired one. Its package: the mechanism (here), its
plan table (``tables``), its report template; it plans the shared ``move_cursor`` kind; its Spark apps are
``spark_apps/expiry``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.engine.mechanism import Mechanism, TaskIds
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR


class Expiry(Mechanism):
    def build_report(self, run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
        from housekeeping.mechanisms.expiry.tables import EXPIRY_SUBSCRIPTIONS
        from housekeeping.mechanisms.shared.cursor_report import cursor_report

        return cursor_report(run_dir, EXPIRY_SUBSCRIPTIONS, dry_run=dry_run)

    @property
    def template_dirs(self) -> tuple[Path, ...]:
        from housekeeping.mechanisms.shared.cursor_report import TEMPLATES

        return (*super().template_dirs, TEMPLATES)


MECHANISM = Expiry(
    name="expiry",
    title="message expiry (TTL)",
    pulsar="PersistentMessageExpiryMonitor#expireMessages",
    dag_id="message_expiry",
    schedule="*/15 * * * *",
    tags=("ttl",),
    task_ids=TaskIds(
        plan="plan_message_expiry",
        validate="validate_expiry_plan",
        apply="apply_message_expiry",
        report="write_expiry_report",
    ),
    plan_app="spark_apps.expiry.plan",
    gate_checks="spark_apps.expiry.gate",
    actions=(MOVE_CURSOR,),
    report_template=Path(__file__).with_name("report.md.j2"),
    sweeps=("ttl",),
)
