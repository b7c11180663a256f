"""The CLI's in-process run (``housekeeping.cli.runs.plan_in_process``): the snapshot is read while Spark starts, so
a cold run waits for the longer of the two, not for both; bad input the snapshot meets is still raised, naming what
is wrong (tests/e2e/test_bad_input.py shows the store unchanged)."""

from __future__ import annotations

import threading

import pytest

from housekeeping.cli import runs
from housekeeping.core.errors import InputError
from housekeeping.engine.documents import Intent
from housekeeping.mechanisms import steps

pytestmark = pytest.mark.unit

WAIT_SECONDS = 30


def test_the_snapshot_is_read_while_spark_starts(monkeypatch, tmp_path):
    """Each side waits for the other to have begun: run one after the other, the first would time out."""
    snapshot_began, spark_began = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def snapshot(store, mechanism, **kwargs):
        snapshot_began.set()
        seen["snapshot thread"] = threading.current_thread().name
        assert spark_began.wait(WAIT_SECONDS), "Spark did not start while the snapshot was read"
        seen["snapshot"] = kwargs["run_dir"]

    def start_spark(master):
        spark_began.set()
        assert snapshot_began.wait(WAIT_SECONDS), "the snapshot was not read while Spark started"
        return "session"

    def plan_and_gate(run_dir, mechanism, master, spark=None):
        assert "snapshot" in seen, "the plan runs on a finished snapshot"
        return {"success": True, "spark": spark, "mechanism": mechanism}

    monkeypatch.setattr(steps, "snapshot_step", snapshot)
    monkeypatch.setattr(steps, "start_local_spark", start_spark)
    monkeypatch.setattr(steps, "plan_and_gate_in_process", plan_and_gate)
    _, verdict = runs.plan_in_process(
        "trim", None, "2026-11-01T00:00:00Z", None, tmp_path, "r", {}, Intent.PLAN
    )
    assert verdict == {"success": True, "spark": "session", "mechanism": "trim"}
    assert seen["snapshot"] == tmp_path and seen["snapshot thread"] != threading.main_thread().name


def test_bad_input_the_snapshot_meets_is_raised_once_spark_is_up(monkeypatch, tmp_path):
    started = []

    def snapshot(store, mechanism, **kwargs):
        raise InputError("scope 'persistent://nope/*' matches no topic in store /s")

    monkeypatch.setattr(steps, "snapshot_step", snapshot)
    monkeypatch.setattr(steps, "start_local_spark", lambda master: started.append(master) or "session")
    monkeypatch.setattr(
        steps, "plan_and_gate_in_process", lambda *a, **k: pytest.fail("planned on bad input")
    )
    with pytest.raises(InputError, match="scope 'persistent://nope/\\*' matches no topic"):
        runs.plan_in_process(
            "trim", None, "2026-11-01T00:00:00Z", "persistent://nope/*", tmp_path, "r", {}, Intent.PLAN
        )
    assert started, "Spark was started beside the snapshot"
