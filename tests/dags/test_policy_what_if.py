"""policy_what_if under Airflow: its public shape (manual, params, task ids, no deleting step), and real dag.test()
runs (the Spark step on the suite's Spark Connect server, as `make airflow` runs it) of a sweep and of a
what-if over a generated store: the report is what `housekeeping what-if` prints, the page is drawn, the storage
report links the latest, and the store's data and metadata are as they were. The trigger form in a browser:
tests/e2e/test_live_airflow.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from housekeeping.store.generate import GenerateOptions, generate_store
from tests.conftest import run_cli
from tests.store_invariants import store_contents

pytestmark = [pytest.mark.airflow, pytest.mark.processes]

AS_OF = "2026-11-01T00:00:00Z"
# Each dag.test() its own logical date (one run per DAG and date).
SWEEP_RUN, WHAT_IF_RUN, BAD_FORM_RUN = (datetime(2026, 11, day, tzinfo=UTC) for day in (2, 3, 4))
TASKS = ["prepare_what_if", "run_what_if", "write_what_if_report"]  # public: users script against them
PARAMS = {"mechanism", "policies", "as_of", "sweep", "scope"}


@pytest.fixture
def dagbag(dagbag_on_spark_connect, monkeypatch):
    """Parsed anew for each test, as each run is in Airflow: dag.test() leaves a run's conf in the DAG object's
    params, and the next dag.test() of the same object would start from them."""
    from airflow.dag_processing.dagbag import DagBag

    from tests.conftest import REPO, SPARK_CONNECT_CONN_ID

    monkeypatch.setenv("HOUSEKEEPING_SPARK_CONN_ID", SPARK_CONNECT_CONN_ID)
    return DagBag(dag_folder=str(REPO / "dags"))


def _data_bytes(root):
    """The store's files and metadata; reports/ is where the DAG writes its page, as the storage report does."""
    return store_contents(root, leave_out=("reports",))


def test_the_dag_is_manual_with_its_form_and_deletes_nothing(dagbag):
    assert dagbag.import_errors == {}
    dag = dagbag.get_dag("policy_what_if")
    assert dag.schedule is None and dag.doc_md and "housekeeping" in dag.tags
    # Unpaused at creation (it only reads): a what-if asked from its form or the console runs at once.
    assert dag.is_paused_upon_creation is False
    assert [t.task_id for t in dag.topological_sort()] == TASKS
    assert set(dag.params) == PARAMS
    assert dag.params.get_param("mechanism").schema["enum"] == [
        "trim", "expiry", "backlog", "gc", "compaction", "offload", "all"
    ]  # fmt: skip
    for task in dag.tasks:
        assert task.pool != "housekeeping_deletes" and not task.outlets, task.task_id
    assert type(dag.get_task("run_what_if")).__name__ == "SparkAppOperator"


@pytest.mark.spark
def test_a_sweep_from_the_dag_is_the_clis_and_the_storage_report_links_it(
    dagbag, tmp_path, monkeypatch, capsys
):
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.observe.storage_report import write_storage_report

    store = generate_store(tmp_path / "store", GenerateOptions(topics=14, seed=7, entries_per_ledger=40))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    before = _data_bytes(store.root)
    sweep = "retention-time=0,2h,-1"
    run = dagbag.get_dag("policy_what_if").test(
        logical_date=SWEEP_RUN, run_conf={"mechanism": "trim", "sweep": sweep, "as_of": AS_OF}
    )
    assert run.state == "success"
    assert _data_bytes(store.root) == before, "a what-if changed the store"
    (report_dir,) = [p for p in (store.root / "reports" / "what-if").iterdir() if p.is_dir()]
    document = json.loads((report_dir / "report.json").read_text())
    code, out, err = run_cli(
        capsys,
        "what-if",
        "trim",
        "--store",
        str(store.root),
        "--as-of",
        AS_OF,
        "--sweep",
        sweep,
        "--format",
        "json",
    )
    assert code == 0, err
    assert document == json.loads(out), "the DAG runs the CLI's code"
    page = (report_dir / "index.html").read_text()
    assert "<svg" in page and "Policy sweep: retention-time" in page

    storage_page = write_storage_report(store, parse_as_of(AS_OF)).read_text()
    assert 'id="latest-what-if" href="../what-if/' in storage_page
    assert "trim sweep of retention-time over 0, 2h, -1" in storage_page


def test_a_what_if_from_the_dag_reports_both_plans_and_a_bad_form_stops_before_spark(
    dagbag, tmp_path, monkeypatch
):
    store = generate_store(tmp_path / "store", GenerateOptions(topics=14, seed=7, entries_per_ledger=40))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    before = _data_bytes(store.root)
    overlay = {
        "namespaces": {
            "acme/orders": {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}}
        }
    }
    dag = dagbag.get_dag("policy_what_if")
    run = dag.test(
        logical_date=WHAT_IF_RUN, run_conf={"mechanism": "trim", "policies": overlay, "as_of": AS_OF}
    )
    assert run.state == "success"
    assert _data_bytes(store.root) == before
    (report_dir,) = [p for p in (store.root / "reports" / "what-if").iterdir() if p.is_dir()]
    document = json.loads((report_dir / "report.json").read_text())
    assert document["mechanism"] == "trim" and document["current"]["gate"]["success"]
    assert document["difference"]["perNamespace"]["acme/orders"]["ledgers"]["added"] > 0
    # No retention in acme/orders would delete more of it than the blast-radius limit lets one run delete: the
    # what-if says so before anyone makes the change.
    assert not document["candidate"]["gate"]["success"]
    page = (report_dir / "index.html").read_text()
    assert "Policy what-if" in page and "acme/orders" in page and "REJECTED" in page

    # A sweep of another mechanism's policy: the form's check fails the first task; Spark never runs.
    run = dag.test(
        logical_date=BAD_FORM_RUN,
        run_conf={
            "mechanism": "expiry",
            "sweep": "retention-time=1d",
            "policies": {},
            "as_of": None,
            "scope": None,
        },
    )
    assert run.state == "failed"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["prepare_what_if"] == "failed" and states["run_what_if"] != "success", states
    assert _data_bytes(store.root) == before

    # A sweep value the store's policies refuse (a retention time not above a backlog quota's 3600 s limit): the
    # same first task, not the Spark step.
    run = dag.test(
        logical_date=BAD_FORM_RUN + timedelta(hours=1),
        run_conf={
            "mechanism": "trim",
            "sweep": "retention-time=1h,1d",
            "policies": {},
            "as_of": None,
            "scope": None,
        },
    )
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["prepare_what_if"] == "failed" and states["run_what_if"] != "success", states
    assert _data_bytes(store.root) == before
