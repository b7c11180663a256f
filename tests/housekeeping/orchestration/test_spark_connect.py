"""The Spark steps on a Spark Connect server (include/housekeeping/orchestration/spark_connect.py,
spark_operator.py): the same apps, launched by the DAGs' operator against a real server, plan and gate exactly as
the classic session does, and so does a spark-submit to a standalone cluster (here for the mechanisms outside the
plan-fingerprint chain; the chain's, run on Connect and on the cluster, match the fingerprints the classic session
matches: tests/housekeeping/mechanisms/test_plan_fingerprints.py); the server's
command-line lifecycle; a task whose server is down fails naming its connection. (A DAG run on Connect, with
compaction's Spark apply: tests/compaction/test_dag.py; the live Airflow runs on it too.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.documents import read_gate_result
from housekeeping.engine.plan import read_table
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.registry import mechanism_names
from housekeeping.mechanisms.steps import plan_and_gate_in_process, snapshot_step
from housekeeping.store.generate import GenerateOptions, generate_store
from tests.conftest import (
    SPARK_CONNECT_CONN_ID,
    connect_app,
    plan_and_gate_on_cluster,
    plan_and_gate_on_connect,
    run_cli,
)
from tests.housekeeping.mechanisms.test_plan_fingerprints import CHAIN
from tests.pg_server import free_port

AS_OF = "2026-11-01T00:00:00Z"
# The fingerprint chain's mechanisms plan and gate on Connect there (tests/housekeeping/mechanisms/test_plan_fingerprints.py).
OUTSIDE_THE_FINGERPRINT_CHAIN = [m for m in mechanism_names() if m not in CHAIN]


def _canonical(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def _verdict(run_dir: Path) -> list[tuple]:
    document = read_gate_result(run_dir)
    return sorted(
        (o.frame, o.expectation, json.dumps(o.kwargs, sort_keys=True), o.success, o.rows)
        for o in document.expectations
    )


@pytest.mark.spark
@pytest.mark.processes
@pytest.mark.runs
@pytest.mark.parametrize("where", ["connect", pytest.param("standalone", marks=pytest.mark.airflow)])
@pytest.mark.parametrize("mechanism", OUTSIDE_THE_FINGERPRINT_CHAIN)
def test_the_plan_and_the_gate_on_spark_connect_or_a_cluster_equal_the_classic_session(
    mechanism, where, spark, request, tmp_path, monkeypatch
):
    """One snapshot, copied: the classic in-process session plans and gates one copy, the DAG operator the other,
    as a Spark Connect launch (plain Python, SPARK_REMOTE, the server's executors) or as a spark-submit to a
    standalone master in client mode (the executors on its worker). Every action, blocker and expectation outcome
    is the same, and the plan is not empty. (The mechanisms of the fingerprint chain are compared on both there,
    against the fingerprints the classic session matches.)"""
    if where == "connect":
        request.getfixturevalue("spark_connect_server")
    else:
        request.getfixturevalue("airflow_db")
    store = generate_store(tmp_path / "store", GenerateOptions(topics=28, seed=7, entries_per_ledger=60))
    if mechanism == "offload":  # an object tier to offload to (acme/audit offloads after an hour)
        (tmp_path / "tier").mkdir()
        monkeypatch.setenv("HOUSEKEEPING_OFFLOAD_URL", str(tmp_path / "tier"))
    if mechanism == "scrub":  # something to repair: a five-day-old directory no row names
        orphan = next((store.root / "ledgers" / "persistent").glob("*/*/*")) / "999999"
        orphan.mkdir()
        (orphan / "part-00000.parquet").write_bytes(b"PAR1 stray")
        old = time.time() - 5 * 86_400
        for item in (orphan / "part-00000.parquet", orphan):
            os.utime(item, (old, old))
    info = snapshot_step(
        store,
        mechanism,
        run_id=f"connect-{mechanism}",
        as_of_ms=parse_as_of(AS_OF),
        max_deleted_share=1.0,
    )
    classic = info.run_dir
    remote = classic.with_name(classic.name + "-connect")
    shutil.copytree(classic, remote)

    plan_and_gate_in_process(classic, mechanism, "local[2]")
    if where == "connect":
        # Spark's generated code and runtime filters on the Connect side (its session's settings, from the
        # operator's conf), the suite's execution on the classic one.
        plan_and_gate_on_connect(remote, mechanism)
    else:
        plan_and_gate_on_cluster(request.getfixturevalue("standalone_cluster"), remote, mechanism)

    actions = read_table(classic, "actions")
    assert actions, f"the {mechanism} plan of this store acts on something"
    assert _canonical(read_table(remote, "actions")) == _canonical(actions)
    assert _canonical(read_table(remote, "blockers")) == _canonical(read_table(classic, "blockers"))
    assert _verdict(remote) == _verdict(classic)
    assert json.loads(RunDir(remote).gate_result.read_text())["success"]


@pytest.mark.unit
def test_a_connect_task_without_a_server_fails_naming_its_connection_and_the_way_out(monkeypatch):
    from airflow.exceptions import AirflowException

    port = free_port()  # nothing listens there
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{SPARK_CONNECT_CONN_ID.upper()}",
        json.dumps({"conn_type": "spark_connect", "host": "localhost", "port": port}),
    )
    task = connect_app("plan", "spark_apps.trim.plan", ["--run-dir", "/nonexistent"])
    with pytest.raises(AirflowException) as failure:
        task.execute(context={})
    message = str(failure.value)
    assert f"localhost:{port}" in message and repr(SPARK_CONNECT_CONN_ID) in message
    assert "housekeeping spark-connect start" in message and "HOUSEKEEPING_SPARK_CONN_ID" in message


@pytest.mark.unit
def test_a_spark_connection_still_goes_to_spark_submit(monkeypatch):
    """The operator decides by the connection's type at run time: a `spark` connection runs SparkSubmitHook
    (here caught before it starts a process), never the Connect launch."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    submitted = []
    monkeypatch.setattr(SparkSubmitOperator, "execute", lambda self, context: submitted.append(self.task_id))
    task = connect_app("plan", "spark_apps.trim.plan", ["--run-dir", "/nonexistent"])
    task._conn_id = "spark_default"
    monkeypatch.setattr(
        type(task), "run_on_connect", lambda self, url: pytest.fail("not a Connect connection")
    )
    task.execute(context={})
    assert submitted == ["plan"]


SESSION_SETTINGS = """
from spark_apps.shared.session import get_spark
spark = get_spark("housekeeping-test-settings")
for key in ("spark.sql.shuffle.partitions", "spark.sql.codegen.wholeStage", "spark.sql.adaptive.enabled"):
    print(key, spark.conf.get(key), flush=True)
"""


@pytest.mark.processes
def test_the_operators_sql_settings_reach_its_connect_session_and_the_servers_own_are_refused(
    spark_connect_server, monkeypatch
):
    """On a Spark Connect connection, the ``spark.sql.*`` entries of the step's ``conf`` are its session's settings
    (over the 8 shuffle partitions a Connect session otherwise asks for); the others are the server's, and the
    launch says so instead of dropping them silently."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    from housekeeping.engine import launcher

    monkeypatch.setattr(
        launcher, "connect_command", lambda args, python=None: [sys.executable, "-c", SESSION_SETTINGS]
    )
    conf = {
        "spark.sql.shuffle.partitions": "3",
        "spark.sql.codegen.wholeStage": "false",
        "spark.executor.memory": "9g",
    }
    task = connect_app("plan", "spark_apps.trim.plan", [], conf)
    messages: list[str] = []

    class Log:  # the task's log lines as the operator writes them
        def info(self, message: str, *args: object) -> None:
            messages.append(message % args)

        warning = info

    monkeypatch.setattr(type(task), "log", property(lambda self: Log()))
    task.run_on_connect(SparkConnectHook(SPARK_CONNECT_CONN_ID).get_connection_url())
    printed = {m.split()[0]: m.split()[1] for m in messages if m.startswith("spark.sql.")}
    assert printed == {
        "spark.sql.shuffle.partitions": "3",
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.adaptive.enabled": "true",  # the server's own setting (tests/conftest.py), untouched
    }, messages
    refused = [m for m in messages if "server's settings" in m]
    assert len(refused) == 1 and "spark.executor.memory" in refused[0], messages


@pytest.mark.processes
def test_the_cli_starts_one_server_per_state_dir_and_stops_it(tmp_path, capsys):
    state = tmp_path / "spark-connect"
    port = free_port()
    code, out, err = run_cli(capsys, "spark-connect", "start", "--state-dir", str(state), "--port", str(port))
    try:
        assert code == 0, err
        started = json.loads(out)
        assert started["url"] == f"sc://localhost:{port}"
        code, out, _ = run_cli(capsys, "spark-connect", "status", "--state-dir", str(state))
        assert code == 0 and json.loads(out)["listening"] and json.loads(out)["pid"] == started["pid"]
        # Starting again is a no-op that names the same server; another port while it runs is refused.
        code, out, _ = run_cli(
            capsys, "spark-connect", "start", "--state-dir", str(state), "--port", str(port)
        )
        assert code == 0 and json.loads(out)["pid"] == started["pid"]
        code, _, err = run_cli(
            capsys, "spark-connect", "start", "--state-dir", str(state), "--port", str(free_port())
        )
        assert code == 2 and f"port {port}" in err and "stop it first" in err
    finally:
        code, out, _ = run_cli(capsys, "spark-connect", "stop", "--state-dir", str(state))
    assert code == 0 and json.loads(out) == {"stopped": True}
    code, out, _ = run_cli(capsys, "spark-connect", "status", "--state-dir", str(state))
    assert code == 1 and not json.loads(out)["running"]
    assert (state / "server.pid").read_text() == ""


@pytest.mark.unit
def test_connect_progress_prints_at_most_one_line_per_interval(capsys, monkeypatch):
    """A Connect launch's progress in the task log: Spark Connect's handler is called on every progress message;
    the app prints the open stages' task counts at most once per HOUSEKEEPING_PROGRESS_SECONDS."""
    from types import SimpleNamespace

    from spark_apps.shared import session

    clock = iter([0.0, 1.0, 31.0, 40.0, 62.0])
    monkeypatch.setattr(session.time, "monotonic", lambda: next(clock))
    handler = session._ConnectProgress("housekeeping-plan-trim", 30.0)
    stage = SimpleNamespace(stage_id=3, num_tasks=8, num_completed_tasks=5, done=False)
    finished = SimpleNamespace(stage_id=2, num_tasks=8, num_completed_tasks=8, done=True)
    handler([stage, finished], 2, "op", False)  # 1 s: too soon
    handler([stage, finished], 2, "op", False)  # 31 s: printed
    handler([stage], 0, "op", False)  # 40 s: too soon
    handler([], 0, "op", True)  # done: never printed
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["[housekeeping-plan-trim] 31 s: stage 3: 5/8 tasks, 2 running"]


LONG_QUERY = """
import os, sys
from spark_apps.shared.session import get_spark, interrupt_connect_work_on_sigterm
interrupt_connect_work_on_sigterm()
os.environ["HOUSEKEEPING_PROGRESS_SECONDS"] = "0"
spark = get_spark("housekeeping-test-long-query")
started = []
def executing(stages, inflight_tasks, operation_id, done):
    # The server reports the query's tasks: it is registered and running there.
    if inflight_tasks and not started:
        started.append(operation_id)
        print("executing", flush=True)
spark.registerProgressHandler(executing)
spark.range(0, 10**14, numPartitions=2).selectExpr("max(id)").collect()
print("finished", flush=True)
"""


@pytest.mark.processes
def test_a_terminated_connect_launch_interrupts_its_work_on_the_server(spark_connect_server):
    """SIGTERM (what the operator's on_kill sends) makes a Connect launch interrupt its session's queries before
    it exits: the server is free for the next task, not busy for hours with a dead client's query (a query over
    10^14 rows that holds both of the server's cores)."""
    launch = subprocess.Popen(
        [sys.executable, "-c", LONG_QUERY],
        env={**os.environ, "SPARK_REMOTE": spark_connect_server},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert launch.stdout is not None
    for line in launch.stdout:
        if line.strip() == "executing":
            break
    launch.send_signal(signal.SIGTERM)
    # A liveness bound, not a speed target (the interrupt reaches a server whose two cores the query holds; on a
    # loaded CI machine that took over a minute once): an uninterrupted launch would run for hours.
    assert launch.wait(timeout=240) == 128 + signal.SIGTERM, launch.stdout.read()[-2000:]

    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from spark_apps.shared.session import get_spark; print(get_spark('probe').range(10).count())",
        ],
        env={**os.environ, "SPARK_REMOTE": spark_connect_server},
        capture_output=True,
        text=True,
        timeout=120,  # a liveness bound, not a speed target: an uninterrupted query would hold the cores for hours
    )
    assert probe.stdout.strip().endswith("10"), probe.stderr[-2000:]


@pytest.mark.processes
def test_the_warm_up_plans_and_gates_on_the_server_a_store_of_its_own_and_leaves_nothing(
    spark_connect_server, tmp_path
):
    """`housekeeping spark-connect warm-up` (a process of its own: a Connect session cannot live beside this
    worker's classic one) runs the mechanisms' snapshot, plan and gate on the server over a small store it
    generates in --work-dir with its own metadata (not HOUSEKEEPING_METADATA_URL's, a deployment's real store), and
    removes it."""
    real_metadata = tmp_path / "real-store-metadata.db"
    work = tmp_path / "warm-up"
    work.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "housekeeping.cli",
            "spark-connect",
            "warm-up",
            "--url",
            spark_connect_server,
            "--rounds",
            "1",
            "--mechanism",
            "gc",
            "--work-dir",
            str(work),
        ],  # fmt: skip
        env={**os.environ, "HOUSEKEEPING_METADATA_URL": f"sqlite:///{real_metadata}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    assert document["mechanisms"] == ["gc"] and len(document["rounds"]) == 1
    assert document["rounds"][0]["gc"] > 0 and document["stopped"] is None
    assert list(work.iterdir()) == [] and not real_metadata.exists()

    # A DAG run's Spark step announced itself (the busy file touched after the warm-up began: here its time is set
    # ahead): the warm-up gives way before its next step and says why.
    busy = tmp_path / "dag-run-started"
    busy.touch()
    later = time.time() + 3600
    os.utime(busy, (later, later))
    gave_way = subprocess.run(
        [sys.executable, "-m", "housekeeping.cli", "spark-connect", "warm-up", "--url", spark_connect_server,
         "--mechanism", "gc", "--work-dir", str(work)],
        env={**os.environ, "HOUSEKEEPING_SPARK_CONNECT_BUSY_FILE": str(busy)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert gave_way.returncode == 0, gave_way.stderr[-3000:]
    document = json.loads(gave_way.stdout)
    assert document["rounds"] == [{}] and "gave way" in document["stopped"], document


@pytest.mark.unit
def test_a_spark_step_on_the_server_announces_itself_to_a_warm_up(tmp_path, monkeypatch):
    from housekeeping.orchestration.spark_connect import announce_busy

    busy = tmp_path / "state" / "dag-run-started"
    monkeypatch.delenv("HOUSEKEEPING_SPARK_CONNECT_BUSY_FILE", raising=False)
    announce_busy()
    assert not busy.exists()
    monkeypatch.setenv("HOUSEKEEPING_SPARK_CONNECT_BUSY_FILE", str(busy))
    before = time.time()
    announce_busy()
    assert busy.is_file() and busy.stat().st_mtime >= before - 1


@pytest.mark.unit
def test_a_warm_up_refuses_bad_input_before_it_reaches_a_server(tmp_path, capsys, monkeypatch):
    from housekeeping.orchestration import spark_connect, warm_up

    def no_server(*args, **kwargs):
        pytest.fail("reached for a server")

    monkeypatch.setattr(warm_up, "port_open", no_server)
    for argv, message in (
        (["--mechanism", "trim", "--mechanism", "compaktion"], "unknown mechanism 'compaktion'"),
        (["--rounds", "0"], "--rounds must be >= 1, got 0"),
    ):
        code, _, err = run_cli(capsys, "spark-connect", "warm-up", "--url", "sc://localhost:1", *argv)
        assert code == 2 and message in err, err
    monkeypatch.setattr(warm_up, "port_open", lambda host, port, timeout_s: False)
    code, _, err = run_cli(capsys, "spark-connect", "warm-up", "--url", "sc://nowhere:1", "--rounds", "1")
    assert code == 1 and "no Spark Connect server answers at nowhere:1" in err, err
    # `start --warm-up-rounds N` warms the server it started (or found running) on its port, N rounds.
    warmed: list = []
    monkeypatch.setattr(spark_connect, "start", lambda state_dir, **kwargs: 4242)
    monkeypatch.setattr(
        warm_up, "warm_up", lambda url, rounds: warmed.append((url, rounds)) or {"rounds": []}
    )
    state = str(tmp_path / "state")
    code, out, err = run_cli(capsys, "spark-connect", "start", "--state-dir", state, "--port", "17001")
    assert code == 0 and "warmUp" not in json.loads(out) and warmed == []
    code, out, err = run_cli(
        capsys, "spark-connect", "start", "--state-dir", state, "--port", "17001", "--warm-up-rounds", "2"
    )
    assert code == 0 and json.loads(out)["warmUp"] == {"rounds": []}
    assert warmed == [("sc://localhost:17001", 2)]
    code, _, err = run_cli(capsys, "spark-connect", "start", "--state-dir", state, "--warm-up-rounds", "-1")
    assert code == 2 and "--warm-up-rounds must be >= 0, got -1" in err
