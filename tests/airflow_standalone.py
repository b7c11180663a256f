"""`airflow standalone` as users run it (api-server, scheduler, dag-processor, triggerer, LocalExecutor) with this
project's DAGs and plugin, its Spark steps on the suite's Spark Connect server, Airflow's database and the store's
metadata on the suite's PostgreSQL server; started and stopped by a test module's fixture
(:func:`running_standalone`)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path

from housekeeping.orchestration.dags import DELETING_POOL, DELETING_POOL_DESCRIPTION
from housekeeping.store.store import Store
from tests.conftest import REPO, SPARK_CONNECT_CONN_ID, VENV_BIN
from tests.pg_server import free_port

GRACE_SECONDS = 3600
APPROVAL_TIMEOUT_SECONDS = 45


def ui_driver():
    spec = importlib.util.spec_from_file_location("trigger_from_ui", REPO / "scripts" / "trigger_from_ui.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LiveAirflow:
    def __init__(self, home: Path, port: int, env: dict[str, str], store: Store) -> None:
        self.home, self.port, self.env, self.store = home, port, env, store
        self.url = f"http://127.0.0.1:{port}"
        self.user = "admin"

    @property
    def password(self) -> str:
        return json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())[self.user]

    def api(self):
        return ui_driver().Api(self.url, self.user, self.password)

    def cli(self, *args: str) -> str:
        result = subprocess.run(
            [str(VENV_BIN / "airflow"), *args], env=self.env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    def runs(self, run_type: str | None = None, dag_id: str = "consumed_ledger_trim") -> list[dict]:
        runs = self.api().get(f"/api/v2/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]
        return [r for r in runs if run_type is None or r["run_type"] == run_type]

    def failed_tasks(self, run_id: str, dag_id: str = "consumed_ledger_trim") -> str:
        """Each task's state, and for those that did not succeed or skip their last attempt's warnings and errors:
        the message of a run's unexpected state."""
        found = self.api().get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        lines = [f"{t['task_id']}: {t['state']}" for t in found]
        for ti in found:
            if ti["state"] in ("success", "skipped"):
                continue
            logs = sorted(
                (self.home / "logs").glob(f"dag_id={dag_id}/run_id={run_id}/task_id={ti['task_id']}/*.log")
            )
            if logs:
                # The log's JSON lines at warning or error level (an exception's), else its last lines.
                logged = logs[-1].read_text(errors="replace").splitlines()
                loud = [line for line in logged if '"level":"error"' in line or '"level":"warning"' in line]
                lines += [
                    f"--- {logs[-1].name} of {ti['task_id']}",
                    *(line[:2000] for line in loud or logged[-5:]),
                ]
        return "\n".join(lines)

    def lost_to_the_scheduler_race(
        self, run_id: str, task_id: str, dag_id: str = "consumed_ledger_trim"
    ) -> bool:
        """Whether Airflow's scheduler failed the task because the executor's event for it (a task that deferred
        seconds after it started) came while the scheduler still saw it queued ("task state changed externally"):
        Airflow's race on a loaded machine, not the task's doing."""
        log = self.home.parent / "standalone.log"
        needle = f"<TaskInstance: {dag_id}.{task_id} {run_id} [queued]"
        return log.is_file() and any(
            needle in line and "state attribute is queued" in line
            for line in log.read_text(errors="replace").splitlines()
        )

    def wait_for_backfill(
        self, backfill_id: int, count: int, timeout_s: float = 900, dag_id: str = "consumed_ledger_trim"
    ) -> list[dict]:
        """Until the backfill is completed; the DAG's backfill runs (all must have succeeded)."""
        deadline = time.monotonic() + timeout_s
        while True:
            backfill = self.api().get(f"/api/v2/backfills/{backfill_id}")
            if backfill["completed_at"] is not None:
                break
            assert time.monotonic() < deadline, (
                f"backfill {backfill_id} still running: {self.runs('backfill', dag_id)}"
            )
            time.sleep(3)
        runs = self.runs("backfill", dag_id)
        assert len(runs) == count and {r["state"] for r in runs} == {"success"}, runs
        return runs


@contextlib.contextmanager
def running_standalone(
    base: Path, postgres_server, store: Store, metadata_url: str, dag_ids: list[str], **settings: str
) -> Iterator[LiveAirflow]:
    """`airflow standalone` on ``store`` until every DAG of ``dag_ids`` is listed; ``settings``: environment
    variables over the defaults below (``AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE="True"`` lets the scheduler create
    scheduled runs, which the default keeps off so that only a test's own runs touch the store)."""
    port = free_port()
    home = base / "airflow-home"
    home.mkdir()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        # Airflow's own database on the PostgreSQL server too, as in the compose deployment (on SQLite the
        # scheduler and a CLI writing at once meet "database is locked").
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": postgres_server.create_database("airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        # The DAG files do not change during the test: parse them once, not every 30 s beside the runs.
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
        "HOUSEKEEPING_STORE_ROOT": str(store.root),
        "HOUSEKEEPING_METADATA_URL": metadata_url,
        # As `make airflow` runs it: the Spark steps on the Spark Connect server.
        "HOUSEKEEPING_SPARK_CONN_ID": SPARK_CONNECT_CONN_ID,
        "HOUSEKEEPING_MAX_DELETED_SHARE": "1.0",
        "HOUSEKEEPING_PURGE_GRACE_SECONDS": str(GRACE_SECONDS),
        # An approval request nobody answers is rejected after this long (the scheduler's sweep applies the
        # request's default answer); long enough for the browser to answer the others first.
        "HOUSEKEEPING_APPROVAL_TIMEOUT_SECONDS": str(APPROVAL_TIMEOUT_SECONDS),
        **settings,
    }
    # As scripts/airflow-standalone.sh does: the database, then the deleting steps' one-slot pool.
    for command in (
        ["db", "migrate"],
        ["pools", "set", DELETING_POOL, "1", DELETING_POOL_DESCRIPTION],
    ):
        subprocess.run([str(VENV_BIN / "airflow"), *command], env=env, check=True, capture_output=True)
    log = (base / "standalone.log").open("wb")
    process = subprocess.Popen(
        [str(VENV_BIN / "airflow"), "standalone"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    live = LiveAirflow(home, port, env, store)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert process.poll() is None, (base / "standalone.log").read_text()[-4000:]
            try:
                listed = {d["dag_id"] for d in live.api().get("/api/v2/dags?limit=100")["dags"]}
                if set(dag_ids) <= listed:
                    break
            except (OSError, urllib.error.URLError, KeyError, json.JSONDecodeError):
                pass
            assert time.monotonic() < deadline, (base / "standalone.log").read_text()[-4000:]
            time.sleep(2)
        yield live
    finally:
        stop_tree(process)


def stop_tree(process: subprocess.Popen) -> None:
    """standalone, its components and their workers (some start their own process groups)."""
    import psutil

    try:
        tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    for member in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.terminate()
    _, alive = psutil.wait_procs(tree, timeout=30)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    process.wait(timeout=30)
