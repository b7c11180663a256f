"""The operator of every Spark step (plan, gate, compaction's apply): spark-submit, or a Spark Connect server.

It is the provider's ``SparkSubmitOperator`` (same arguments, templating, logs and cluster support) that looks at
its connection when it runs: a ``spark`` connection submits an application as before; a ``spark_connect``
connection runs the same app file (``spark_apps/submit.py``, the same ``main``) with this Python and
``SPARK_REMOTE`` set, so the app is a client of a long-lived server (``housekeeping.orchestration.spark_connect``) instead of
a JVM started for the task. The DAG's shape and task ids do not depend on which: the connection decides at run
time, so switching a deployment is a connection change.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from housekeeping.core.spark_conf import CONNECT_SQL_CONF_ENV, is_session_setting
from housekeeping.orchestration.spark_connect import announce_busy, connect_target, port_open

CONNECT_CONN_TYPE = "spark_connect"


def connect_conf(conf: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, str]]:
    """The operator's ``conf`` split for a Connect launch: the SQL settings (``spark.sql.*``) its session sets, and
    the rest, which belong to the server (memory, executors, JVM options) and cannot be set by one client."""
    sql, server = {}, {}
    for key, value in (conf or {}).items():
        (sql if is_session_setting(key) else server)[str(key)] = str(value)
    return sql, server


class SparkAppOperator(SparkSubmitOperator):
    """A Spark app of this project, submitted or run against Spark Connect by the kind of its connection."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._connect_process: subprocess.Popen | None = None

    def execute(self, context: Any) -> None:
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        hook = SparkConnectHook(self._conn_id)
        if hook.get_connection(self._conn_id).conn_type != CONNECT_CONN_TYPE:
            return super().execute(context)
        self.run_on_connect(hook.get_connection_url())
        return None

    def run_on_connect(self, url: str) -> None:
        from airflow.exceptions import AirflowException

        from housekeeping.engine import launcher

        host, port = connect_target(url)
        if not port_open(host, port, timeout_s=5.0):
            raise AirflowException(
                f"no Spark Connect server answers at {host}:{port} (connection {self._conn_id!r}): start one "
                "(`housekeeping spark-connect start --state-dir DIR`, `make airflow` does) or point "
                "HOUSEKEEPING_SPARK_CONN_ID at a spark-submit connection"
            )
        announce_busy()  # a warm-up on the server gives way to this run
        env = {**os.environ, **(self.env_vars or {}), "SPARK_REMOTE": url}
        sql_conf, server_conf = connect_conf(self.conf)
        if server_conf:
            self.log.warning(
                "Spark Connect %s: %s are the server's settings, not a session's; not applied",
                url.split(";")[0],
                ", ".join(sorted(server_conf)),
            )
        if sql_conf:
            env[CONNECT_SQL_CONF_ENV] = json.dumps(sql_conf)
        python = env.get("PYSPARK_DRIVER_PYTHON") or None
        command = launcher.connect_command(list(self.application_args or []), python)
        self.log.info("Spark Connect %s: %s", url.split(";")[0], " ".join(command))
        self._connect_process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert self._connect_process.stdout is not None
        for line in self._connect_process.stdout:
            self.log.info("%s", line.rstrip())
        code = self._connect_process.wait()
        if code != 0:
            raise AirflowException(
                f"{self.application_args[0]} exited with code {code} on Spark Connect {url}"
            )

    def on_kill(self) -> None:
        if self._connect_process is not None and self._connect_process.poll() is None:
            self._connect_process.terminate()
            return
        super().on_kill()


class GateOperator(SparkAppOperator):
    """The gate's Spark step. Spark failing under it (a Spark Connect server restarted, a driver killed) is
    retried like any step; a plan it rejected is not: the verdict is deterministic and needs a person, so that
    failure is final at once (the gate's result document, written during this try, tells the two apart)."""

    def execute(self, context: Any) -> None:
        from airflow.exceptions import AirflowException
        from airflow.sdk.exceptions import AirflowFailException

        started = time.time()
        try:
            return super().execute(context)
        except AirflowException as error:
            if rejected_since(self.application_args or [], started):
                raise AirflowFailException(
                    f"the gate rejected the plan ({error}); apply will not run"
                ) from None
            raise


def rejected_since(application_args: list[str], started: float) -> bool:
    """Whether the run named by ``--run-dir`` in the app's arguments has a gate verdict written at or after
    ``started`` (seconds since the epoch) that rejects its plan."""
    from housekeeping.core.errors import InputError
    from housekeeping.engine.documents import read_gate_result
    from housekeeping.engine.run_dir import RunDir

    args = [str(arg) for arg in application_args]
    if "--run-dir" not in args[:-1]:
        return False
    run_dir = RunDir(args[args.index("--run-dir") + 1])
    try:
        written = run_dir.gate_result.stat().st_mtime
        result = read_gate_result(run_dir)
    except (OSError, InputError, ValueError):
        return False  # no verdict (the app died before it), or one unreadable: Spark failed, not the plan
    return result is not None and written >= started - 1 and not result.success
