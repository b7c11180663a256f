"""message_expiry and backlog_quota under Airflow: real dag.test() runs (SparkSubmitOperator -> spark-submit
local[2], Great Expectations gate) over generated stores, compared with the metadata they leave behind."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from housekeeping.generate import GenerateOptions, generate_store
from housekeeping.manifest import export_manifest, load_manifest
from housekeeping.plan import read_table
from tests.conftest import write_manifest

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
AS_OF = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def dagbag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def _cursors(store) -> dict[tuple[str, str], str]:
    return {
        (topic, name): cursor["markDeletePosition"]
        for topic, body in export_manifest(store)["topics"].items()
        for name, cursor in body["cursors"].items()
    }


def _last_run(store, mechanism: str) -> Path:
    return max((store.root / "runs" / mechanism).iterdir(), key=lambda p: p.stat().st_mtime)


def test_both_dags_are_wired_like_the_trim_dag(dagbag):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    for dag_id, plan_task, validate_task in (
        ("message_expiry", "plan_message_expiry", "validate_expiry_plan"),
        ("backlog_quota", "plan_backlog_quota", "validate_backlog_plan"),
    ):
        dag = dagbag.get_dag(dag_id)
        assert dag.max_active_runs == 1 and set(dag.params) >= {"dry_run", "scope", "as_of"}
        assert isinstance(dag.get_task(plan_task), SparkSubmitOperator)
        assert isinstance(dag.get_task(validate_task), SparkSubmitOperator)
        assert dag.get_task(validate_task).retries == 0
    report = dagbag.get_dag("backlog_quota").get_task("write_backlog_report")
    assert report.on_success_callback, "the quota alert hangs on the report task"


def test_message_expiry_dag_moves_exactly_the_planned_cursors(dagbag, tmp_path, monkeypatch):
    store = generate_store(tmp_path / "store", GenerateOptions(topics=14, seed=11, entries_per_ledger=40))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    before = _cursors(store)
    run = dagbag.get_dag("message_expiry").test(logical_date=AS_OF, run_conf={})
    assert run.state == "success"
    run_dir = _last_run(store, "expiry")
    assert json.loads((run_dir / "gate" / "result.json").read_text())["success"]
    moves = {(a["topic"], a["subscription"]): a for a in read_table(run_dir, "actions")}
    assert moves, "the generated store must have something to expire for this to be a test"
    after = _cursors(store)
    for key, position in after.items():
        expected = moves[key]["to"] if key in moves else before[key]
        assert position == expected, key
    assert "Message expiry (TTL) report" in (run_dir / "report" / "report.md").read_text()
    as_of_ms = int(AS_OF.timestamp() * 1000)
    topics_after = export_manifest(store)["topics"]
    assert all(topics_after[topic]["lastActive"] == as_of_ms for topic, _ in moves), (
        "a topic whose backlog was acknowledged was active until the run: lastActive is stamped"
    )

    rerun = dagbag.get_dag("message_expiry").test(
        logical_date=AS_OF, run_conf={"as_of": "2026-11-01T00:00:00Z"}
    )
    assert rerun.state == "success" and _cursors(store) == after, "a replay of the same time changes nothing"


def test_backlog_quota_dag_evicts_records_state_and_alerts_without_failing(dagbag, tmp_path, monkeypatch):
    generated = generate_store(tmp_path / "gen", GenerateOptions(topics=14, seed=7, entries_per_ledger=40))
    document = export_manifest(generated, with_messages=True)
    document.pop("store")
    # a tight producer-hold quota on public/retained (below its retention, as the admin API requires)
    document["namespaces"]["public/retained"]["backlog_quota_map"]["destination_storage"]["limitSize"] = 100
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, document))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    before = _cursors(store)

    run = dagbag.get_dag("backlog_quota").test(logical_date=AS_OF, run_conf={})
    assert run.state == "success", "an exceeded producer quota alerts; it does not fail the run"
    run_dir = _last_run(store, "backlog")
    actions = read_table(run_dir, "actions")
    moves = {(a["topic"], a["subscription"]): a["to"] for a in actions if a["action"] == "move_cursor"}
    flags = [a for a in actions if a["action"] == "flag_backlog_quota"]
    assert moves and flags, "the scenario must evict and flag to be a test"
    assert all(
        a["topic"].startswith("persistent://acme/metrics/") for a in actions if a["action"] == "move_cursor"
    )
    after = _cursors(store)
    assert all(after[k] == (moves.get(k) or before[k]) for k in after)
    states = export_manifest(store)["store"]["backlogQuotaStates"]
    assert {(s["topic"], s["quotaType"]) for s in states if s["exceeded"]} == {
        (f["topic"], f["quotaType"]) for f in flags if f["exceeded"]
    }
    alerts = (store.root / "alerts" / "backlog_quota.jsonl").read_text().splitlines()
    assert alerts and json.loads(alerts[-1])["exceeded"]
    assert "EXCEEDED" in (run_dir / "report" / "report.md").read_text()
