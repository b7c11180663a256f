"""The DAGs under Airflow: integrity of the DagBag, and real dag.test() runs with the real
SparkSubmitOperator (spark-submit, local[2]) and the real Great Expectations gate over a generated store.
Dry runs triggered from the UI and backfills through the scheduler (`airflow backfill create`):
tests/e2e/test_live_airflow.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from housekeeping.store.generate import GenerateOptions, generate_store
from tests.store_invariants import store_state

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
# The public interface users script against (DAG ids, schedules, task ids in order, params): written out here, not
# read from the registry, so a change to any of them fails this test.
COMMON_PARAMS = {
    "dry_run",
    "scope",
    "as_of",
    "max_deleted_share",
    "approval_bytes",
    "approval_namespace_share",
    "approval_topics",
    "approval_cursors",
}
PUBLIC = {
    "consumed_ledger_trim": (
        "@hourly",
        [
            "plan_ledger_trim",
            "validate_trim_plan",
            "approve_ledger_trim",
            "apply_ledger_trim",
            "write_trim_report",
        ],
        set(),
    ),
    "message_expiry": (
        "*/15 * * * *",
        [
            "plan_message_expiry",
            "validate_expiry_plan",
            "approve_message_expiry",
            "apply_message_expiry",
            "write_expiry_report",
        ],
        set(),
    ),
    "backlog_quota": (
        "*/5 * * * *",
        [
            "plan_backlog_quota",
            "validate_backlog_plan",
            "approve_backlog_quota",
            "apply_backlog_quota",
            "write_backlog_report",
        ],
        set(),
    ),
    "inactive_topic_gc": (
        "@hourly",
        [
            "plan_inactive_topic_gc",
            "validate_gc_plan",
            "approve_inactive_topic_gc",
            "apply_inactive_topic_gc",
            "write_gc_report",
        ],
        {"max_deleted_topic_share"},
    ),
    "compacted_ledger_retention": (
        "@hourly",
        [
            "plan_compaction",
            "validate_compaction_plan",
            "approve_compaction",
            "apply_compaction",
            "write_compaction_report",
        ],
        {"compact_topics"},
    ),
    "ledger_offload": (
        "@hourly",
        [
            "plan_ledger_offload",
            "validate_offload_plan",
            "approve_ledger_offload",
            "apply_ledger_offload",
            "write_offload_report",
        ],
        set(),
    ),
    "store_scrub": (
        "@daily",
        [
            "plan_store_scrub",
            "validate_scrub_plan",
            "approve_scrub_repair",
            "apply_scrub_repair",
            "write_scrub_report",
        ],
        {"scrub_min_age_seconds"},
    ),
}
DAG_IDS = set(PUBLIC)
DATES = [
    datetime(2026, 10, 31, 12, tzinfo=UTC),
    datetime(2026, 11, 1, tzinfo=UTC),
    datetime(2026, 11, 1, 12, tzinfo=UTC),
]


@pytest.fixture(scope="module")
def dagbag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def test_dagbag_has_no_import_errors_and_every_dag_is_well_formed(dagbag):
    assert dagbag.import_errors == {}
    assert DAG_IDS <= set(dagbag.dag_ids)
    for dag_id in DAG_IDS:
        dag = dagbag.get_dag(dag_id)
        assert dag.tags and "housekeeping" in dag.tags
        assert dag.max_active_runs == 1, "deleting DAGs run one at a time"
        assert dag.doc_md and dag.schedule is not None and dag.start_date.tzinfo is not None
        assert set(dag.params) >= {"dry_run", "scope", "as_of", "max_deleted_share"}
        for name in dag.params:
            param = dag.params.get_param(name)
            # The UI trigger form marks a param whose type excludes null as required and refuses it empty.
            if param.value in (None, ""):
                assert "null" in param.schema["type"], (
                    f"{dag_id} param {name} cannot be left empty in the form"
                )
        for task in dag.tasks:
            assert task.owner == "storage-platform"
        assert dag.get_task("take_snapshot").retries >= 1
        # retries wait longer each time; the gate retries Spark's failures only (tests/housekeeping/orchestration/
        # test_gate_retry.py) and alerts when it fails
        assert dag.get_task("take_snapshot").retry_exponential_backoff >= 2
        validate = next(t for t in dag.tasks if t.task_id.startswith("validate_"))
        assert type(validate).__name__ == "GateOperator" and validate.on_failure_callback
        # every deleting step of every DAG shares the one-slot pool
        deleting = [t for t in dag.tasks if t.task_id.startswith(("apply_", "purge_"))]
        assert deleting and {t.pool for t in deleting} == {"housekeeping_deletes"}, dag_id
        # the apply step announces a changed store through its alias (the storage report is scheduled on the
        # store Asset); no Deadline Alert unless HOUSEKEEPING_RUN_DEADLINE_SECONDS is set (tests/e2e sets it)
        apply_task = next(t for t in dag.tasks if t.task_id.startswith("apply_"))
        assert [a.name for a in apply_task.outlets] == ["housekeeping_store_changes"], dag_id
        assert not dag.deadline, dag_id


def test_storage_report_dag_is_scheduled_on_the_store_asset_and_daily(dagbag):
    dag = dagbag.get_dag("storage_report")
    assert dag.doc_md and dag.max_active_runs == 1 and "housekeeping" in dag.tags
    timetable = dag.timetable
    assert [asset.name for _, asset in timetable.asset_condition.iter_assets()] == ["housekeeping_store"]
    assert "0 6 * * *" in timetable.summary, timetable.summary
    assert [t.task_id for t in dag.tasks] == ["write_storage_report"]


def test_storage_report_run_alerts_when_a_namespace_breaches_its_deletion_lag_objective(
    dagbag, tmp_path, monkeypatch
):
    """A deleted ledger whose grace period ended at 2026-11-01T00:00 and is still stored: at the run's logical
    time, 06:00, it has waited 6 h. acme/orders's objective is 1 h (breached), every other namespace's 1 day."""
    from housekeeping.store import metadata_schema as t
    from housekeeping.store.manifest.load import load_manifest
    from housekeeping.store.store import record_pending_deletion, write_transaction
    from tests.conftest import topic_body, write_manifest

    grace_end = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp() * 1000)
    document = {
        "namespaces": {"acme/orders": {}, "acme/audit": {}},
        "topics": {
            "persistent://acme/orders/a": topic_body(
                [(1, 10, 1000, grace_end - 7_200_000), (2, 5, 500, None)]
            ),
            "persistent://acme/audit/b": topic_body([(1, 10, 1000, None)]),
        },
    }
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, document))
    with write_transaction(store.engine) as conn:
        row = conn.execute(
            t.ledgers.select().where(t.ledgers.c.topic == "persistent://acme/orders/a")
        ).first()
        conn.execute(t.ledgers.delete().where(t.ledgers.c.ledger_id == 1))
        record_pending_deletion(
            conn, dict(row._mapping), run_id="r", as_of_ms=grace_end - 3_600_000, purge_after_ms=grace_end
        )
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    monkeypatch.setenv("HOUSEKEEPING_DELETION_LAG_OBJECTIVES", '{"*": 86400, "acme/orders": 3600}')
    run = dagbag.get_dag("storage_report").test(logical_date=datetime(2026, 11, 1, 6, tzinfo=UTC))
    assert run.state == "success"
    report = json.loads((store.root / "reports" / "storage" / "report.json").read_text())
    lag = {row["namespace"]: row for row in report["deletionLag"]}
    assert lag["acme/orders"] == {
        "namespace": "acme/orders",
        "lagSeconds": 6 * 3600,
        "deletableBytes": 1000,
        "objectiveSeconds": 3600,
        "breached": True,
    }
    assert lag["acme/audit"]["lagSeconds"] == 0 and not lag["acme/audit"]["breached"]
    assert report["deletionLagHistory"]["acme/orders"] == [
        [int(run.logical_date.timestamp() * 1000), 6 * 3600]
    ]
    alerts = [
        json.loads(line) for line in (store.root / "alerts" / "deletion_lag.jsonl").read_text().splitlines()
    ]
    assert [a["breached"] for a in alerts] == [
        [
            {
                "namespace": "acme/orders",
                "lagSeconds": 6 * 3600,
                "objectiveSeconds": 3600,
                "deletableBytes": 1000,
            }
        ]
    ]
    page = (store.root / "reports" / "storage" / "index.html").read_text()
    assert "Deletion lag per namespace" in page and "BREACHED" in page


@pytest.mark.parametrize("dag_id", sorted(PUBLIC))
def test_each_dag_keeps_its_schedule_task_ids_params_and_spark_submit_apps(dagbag, dag_id):
    """snapshot -> plan -> validate -> approve -> apply -> purge -> report (compaction skips its Spark apply on a dry run);
    plan and validate (and compaction's apply) are spark-submits of an app module that exists."""
    import importlib

    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    schedule, (plan, validate, approve, apply, report), extra = PUBLIC[dag_id]
    dag = dagbag.get_dag(dag_id)
    assert dag.schedule == schedule
    assert set(dag.params) == COMMON_PARAMS | extra
    order = ["take_snapshot", plan, validate, approve]
    order += ["skip_apply_on_dry_run"] if dag_id == "compacted_ledger_retention" else []
    order += [apply, "purge_pending_deletions", report]
    assert {t.task_id for t in dag.tasks} == set(order)
    for upstream, downstream in zip(order, order[1:], strict=False):
        assert downstream in dag.get_task(upstream).downstream_task_ids, (upstream, downstream)
    submitted = [t for t in dag.tasks if isinstance(t, SparkSubmitOperator)]
    expected = {plan, validate} | ({apply} if dag_id == "compacted_ledger_retention" else set())
    assert {t.task_id for t in submitted} == expected
    for task in submitted:
        assert Path(task.application).is_file()
        module = importlib.import_module(task.application_args[0])
        assert callable(module.main) and "--run-dir" in task.application_args
    # The approval step is Airflow's own human-in-the-loop operator; no answer means Reject.
    approval = dag.get_task(approve)
    assert isinstance(approval, ApprovalOperator) and approval.defaults == ["Reject"]
    # the JSON connection resolves to local Spark, not the hook's silent yarn fallback
    assert SparkSubmitHook(conn_id="spark_default")._resolve_connection()["master"] == "local[2]"
    if dag_id == "backlog_quota":
        assert dag.get_task(report).on_success_callback, "the quota alert hangs on the report task"
    # A dry run skips apply (and so purge) and the report still runs; through Airflow for trim in
    # tests/e2e/test_live_airflow.py, and here for compaction's own short circuit before its Spark apply.
    assert dag.get_task(report).trigger_rule == "none_failed"
    if dag_id == "compacted_ledger_retention":
        short_circuit = dag.get_task("skip_apply_on_dry_run")
        assert short_circuit.ignore_downstream_trigger_rules is False, "it must not skip the report"
        assert short_circuit.python_callable({"dry_run": True}) is False
        assert short_circuit.python_callable({"dry_run": False}) is True


def _dag(dagbag):
    return dagbag.get_dag("consumed_ledger_trim")


def _run_dag(dag, logical_date: datetime, conf: dict | None = None):
    return dag.test(logical_date=logical_date, run_conf=conf or {})


@pytest.mark.processes  # the DAG's Spark steps on spark-submit
def test_gate_failure_stops_the_run_before_apply(dagbag, tmp_path, monkeypatch):
    store = generate_store(tmp_path / "store", GenerateOptions(topics=8, seed=3, entries_per_ledger=20))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    before = store_state(store)
    run = _run_dag(_dag(dagbag), DATES[1], {"max_deleted_share": 0.01})
    assert run.state == "failed"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["validate_trim_plan"] == "failed"
    assert states["apply_ledger_trim"] in ("upstream_failed", None)
    assert store_state(store) == before
    # the operator is told: the gate-failed alert names the run and the failed expectation
    alerts = [
        json.loads(line) for line in (store.root / "alerts" / "gate_failed.jsonl").read_text().splitlines()
    ]
    assert len(alerts) == 1 and alerts[0]["mechanism"] == "trim" and alerts[0]["verdict"] == "rejected"
    assert "deleted_share" in {f["column"] for f in alerts[0]["failed"]}, alerts[0]["failed"]
