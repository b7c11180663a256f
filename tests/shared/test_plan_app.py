"""The plan apps' one skeleton (``spark_apps.shared.plan_app``), without Spark: every mechanism's plan module is a
PlanApp of its own name; the skeleton reads the run, heads the mechanism's figures with which plan they are, writes
``plan/summary.json``; a run directory without a snapshot or a command line without ``--run-dir`` is
refused."""

from __future__ import annotations

import importlib
import json

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine.plan import read_summary
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms import registry
from spark_apps.shared.plan_app import PlanApp

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", registry.mechanism_names())
def test_every_plan_module_is_the_skeleton_of_its_own_mechanism(name):
    module = importlib.import_module(registry.get_mechanism(name).plan_app)
    assert isinstance(module.APP, PlanApp) and module.APP.mechanism == name
    assert (module.run, module.main, module.parse_args) == (
        module.APP.run,
        module.APP.main,
        module.APP.parse_args,
    )


def _app(executed: list) -> PlanApp:
    def execute(spark, run, info):
        executed.append((spark, run.path, info.run_id))
        (run.plan_dir / "decisions").mkdir(parents=True)
        return {"ledgersToDelete": 3, "perNamespace": {"t/ns": {"ledgers": 3}}}

    return PlanApp("trim", "Plan something.", execute)


def test_the_summary_says_which_plan_its_figures_are_of_and_is_written(tmp_path):
    RunDir(tmp_path).run_info.parent.mkdir()
    RunDir(tmp_path).run_info.write_text(
        json.dumps({"runId": "r-1", "mechanism": "trim", "asOfMs": 1793577600000})
    )
    executed: list = []
    app = _app(executed)
    summary = app.run("the session", tmp_path)
    assert executed == [("the session", tmp_path, "r-1")]
    assert summary == {
        "mechanism": "trim",
        "runId": "r-1",
        "asOfMs": 1793577600000,
        "ledgersToDelete": 3,
        "perNamespace": {"t/ns": {"ledgers": 3}},
    }
    assert read_summary(tmp_path).as_json() == summary


def test_a_run_directory_without_a_snapshot_is_refused_before_anything_is_planned(tmp_path):
    executed: list = []
    with pytest.raises(InputError, match=f"run directory {tmp_path} has no snapshot"):
        _app(executed).run("the session", tmp_path)
    assert executed == [] and not RunDir(tmp_path).plan_dir.exists()


def test_the_command_line_requires_the_run_directory(capsys):
    with pytest.raises(SystemExit):
        _app([]).parse_args([])
    assert "--run-dir" in capsys.readouterr().err
    assert _app([]).parse_args(["--run-dir", "x"]).run_dir == "x"


def test_a_plan_is_said_in_one_line_with_bytes_in_human_units():
    from pathlib import Path

    from spark_apps.shared.plan_app import describe_plan

    line = describe_plan(
        {"mechanism": "trim", "runId": "r-1", "asOfMs": 5, "ledgersToDelete": 39, "bytesToDelete": 172_339,
         "perNamespace": {"a/b": {}, "c/d": {}}, "warning": None},
        Path("/s/runs/trim/r-1/plan/summary.json"),
    )  # fmt: skip
    assert line == (
        "PLAN: trim run r-1: bytesToDelete=168.3 KiB, ledgersToDelete=39, perNamespace: 2 entries, warning=None "
        "(/s/runs/trim/r-1/plan/summary.json)"
    )
