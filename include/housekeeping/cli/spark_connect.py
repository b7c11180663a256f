"""``housekeeping spark-connect start | stop | status``: the long-lived Spark Connect server the DAGs' Spark steps
connect to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from housekeeping.cli.common import emit
from housekeeping.core.errors import InputError
from housekeeping.orchestration.spark_connect import DEFAULT_PORT

spark_connect_app = typer.Typer(
    no_args_is_help=True,
    help="A long-lived Spark Connect server the DAGs' Spark steps connect to (a spark_connect Airflow "
    "connection) instead of starting a Spark application per task.",
)
StateDirOpt = Annotated[
    Path,
    typer.Option("--state-dir", help="where the server's pid, port and log live (e.g. $AIRFLOW_HOME/spark)"),
]


@spark_connect_app.command("start")
def spark_connect_start(
    state_dir: StateDirOpt,
    port: Annotated[int, typer.Option("--port", help="gRPC port")] = DEFAULT_PORT,
    master: Annotated[str, typer.Option("--master", help="Spark master of the server's driver")] = "local[2]",
    driver_memory: Annotated[str, typer.Option("--driver-memory")] = "2g",
    warm_up_rounds: Annotated[
        int,
        typer.Option(
            "--warm-up-rounds",
            help="then run every mechanism's plan and gate on a small store this many times (as `warm-up`), "
            "so the first DAG runs meet a compiled planner; 0: none",
        ),
    ] = 0,
) -> None:
    """Start the server in the background (no-op when the one recorded in --state-dir runs); waits until it
    listens and prints its pid and URL."""
    from housekeeping.orchestration import spark_connect

    if warm_up_rounds < 0:
        raise InputError(f"--warm-up-rounds must be >= 0, got {warm_up_rounds}")
    pid = spark_connect.start(state_dir, port=port, master=master, driver_memory=driver_memory)
    document: dict[str, object] = {
        "pid": pid,
        "url": f"sc://localhost:{port}",
        "log": str(state_dir / "server.log"),
    }
    if warm_up_rounds:
        from housekeeping.orchestration.warm_up import warm_up

        document["warmUp"] = warm_up(f"sc://localhost:{port}", rounds=warm_up_rounds)
    emit(document, "json")


@spark_connect_app.command("warm-up")
def spark_connect_warm_up(
    url: Annotated[
        str, typer.Option("--url", help="the server's sc:// URL")
    ] = f"sc://localhost:{DEFAULT_PORT}",
    rounds: Annotated[int, typer.Option("--rounds", help="how many times each mechanism runs")] = 2,
    mechanism: Annotated[
        list[str] | None,
        typer.Option("--mechanism", help="only this mechanism (repeatable); default: every one"),
    ] = None,
    work_dir: Annotated[
        Path | None,
        typer.Option(
            "--work-dir",
            help="where the small store is generated (and removed after); the server and its executors must "
            "read it at the same path (default: the system's temporary directory)",
        ),
    ] = None,
    wait_s: Annotated[
        float, typer.Option("--wait-s", help="wait this long for a server that is still starting (compose)")
    ] = 0.0,
) -> None:
    """Run every mechanism's snapshot, plan and gate on a small generated store against a running server, so its
    JVM compiles Spark's planner before the DAGs' runs need it. Changes nothing the DAGs read; prints the seconds
    of each round."""
    from housekeeping.orchestration.warm_up import warm_up

    emit(warm_up(url, rounds=rounds, mechanisms=mechanism, work_dir=work_dir, wait_s=wait_s), "json")


@spark_connect_app.command("stop")
def spark_connect_stop(state_dir: StateDirOpt) -> None:
    """Stop the server recorded in --state-dir (exit 0 whether or not one ran)."""
    from housekeeping.orchestration import spark_connect

    emit({"stopped": spark_connect.stop(state_dir)}, "json")


@spark_connect_app.command("status")
def spark_connect_status(state_dir: StateDirOpt) -> None:
    """Whether the server recorded in --state-dir runs and listens; exit 1 when it does not."""
    from housekeeping.orchestration import spark_connect

    document = spark_connect.status(state_dir)
    emit(document, "json")
    if not document["listening"]:
        raise typer.Exit(1)
