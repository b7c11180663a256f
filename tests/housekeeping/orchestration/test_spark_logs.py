"""A Spark step's task log says what the step did, not Spark's start-up: the spark-submit of every Spark step runs
its driver with the project's log settings (warnings and errors only), beside any driver options it already has."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.processes]

APP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").appName("log-settings").getOrCreate()
print("rows", spark.range(3).count())
spark.stop()
"""


def test_a_spark_steps_driver_logs_no_info_lines_and_keeps_its_own_options(tmp_path, monkeypatch):
    from housekeeping.orchestration.dags import spark_submit

    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Dhousekeeping.test=kept")
    operator = spark_submit("plan_ledger_trim", "spark_apps.trim.plan", ["--run-dir", "x"], "trim")
    options = operator.env_vars["SPARK_SUBMIT_OPTS"]
    assert options.startswith("-Dhousekeeping.test=kept ") and "spark-log4j2.properties" in options
    app = tmp_path / "app.py"
    app.write_text(APP)
    spark_submit_bin = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    done = subprocess.run(
        [spark_submit_bin, str(app)],
        env={**os.environ, "SPARK_SUBMIT_OPTS": options},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "rows 3" in done.stdout, done.stderr[-2000:]
    assert " INFO " not in done.stderr, [line for line in done.stderr.splitlines() if " INFO " in line][:5]
