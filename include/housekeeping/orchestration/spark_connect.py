"""A long-lived Spark Connect server for the DAGs' Spark steps (``housekeeping spark-connect start|stop|status``).

A cold Spark application spends seconds starting its JVM before any work, and a DAG run starts two or three of
them around milliseconds of planning. With a Spark Connect connection (``conn_type`` ``spark_connect``) the
tasks connect to this server instead (``housekeeping.orchestration.spark_operator``); the server is an ordinary Spark driver
(``org.apache.spark.sql.connect.service.SparkConnectServer``, shipped in pyspark's jars) started once by the
set-up, ``make airflow`` and compose. Each task opens its own Connect session and closes it when it ends, so
runs share the JVM and nothing else (temporary views, cached and checkpointed data are per session).

The server's state lives in one directory (``--state-dir``): ``server.pid``, ``server.port`` and ``server.log``.
"""

from __future__ import annotations

import glob
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from housekeeping.core.errors import HousekeepingError, InputError
from housekeeping.core.spark_conf import LONG_LIVED_DRIVER_CONF

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's own default
# A file every Spark step launched on the Connect server touches as it starts, when set; a warm-up on the same server
# stops as soon as it is touched, so a DAG run never waits behind the warm-up (`make airflow` sets it).
BUSY_FILE_ENV = "HOUSEKEEPING_SPARK_CONNECT_BUSY_FILE"


def busy_file() -> Path | None:
    """The file of ``BUSY_FILE_ENV``, if set."""
    busy = os.environ.get(BUSY_FILE_ENV)
    return Path(busy) if busy else None


def announce_busy() -> None:
    """Tell a warm-up on this server that a DAG's Spark step is starting (see ``BUSY_FILE_ENV``)."""
    path = busy_file()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


SERVER_CONF = {
    **LONG_LIVED_DRIVER_CONF,
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.maxPlanStringLength": "200000",
    # A session whose client died without closing it is dropped after this long (Spark's default is 60 min).
    "spark.connect.session.manager.defaultSessionTimeout": "10min",
}


class SparkConnectError(HousekeepingError):
    exit_code = 1


@dataclass(frozen=True)
class ServerState:
    state_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "server.pid"

    @property
    def port_file(self) -> Path:
        return self.state_dir / "server.port"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "server.log"

    def pid(self) -> int | None:
        """The recorded server's pid if that process is alive."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        return pid

    def port(self) -> int | None:
        try:
            return int(self.port_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None


def spark_home() -> Path:
    """SPARK_HOME if set, else the Spark that pyspark's wheel ships (its bin/ and jars/)."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def connect_jar(home: Path) -> Path:
    found = sorted(glob.glob(str(home / "jars" / "spark-connect_*.jar")))
    if not found:
        raise SparkConnectError(
            f"no spark-connect jar under {home / 'jars'}: this Spark has no Connect server"
        )
    return Path(found[-1])


def server_command(port: int, master: str, driver_memory: str, extra_conf: dict[str, str]) -> list[str]:
    home = spark_home()
    conf = {**SERVER_CONF, "spark.connect.grpc.binding.port": str(port), **extra_conf}
    command = [str(home / "bin" / "spark-submit"), "--master", master, "--driver-memory", driver_memory]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "--class", SERVER_CLASS, "--name", "housekeeping-spark-connect", str(connect_jar(home))]


def connect_target(url: str) -> tuple[str, int]:
    """Host and port of an ``sc://host:port/;params`` URL (Spark Connect's default port when absent)."""
    parsed = urlparse(url)
    return parsed.hostname or "localhost", parsed.port or DEFAULT_PORT


def port_open(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def start(
    state_dir: Path,
    *,
    port: int = DEFAULT_PORT,
    master: str = "local[2]",
    driver_memory: str = "2g",
    extra_conf: dict[str, str] | None = None,
    wait_s: float = 120.0,
) -> int:
    """Start the server in the background (its own process group) unless one recorded in ``state_dir`` runs;
    wait until it accepts connections. Returns its pid. Refuses a port another process holds."""
    state = ServerState(state_dir)
    running = state.pid()
    if running is not None:
        if state.port() != port:
            raise InputError(
                f"a Spark Connect server (pid {running}) already runs from {state_dir} on port {state.port()}, "
                f"not {port}: stop it first (housekeeping spark-connect stop --state-dir {state_dir})"
            )
        return running
    if port_open("127.0.0.1", port):
        raise InputError(f"port {port} is taken by another process: pass --port with a free port")
    state_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # Python workers (the backlog planner's grouped pandas function) run this interpreter unless told otherwise.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    with open(state.log_file, "ab") as log:
        process = subprocess.Popen(
            server_command(port, master, driver_memory, extra_conf or {}),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    state.pid_file.write_text(f"{process.pid}\n")
    state.port_file.write_text(f"{port}\n")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SparkConnectError(
                f"the Spark Connect server exited with {process.returncode} at start; see {state.log_file}"
            )
        if port_open("127.0.0.1", port):
            return process.pid
        time.sleep(0.25)
    stop(state_dir)
    raise SparkConnectError(f"the Spark Connect server did not listen on port {port} in {wait_s:.0f} s")


def stop(state_dir: Path, wait_s: float = 30.0) -> bool:
    """Stop the server recorded in ``state_dir`` (SIGTERM to its process group, SIGKILL after ``wait_s``).
    Returns whether one was running."""
    state = ServerState(state_dir)
    pid = state.pid()
    if pid is None:
        return False
    os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and state.pid() is not None:
        try:
            # Reap it when it is our child (the tests start and stop it in one process).
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    if state.pid() is not None:
        os.killpg(pid, signal.SIGKILL)
    # Emptied, not deleted: only housekeeping.store.fs deletes files (tests/housekeeping/core/test_hostile_names.py), and a
    # pid left behind could name another process later.
    state.pid_file.write_text("")
    return True


def status(state_dir: Path) -> dict[str, object]:
    state = ServerState(state_dir)
    pid = state.pid()
    port = state.port()
    return {
        "running": pid is not None,
        "pid": pid,
        "port": port,
        "listening": bool(port and pid is not None and port_open("127.0.0.1", port)),
        "url": f"sc://localhost:{port}" if port else None,
        "log": str(state.log_file),
    }
