"""A Spark standalone cluster for the tests: a master and one worker (2 cores, 2 GiB) started from pyspark's own
distribution (spark-class ...deploy.master.Master / ...deploy.worker.Worker on 127.0.0.1, free ports), stopped by
the test session. The deployment's topology (docker-compose.yaml's spark-master and spark-worker), natively.

:func:`submit_app` runs one of the project's Spark apps on it as a DAG's Spark step does: the DAG factory's own
operator (``housekeeping.orchestration.dags.spark_submit``, a SparkSubmitOperator) with a ``spark`` connection at
the master in client mode."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark
import pytest

from tests.pg_server import free_port

SPARK_HOME = Path(pyspark.__file__).parent
# The Airflow connection submit_app names (set in the environment, JSON form, for the call).
CONNECTION_ID = "spark_standalone_test"


@dataclass
class StandaloneCluster:
    master: str  # spark://127.0.0.1:PORT
    web_port: int
    work_dir: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    @classmethod
    def start(cls, base: Path, jvm_options: str) -> StandaloneCluster:
        """Master and worker under ``base`` (logs, the worker's work directory), their JVMs with ``jvm_options``."""
        work_dir = base / "work"
        work_dir.mkdir(parents=True)
        port, web_port, worker_web_port = free_port(), free_port(), free_port()
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(base / "logs"),
            # The master's and worker's JVMs as the suite's drivers (tests/spark-conf); the executors they launch
            # get the same from spark.executor.extraJavaOptions there.
            "SPARK_DAEMON_JAVA_OPTS": jvm_options,
        }
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        cluster = cls(f"spark://127.0.0.1:{port}", web_port, work_dir)
        try:
            for name, args in (
                (
                    "master",
                    ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
                    + ["--webui-port", str(web_port)],
                ),
                (
                    "worker",
                    ["org.apache.spark.deploy.worker.Worker", cluster.master, "--host", "127.0.0.1"]
                    + ["--cores", "2", "--memory", "2g", "--work-dir", str(work_dir)]
                    + ["--webui-port", str(worker_web_port)],
                ),
            ):
                log = (base / f"{name}.log").open("wb")
                cluster.processes.append(
                    subprocess.Popen([spark_class, *args], stdout=log, stderr=subprocess.STDOUT, env=env)
                )
                if name == "master":
                    _wait(cluster.state, base / "master.log")
            _wait(lambda: cluster.state()["aliveworkers"] >= 1 or None, base / "worker.log")
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def state(self) -> dict:
        """The master's state (its web UI's /json/): workers, running and completed apps."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=5) as response:
            return json.load(response)

    def connection(self) -> str:
        """The Airflow connection (JSON form) of a spark-submit to this master in client mode, as docker-compose.yaml
        sets AIRFLOW_CONN_SPARK_DEFAULT."""
        return json.dumps({"conn_type": "spark", "host": self.master, "extra": {"deploy-mode": "client"}})

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _wait(probe, log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if probe():
                return
        except (OSError, ValueError):  # not listening yet, or its UI serves the HTML page before /json/
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"Spark standalone not up after {timeout_s} s:\n{log.read_text()[-4000:]}")
        time.sleep(0.5)


def submit_app(
    cluster: StandaloneCluster, task_id: str, module: str, args: list[str], mechanism: str
) -> None:
    """Run Spark app ``module`` with ``args`` on the cluster through the DAGs' own Spark operator (spark-submit in
    client mode: the driver here, the executors on the worker). The caller has an Airflow home (``airflow_db``)."""
    from housekeeping.orchestration.dags import spark_submit

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(f"AIRFLOW_CONN_{CONNECTION_ID.upper()}", cluster.connection())
        patch.setenv("HOUSEKEEPING_SPARK_CONN_ID", CONNECTION_ID)
        patch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver, as the executors see it
        spark_submit(task_id, module, args, mechanism).execute(context={})
