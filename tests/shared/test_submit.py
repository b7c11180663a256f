"""``spark_apps/submit.py``: an app's error is recorded as its run's step failure (the console's reason for the run),
refused for bad input, under the task's step name; a run it cannot name is left alone."""

from __future__ import annotations

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine.documents import read_step_failures
from spark_apps.submit import record_failure

pytestmark = pytest.mark.unit


def test_an_apps_error_is_its_runs_step_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("HOUSEKEEPING_STEP", "plan_ledger_trim")
    record_failure(
        ["spark_apps.trim.plan", "--run-dir", str(tmp_path)], InputError("run.json names store /x")
    )
    monkeypatch.delenv("HOUSEKEEPING_STEP")
    record_failure(["spark_apps.gc.plan", "--run-dir", str(tmp_path)], RuntimeError("executor lost"))
    failures = {f.step: f for f in read_step_failures(tmp_path)}
    assert (
        failures["plan_ledger_trim"].refused
        and failures["plan_ledger_trim"].message == "run.json names store /x"
    )
    assert not failures["plan"].refused and failures["plan"].message == "RuntimeError: executor lost"


def test_an_app_without_a_run_directory_records_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    record_failure(["spark_apps.what_if.app", "--request", "r.json"], RuntimeError("x"))
    record_failure(["spark_apps.trim.plan", "--run-dir"], RuntimeError("x"))
    assert list(tmp_path.iterdir()) == []
