"""The one library module that reaches the Spark apps (``spark_apps``): where spark-submit finds them, the command
a Spark Connect launch runs, and how the CLI and the tests run the same apps in-process on one SparkSession. Which
app a mechanism runs comes from the mechanism (``Mechanism.plan_app``, ...): the DAG factory and the run steps never
name an app themselves."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import spark_apps
from housekeeping.engine.mechanism import Mechanism

if TYPE_CHECKING:
    from housekeeping.store.store import Store

SPARK_APPS_DIR = Path(spark_apps.__file__).resolve().parent
# spark-submit runs this file with the app's module as its first argument (spark_apps/submit.py).
SUBMIT_APP = SPARK_APPS_DIR / "submit.py"
GATE_APP = "spark_apps.validate_plan"
SWEEP_APP = "spark_apps.sweep"
WHAT_IF_APP = "spark_apps.what_if"  # the policy_what_if DAG's Spark step


def submit_args(module: str, args: list[str]) -> list[str]:
    """The application arguments of ``spark-submit SUBMIT_APP ...`` that run ``module`` with ``args``."""
    return [module, *args]


def connect_command(application_args: list[str], python: str | None = None) -> list[str]:
    """The command a Spark Connect launch runs: the same file spark-submit runs, with plain Python (the caller
    sets ``SPARK_REMOTE``)."""
    return [python or sys.executable, str(SUBMIT_APP), *application_args]


def local_spark(master: str, driver_conf: dict[str, str] | None = None) -> Any:
    """The in-process SparkSession (CLI, tests, benchmarks): the same apps' ``run`` functions the DAGs'
    spark-submit calls."""
    from spark_apps.shared.session import get_spark

    return get_spark("housekeeping-cli", master, driver_conf)


def app(module: str) -> Any:
    return importlib.import_module(module)


def plan_in_process(spark: Any, run_dir: Path, spec: Mechanism) -> dict[str, Any]:
    return app(spec.plan_app).run(spark, run_dir)


def gate_in_process(spark: Any, run_dir: Path, spec: Mechanism) -> dict[str, Any]:
    return app(GATE_APP).run(spark, run_dir, spec.name)


def apply_in_process(
    spark: Any, run_dir: Path, spec: Mechanism, store: Store, purge_grace_seconds: int
) -> dict[str, Any]:
    """A mechanism whose apply is a Spark app (compaction writes ledgers with Spark): the DAG submits it, the CLI
    runs it here."""
    assert spec.apply_app is not None
    return app(spec.apply_app).run(spark, run_dir, store, purge_grace_seconds)


def sweep_in_process(spark: Any, run_dirs: list[Path], spec: Mechanism) -> list[dict[str, Any]]:
    """A policy sweep's points, one snapshot directory each, measured in this one Spark session."""
    return app(SWEEP_APP).run(spark, run_dirs, spec.plan_app)
