"""Message expiry (TTL, Pulsar ``PersistentMessageExpiryMonitor``, with a safer entry search): its spec. The report
is the cursor mechanisms' (``housekeeping.report.build_cursor_report``)."""

from __future__ import annotations

from housekeeping.mechanism import MechanismSpec, TaskIds
from housekeeping.report import build_cursor_report

SPEC = MechanismSpec(
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
    actions=("move_cursor",),
    report=build_cursor_report,
    report_template="expiry_report.md.j2",
    sweeps=("ttl",),
)
