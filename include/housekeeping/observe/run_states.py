"""A housekeeping DAG run as an operator reads it: one state and, when it did not do its work, why.

Two sources, read apart and decided here by one pure function (:func:`classify`): what Airflow knows of the DAG run
(its state, each task's state: ``AirflowRun``) and what the run wrote in its directory (its intent, the gate's
verdict, the approval, what apply did, the steps' recorded failures: ``RunRecord``). A run refused before its
snapshot has only the first and its recorded failure; a run of the command line has only the second.

The states (docs/console.md): ``previewed`` (a late scheduled run: a dry run whatever its form said), ``dry_run``,
``applied``, ``nothing_to_apply`` (apply ran and changed nothing), ``rejected`` (by the gate, or by a person or the
approval's timeout), ``refused`` (a step refused its input), ``failed``, ``running``, ``waiting_for_approval``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from housekeeping.engine.documents import (
    ApprovalDecision,
    ApprovalRequest,
    Intent,
    StepFailure,
    read_applied_run,
    read_document,
    read_gate_result,
    read_run_info,
    read_step_failures,
)
from housekeeping.engine.run_dir import RunDir


class RunState(StrEnum):
    PREVIEWED = "previewed"
    DRY_RUN = "dry_run"
    APPLIED = "applied"
    NOTHING_TO_APPLY = "nothing_to_apply"
    REJECTED = "rejected"
    REFUSED = "refused"
    FAILED = "failed"
    RUNNING = "running"
    WAITING_FOR_APPROVAL = "waiting_for_approval"


@dataclass(frozen=True)
class AirflowRun:
    """What Airflow knows of one DAG run."""

    dag_id: str
    run_id: str
    state: str  # queued, running, success, failed
    run_type: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    tasks: Mapping[str, str] = field(default_factory=dict)  # task id -> its state (None: not started)


@dataclass(frozen=True)
class RunRecord:
    """What the run wrote in its directory (a run refused before its snapshot: only its failures)."""

    snapshot: bool = False
    intent: Intent | None = None
    preview_reason: str | None = None
    as_of: str | None = None
    gate_passed: bool | None = None
    gate_failures: tuple[str, ...] = ()
    approval_reasons: tuple[str, ...] = ()
    decision: str | None = None  # approved, rejected
    decided_by: str | None = None
    applied: bool = False
    topics_changed: int = 0
    bytes_reclaimed: int | None = None
    failures: tuple[StepFailure, ...] = ()

    @classmethod
    def read(cls, run_dir: str | Path | RunDir) -> RunRecord:
        run = RunDir(run_dir)
        failures = read_step_failures(run)
        if not run.run_info.is_file():
            return cls(failures=failures)
        info = read_run_info(run)
        gate = read_gate_result(run)
        request = read_document(ApprovalRequest, run.approval_request)
        decision = read_document(ApprovalDecision, run.approval_decision)
        applied = read_applied_run(run)
        return cls(
            snapshot=True,
            intent=info.intent,
            preview_reason=info.preview_reason,
            as_of=info.as_of,
            gate_passed=None if gate is None else gate.success,
            gate_failures=tuple(o.describe() for o in gate.failed) if gate is not None else (),
            approval_reasons=tuple(request.reasons) if request is not None and request.required else (),
            decision=decision.decision if decision is not None else None,
            decided_by=decision.decided_by if decision is not None else None,
            applied=applied is not None,
            topics_changed=len(applied.applied_topics) if applied is not None else 0,
            # What apply counted (no pass over the plan: a runs page lists many runs).
            bytes_reclaimed=int(applied.figures.get("bytesDeleted") or 0) if applied is not None else None,
            failures=failures,
        )


@dataclass(frozen=True)
class Verdict:
    state: RunState
    reason: str | None = None

    @property
    def dry_run(self) -> bool:
        return self.state in (RunState.DRY_RUN, RunState.PREVIEWED)


FINISHED = ("success", "failed")


def classify(airflow: AirflowRun | None, record: RunRecord, approve_task: str, apply_task: str) -> Verdict:
    """The run's state and reason, from Airflow's view of it (None: a command-line run) and its directory's."""
    if airflow is not None and airflow.state not in FINISHED:
        # Airflow's human-in-the-loop task waits for its answer in "awaiting_input" (deferred while it asks).
        if airflow.tasks.get(approve_task) in ("awaiting_input", "deferred"):
            return Verdict(RunState.WAITING_FOR_APPROVAL, "; ".join(record.approval_reasons) or None)
        return Verdict(RunState.RUNNING)
    refused = next((f for f in record.failures if f.refused), None)
    if refused is not None:
        return Verdict(RunState.REFUSED, f"{refused.step}: {refused.message}")
    if record.gate_passed is False:
        return Verdict(RunState.REJECTED, "the gate rejected the plan: " + "; ".join(record.gate_failures))
    if record.decision == "rejected":
        who = record.decided_by or "nobody before the approval's timeout"
        return Verdict(
            RunState.REJECTED, f"approval rejected by {who}: " + "; ".join(record.approval_reasons)
        )
    if airflow is not None and airflow.state == "failed":
        failed = [task for task, state in airflow.tasks.items() if state in ("failed", "upstream_failed")]
        failure = next((f for f in reversed(record.failures)), None)
        if failure is not None:
            return Verdict(RunState.FAILED, f"{failure.step}: {failure.message}")
        first = next((task for task in failed if airflow.tasks[task] == "failed"), None)
        return Verdict(RunState.FAILED, f"{first or 'a task'} failed (no cause recorded: see its log)")
    if record.intent is Intent.PREVIEW:
        return Verdict(RunState.PREVIEWED, record.preview_reason)
    if record.intent in (Intent.DRY_RUN, Intent.PLAN, Intent.WHAT_IF):
        return Verdict(RunState.DRY_RUN)
    if record.applied:
        if record.topics_changed:
            return Verdict(RunState.APPLIED)
        return Verdict(RunState.NOTHING_TO_APPLY, "the checked plan changed no topic")
    if airflow is not None and airflow.tasks.get(apply_task) == "skipped":
        return Verdict(RunState.DRY_RUN)  # a run before intents were recorded: its apply was skipped
    if airflow is None:
        return Verdict(RunState.DRY_RUN if record.snapshot else RunState.FAILED)
    return Verdict(
        RunState.FAILED, "the run finished without applying (no cause recorded: see its task logs)"
    )
