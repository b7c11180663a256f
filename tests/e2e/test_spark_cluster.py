"""The deployment's Spark topology, natively: a Spark standalone master and worker started from pyspark's own
distribution (tests/spark_cluster.py), the Airflow Spark connection pointing at the master in client mode, and a
real run of the consumed_ledger_trim DAG through it (every mechanism's plan on the cluster equals its plan on local
Spark: tests/housekeeping/mechanisms/test_plan_fingerprints.py).

"The work ran on the worker" is checked from the cluster's side: the master lists the DAG's two Spark apps as
completed with executors it granted, and the worker's work directory holds an executor directory (with its
logs) for each of them. The decisions are checked too: the run deletes what the same plan on local[2] deletes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.plan import read_table
from housekeeping.mechanisms.steps import plan_and_gate_in_process, snapshot_step
from housekeeping.store.generate import GenerateOptions, generate_store

pytestmark = [pytest.mark.airflow, pytest.mark.processes, pytest.mark.spark, pytest.mark.runs]

REPO = Path(__file__).resolve().parents[2]
LOGICAL_DATE = datetime(2026, 11, 1, tzinfo=UTC)


def test_trim_dag_runs_on_a_standalone_cluster_in_client_mode(
    standalone_cluster, airflow_db, tmp_path, monkeypatch, capfd
):
    from airflow.dag_processing.dagbag import DagBag
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    master, work_dir = standalone_cluster.master, standalone_cluster.work_dir
    # The same JSON connection the compose file sets, pointed at this master.
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", standalone_cluster.connection())
    resolved = SparkSubmitHook(conn_id="spark_default")._resolve_connection()
    assert (resolved["master"], resolved["deploy_mode"]) == (master, "client")

    options = GenerateOptions(topics=10, seed=5, entries_per_ledger=30)
    store = generate_store(tmp_path / "store", options)
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    monkeypatch.setenv("HOUSEKEEPING_MAX_DELETED_SHARE", "1.0")
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver, as the executors see it
    monkeypatch.setenv("HOUSEKEEPING_PROGRESS_SECONDS", "2")  # progress lines in the task log, often
    # What local Spark decides for the same store and logical time (on a copy, through the same steps).
    reference = generate_store(tmp_path / "reference", options)
    info = snapshot_step(
        reference,
        "trim",
        run_id="reference",
        as_of_ms=int(LOGICAL_DATE.timestamp() * 1000),
        max_deleted_share=1.0,
    )
    assert plan_and_gate_in_process(info.run_dir, "trim", "local[2]").success
    expected = sorted(
        (a["topic"], a["ledgerId"])
        for a in read_table(info.run_dir, "actions")
        if a["action"] == "delete_ledger"
    )
    assert expected, "the scenario must delete something to be a test"

    before = {app["id"] for app in standalone_cluster.state()["completedapps"]}
    dag = DagBag(dag_folder=str(REPO / "dags")).get_dag("consumed_ledger_trim")
    capfd.readouterr()
    run = dag.test(logical_date=LOGICAL_DATE, run_conf={"dry_run": False})
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    # the Spark tasks' logs show where the apps are (stage progress every HOUSEKEEPING_PROGRESS_SECONDS)
    logged = "".join(capfd.readouterr())
    for app in ("housekeeping-plan-trim", "housekeeping-validate-trim"):
        assert f"[{app}] " in logged and " tasks" in logged, f"no progress line of {app} in the task log"

    run_dir = sorted((store.root / "runs" / "trim").iterdir())[-1]
    assert json.loads((run_dir / "snapshot/run.json").read_text())["asOf"] == format_ms(
        int(LOGICAL_DATE.timestamp() * 1000)
    )
    got = sorted(
        (a["topic"], a["ledgerId"]) for a in read_table(run_dir, "actions") if a["action"] == "delete_ledger"
    )
    assert got == expected, "the cluster decided differently from local Spark"
    assert json.loads((run_dir / "apply/result.json").read_text())["ledgersDeleted"] == len(expected)

    # The cluster's side: both apps of this run completed on the master, with executors on the worker.
    state = standalone_cluster.state()
    ours = [app for app in state["completedapps"] if app["id"] not in before]
    names = sorted(app["name"] for app in ours)
    assert names == ["housekeeping-plan-trim", "housekeeping-validate-trim"], (
        names
    )  # the apps name themselves
    for app in ours:
        executor_dirs = [p for p in (work_dir / app["id"]).iterdir() if p.is_dir()]
        assert executor_dirs, f"no executor of {app['id']} ran on the worker"
        assert all((d / "stderr").is_file() for d in executor_dirs)
