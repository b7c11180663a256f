"""A run's state and reason from Airflow's view of it and its run directory's (``observe.run_states.classify``):
each state the console shows, from the facts that make it, and a reason wherever a run did not do its work."""

from __future__ import annotations

import pytest

from housekeeping.engine.documents import Intent, StepFailure
from housekeeping.observe.run_states import AirflowRun, RunRecord, RunState, classify

pytestmark = pytest.mark.unit

APPROVE, APPLY = "approve_ledger_trim", "apply_ledger_trim"


def _airflow(state: str, **tasks: str) -> AirflowRun:
    return AirflowRun("consumed_ledger_trim", "manual__1", state, "manual", 1_000, 61_000, tasks)


def _record(**facts) -> RunRecord:
    return RunRecord(snapshot=True, as_of="2026-11-02T00:00:00.000Z", **facts)


REFUSED = StepFailure(
    "take_snapshot", True, "bad input: as_of 2026-12-07T00:00:00.000Z is later than the clock", 5
)
KILLED = StepFailure("apply_ledger_trim", False, "the task failed without an error (killed, or timed out)", 9)

CASES = [
    ("queued", _airflow("queued"), RunRecord(), RunState.RUNNING, None),
    ("running", _airflow("running", take_snapshot="success", plan_ledger_trim="running"), _record(intent=Intent.APPLY),
     RunState.RUNNING, None),
    ("waiting", _airflow("running", **{APPROVE: "awaiting_input"}),
     _record(intent=Intent.APPLY, approval_reasons=("deletes 5.0 GiB > 1 GiB",)),
     RunState.WAITING_FOR_APPROVAL, "deletes 5.0 GiB > 1 GiB"),
    ("refused before its snapshot", _airflow("failed", take_snapshot="failed", plan_ledger_trim="upstream_failed"),
     RunRecord(failures=(REFUSED,)), RunState.REFUSED, "take_snapshot: bad input: as_of 2026-12-07"),
    ("gate rejected", _airflow("failed", validate_trim_plan="failed"),
     _record(intent=Intent.APPLY, gate_passed=False, gate_failures=("deletions: expect ... (3 unexpected)",)),
     RunState.REJECTED, "the gate rejected the plan: deletions: expect ... (3 unexpected)"),
    ("approval rejected", _airflow("success", **{APPROVE: "success", APPLY: "skipped"}),
     _record(intent=Intent.APPLY, gate_passed=True, decision="rejected", decided_by="ops-bob",
             approval_reasons=("over 1 B",)),
     RunState.REJECTED, "approval rejected by ops-bob: over 1 B"),
    ("approval timed out", _airflow("success", **{APPROVE: "success", APPLY: "skipped"}),
     _record(intent=Intent.APPLY, gate_passed=True, decision="rejected"), RunState.REJECTED,
     "approval rejected by nobody before the approval's timeout"),
    ("failed with a recorded cause", _airflow("failed", **{APPLY: "failed"}),
     _record(intent=Intent.APPLY, gate_passed=True, failures=(KILLED,)), RunState.FAILED,
     "apply_ledger_trim: the task failed without an error"),
    ("failed with none", _airflow("failed", plan_ledger_trim="failed", validate_trim_plan="upstream_failed"),
     _record(intent=Intent.APPLY), RunState.FAILED, "plan_ledger_trim failed (no cause recorded"),
    ("preview", _airflow("success", **{APPLY: "skipped"}),
     _record(intent=Intent.PREVIEW, preview_reason="this scheduled run started 2220 s after its slot"),
     RunState.PREVIEWED, "this scheduled run started 2220 s after its slot"),
    ("dry run", _airflow("success", **{APPLY: "skipped"}), _record(intent=Intent.DRY_RUN, gate_passed=True),
     RunState.DRY_RUN, None),
    ("dry run before intents", _airflow("success", **{APPLY: "skipped"}), _record(gate_passed=True),
     RunState.DRY_RUN, None),
    ("applied", _airflow("success", **{APPLY: "success"}),
     _record(intent=Intent.APPLY, gate_passed=True, applied=True, topics_changed=4, bytes_reclaimed=900),
     RunState.APPLIED, None),
    ("nothing to apply", _airflow("success", **{APPLY: "success"}),
     _record(intent=Intent.APPLY, gate_passed=True, applied=True, topics_changed=0, bytes_reclaimed=0),
     RunState.NOTHING_TO_APPLY, "the checked plan changed no topic"),
    ("command line apply", None, _record(intent=Intent.APPLY, gate_passed=True, applied=True, topics_changed=1),
     RunState.APPLIED, None),
    ("command line plan", None, _record(intent=Intent.PLAN, gate_passed=True), RunState.DRY_RUN, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("airflow", "record", "state", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_state_from_the_facts_that_make_it(airflow, record, state, reason):
    verdict = classify(airflow, record, APPROVE, APPLY)
    assert verdict.state is state
    if reason is None:
        assert verdict.reason is None
    else:
        assert verdict.reason is not None and verdict.reason.startswith(reason), verdict.reason
    assert verdict.dry_run == (state in (RunState.DRY_RUN, RunState.PREVIEWED))


def test_every_state_that_did_not_do_its_work_says_why():
    for name, airflow, record, state, _ in CASES:
        if state in (RunState.REFUSED, RunState.FAILED, RunState.REJECTED):
            assert classify(airflow, record, APPROVE, APPLY).reason, name
    assert {c[3] for c in CASES} == set(RunState), "every state is exercised"
