"""The DAGs' approval step: Airflow's own human-in-the-loop ApprovalOperator (Required Actions in the UI), asked only
when the checked plan is over the approval thresholds (``housekeeping.engine.approval``).

Between the gate and apply. A dry run, or a plan under every threshold, passes straight through (no request is
made). Over a threshold the task waits for a person: "Approve" lets apply run; "Reject", or the timeout (whose
default answer is Reject), skips apply and purge, and the report still runs and says so. Either way the decision
is journaled with who made it and when.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

from housekeeping.engine.approval import (
    ApprovalThresholds,
    preview_purge,
    record_decision,
    request_approval,
    request_markdown,
)
from housekeeping.store.journal import has_finished_apply
from housekeeping.store.store import Store


def console_path() -> str:
    """The console's URL path in this Airflow (under ``[api] base_url``'s path, if any)."""
    from urllib.parse import urlparse

    from airflow.configuration import conf

    base = urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    return f"{base}/housekeeping"


class DeletionApprovalOperator(ApprovalOperator):
    """``approve_<...>``: the approval step of one mechanism's DAG."""

    ui_color = "#f6e3b4"

    def __init__(self, *, mechanism: str, **kwargs: Any) -> None:
        self.mechanism = mechanism
        super().__init__(
            subject=f"Approve a large {mechanism} deletion",
            body=None,
            defaults=ApprovalOperator.REJECT,  # no answer before the timeout: nothing is applied
            **kwargs,
        )

    def _snapshot(self, context: Any) -> dict[str, Any]:
        return context["ti"].xcom_pull(task_ids="take_snapshot")

    def execute(self, context: Any) -> Any:
        from housekeeping.core.settings import Settings
        from housekeeping.mechanisms.registry import get_mechanism

        snapshot = self._snapshot(context)
        settings = Settings.from_env()
        store = Store.of_settings(settings)
        due = preview_purge(store, snapshot["run_dir"], dry_run=snapshot["dry_run"])
        self.log.info(
            "PURGE DUE: %d files of %d topics, %d bytes past their grace period (%d held back by holds)",
            due["files"],
            due["topics"],
            due["bytes"],
            len(due["held"]),
        )
        if snapshot["dry_run"]:
            self.log.info("dry run: nothing will be applied or purged, nothing to approve")
            return {"required": False, "why": "dry run"}
        thresholds = ApprovalThresholds.of(settings, dict(context["params"]))
        request = request_approval(
            snapshot["run_dir"],
            get_mechanism(self.mechanism),
            thresholds,
            due,
            applied_before=not thresholds.first_apply or has_finished_apply(store, self.mechanism),
        )
        if not request.required:
            self.log.info("APPROVAL: not needed, the plan and its purge are under every threshold")
            return {"required": False, "why": "under the approval thresholds"}
        self.log.warning("APPROVAL REQUIRED: %s", "; ".join(request.reasons))
        self.subject = f"Approve {self.mechanism} run {request.run_id}: {request.reasons[0]}"
        self.body = request_markdown(request, console=console_path())
        self.response_timeout = timedelta(seconds=settings.approval_timeout_seconds)
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        from housekeeping.core.settings import Settings

        if "error" not in event:
            chosen = list(event.get("chosen_options") or [])
            user = event.get("responded_by_user")
            who = None if not user else (user.get("name") or user.get("id"))
            at = event.get("responded_at")
            record_decision(
                Store.of_settings(Settings.from_env()),
                self._snapshot(context)["run_dir"],
                approved=chosen == [ApprovalOperator.APPROVE],
                decided_by=who,
                decided_at_ms=int(at.timestamp() * 1000) if at is not None else 0,
            )
        return super().execute_complete(context, event)
