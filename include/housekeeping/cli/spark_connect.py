"""``housekeeping spark-connect start | stop | status``: the long-lived Spark Connect server the DAGs' Spark steps
connect to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from housekeeping.cli.common import emit
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
) -> None:
    """Start the server in the background (no-op when the one recorded in --state-dir runs); waits until it
    listens and prints its pid and URL."""
    from housekeeping.orchestration import spark_connect

    pid = spark_connect.start(state_dir, port=port, master=master, driver_memory=driver_memory)
    emit({"pid": pid, "url": f"sc://localhost:{port}", "log": str(state_dir / "server.log")}, "json")


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
