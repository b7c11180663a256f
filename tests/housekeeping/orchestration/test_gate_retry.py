"""The gate step is retried when Spark fails under it and fails at once when it rejected the plan. The soak found
it: a Spark Connect server restarted while a gate ran (``NO_ACTIVE_SESSION``) failed that run for good, because
the gate had no retries at all."""

from __future__ import annotations

import os

import pytest

from housekeeping.engine.documents import GateResult, write_document
from housekeeping.engine.run_dir import RunDir

pytestmark = pytest.mark.unit


def _gate(tmp_path, monkeypatch, outcome):
    """The trim DAG's gate task on a run directory in ``tmp_path``, its Spark step replaced by ``outcome``."""
    from airflow.exceptions import AirflowException

    from housekeeping.orchestration import dags
    from housekeeping.orchestration.spark_operator import SparkAppOperator

    def run_app(self, context):
        outcome(RunDir(tmp_path))
        raise AirflowException("spark_apps.validate_plan exited with code 1")

    monkeypatch.setattr(SparkAppOperator, "execute", run_app)
    gate = dags.build_housekeeping_dag("trim", doc_md="test").get_task("validate_trim_plan")
    args = list(gate.application_args)
    args[args.index("--run-dir") + 1] = str(tmp_path)  # the rendered template
    gate.application_args = args
    return gate


def _verdict(success: bool):
    def write(run_dir: RunDir) -> None:
        run_dir.gate_result.parent.mkdir(parents=True, exist_ok=True)
        write_document(run_dir.gate_result, GateResult("trim", success, "digest"))

    return write


def test_the_gate_task_has_retries(tmp_path, monkeypatch):
    gate = _gate(tmp_path, monkeypatch, lambda run_dir: None)
    assert gate.retries >= 1


def test_a_rejected_plan_fails_the_gate_for_good(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match="the gate rejected the plan"):
        _gate(tmp_path, monkeypatch, _verdict(False)).execute({})


def test_spark_failing_under_the_gate_is_left_to_the_retries(tmp_path, monkeypatch):
    from airflow.exceptions import AirflowException
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowException) as raised:
        _gate(tmp_path, monkeypatch, lambda run_dir: None).execute({})  # died before any verdict
    assert not isinstance(raised.value, AirflowFailException)


def test_an_earlier_tries_rejection_does_not_make_this_failure_final(tmp_path, monkeypatch):
    from airflow.exceptions import AirflowException
    from airflow.sdk.exceptions import AirflowFailException

    _verdict(False)(RunDir(tmp_path))
    old = RunDir(tmp_path).gate_result
    os.utime(old, (old.stat().st_atime - 600, old.stat().st_mtime - 600))
    with pytest.raises(AirflowException) as raised:
        _gate(tmp_path, monkeypatch, lambda run_dir: None).execute({})
    assert not isinstance(raised.value, AirflowFailException)


def test_a_passing_verdict_with_a_failed_app_is_retried(tmp_path, monkeypatch):
    from airflow.exceptions import AirflowException
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowException) as raised:
        _gate(tmp_path, monkeypatch, _verdict(True)).execute({})  # killed after the verdict, before its exit
    assert not isinstance(raised.value, AirflowFailException)
