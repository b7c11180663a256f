"""The approval step under Airflow: a real dag.test() of consumed_ledger_trim (plan and gate on the worker's Spark
Connect server, the Great Expectations gate) over a plan that is over the approval threshold. The run waits in
Airflow's human-in-the-loop state; the answer is recorded through Airflow's own response handler (the code behind
the Required Actions UI and the HITL REST API; the browser does the same in tests/e2e/test_live_airflow.py).
Approve: apply runs. Reject: nothing changes, the run still succeeds and its report says who rejected it."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import pytest

from housekeeping.contract import RunDir
from housekeeping.generate import GenerateOptions, generate_store
from tests.conftest import run_cli
from tests.store_invariants import store_state

pytestmark = pytest.mark.airflow

DAG_ID, TASK_ID = "consumed_ledger_trim", "approve_ledger_trim"


@pytest.fixture(scope="module")
def dagbag(dagbag_on_spark_connect):
    return dagbag_on_spark_connect


class Responder(threading.Thread):
    """Answers the approval request as ``user`` once the task waits for it (what a click in the UI does)."""

    def __init__(self, choice: str, user: str) -> None:
        super().__init__(daemon=True)
        self.choice, self.user, self.answered, self.error = choice, user, threading.Event(), None

    def run(self) -> None:
        from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
        from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState
        from sqlalchemy import select

        class User:  # the authenticated user the API would pass
            def __init__(self, name: str) -> None:
                self.name = name

            def get_id(self) -> str:
                return self.name

            def get_name(self) -> str:
                return self.name

        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not self.answered.is_set():
            try:
                with create_session() as session:
                    ti = session.scalars(
                        select(TaskInstance).where(
                            TaskInstance.dag_id == DAG_ID,
                            TaskInstance.task_id == TASK_ID,
                            TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
                        )
                    ).first()
                    if ti is not None:
                        update_hitl_detail(
                            dag_id=DAG_ID,
                            dag_run_id=ti.run_id,
                            task_id=TASK_ID,
                            update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=[self.choice]),
                            user=User(self.user),
                            session=session,
                            map_index=-1,
                        )
                        self.answered.set()
                        return
            except Exception as exc:  # a locked SQLite database: try again
                self.error = exc
            time.sleep(0.5)


def _approval_run(dagbag, tmp_path, monkeypatch, choice: str, user: str, logical_date: datetime):
    store = generate_store(tmp_path / "store", GenerateOptions(topics=8, seed=3, entries_per_ledger=20))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    monkeypatch.setenv("HOUSEKEEPING_APPROVAL_NAMESPACE_SHARE", "0.05")
    before = store_state(store)
    responder = Responder(choice, user)
    responder.start()
    run = dagbag.get_dag(DAG_ID).test(logical_date=logical_date, run_conf={"dry_run": False})
    responder.join(timeout=5)
    assert responder.answered.is_set(), f"the run never waited for approval ({responder.error})"
    run_dir = RunDir(max((store.root / "runs" / "trim").iterdir(), key=lambda p: p.stat().st_mtime))
    request = json.loads(run_dir.approval_request.read_text())
    assert request["required"] and "stored bytes, over the threshold of 5.0%" in request["reasons"][0]
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    return store, before, run, run_dir, states


def test_an_approved_plan_over_the_threshold_is_applied_and_the_journal_names_who_approved(
    dagbag, tmp_path, monkeypatch, capsys
):
    store, before, run, run_dir, states = _approval_run(
        dagbag, tmp_path, monkeypatch, "Approve", "ops-alice", datetime(2026, 11, 1, tzinfo=UTC)
    )
    assert run.state == "success", states
    assert states[TASK_ID] == "success" and states["apply_ledger_trim"] == "success"
    assert store_state(store) != before
    applied = json.loads(run_dir.apply_result.read_text())
    assert applied["ledgersDeleted"] > 0
    decision = json.loads(run_dir.approval_decision.read_text())
    assert decision["decision"] == "approved" and decision["decidedBy"] == "ops-alice"
    code, out, _ = run_cli(
        capsys, "journal", "--store", str(store.root), "--run", run.run_id, "--format", "json"
    )
    approvals = [e for e in json.loads(out)["entries"] if e["action"] == "approval"]
    assert code == 0 and [(e["status"], e["actor"]) for e in approvals] == [("approved", "ops-alice")]
    assert "**APPROVED** by ops-alice" in run_dir.report_md.read_text()


def test_a_rejected_plan_changes_nothing_and_the_run_ends_without_error(
    dagbag, tmp_path, monkeypatch, capsys
):
    store, before, run, run_dir, states = _approval_run(
        dagbag, tmp_path, monkeypatch, "Reject", "ops-bob", datetime(2026, 11, 1, 1, tzinfo=UTC)
    )
    assert run.state == "success", states
    assert states["validate_trim_plan"] == "success" and states[TASK_ID] == "success"
    assert states["apply_ledger_trim"] == "skipped" and states["purge_pending_deletions"] == "skipped"
    assert states["write_trim_report"] == "success"
    assert store_state(store) == before
    assert not run_dir.apply_result.exists()
    code, out, _ = run_cli(
        capsys, "journal", "--store", str(store.root), "--run", run.run_id, "--format", "json"
    )
    entries = json.loads(out)["entries"]
    assert [(e["action"], e["status"], e["actor"]) for e in entries] == [("approval", "rejected", "ops-bob")]
    report = run_dir.report_md.read_text()
    assert "**REJECTED** by ops-bob" in report and "Nothing was applied" in report
