"""The installed ``housekeeping`` command works without activating anything (docs/cli.md).

Run by its full path, as cron, systemd or another tool runs it, with a PATH that does not hold the virtualenv and
whose first ``python3`` is a stand-in that refuses to run: Spark's Python workers must start the interpreter the
command runs in (``spark_apps.shared.session.use_own_interpreter``), never the first ``python3`` on PATH. The
``plan`` of every mechanism whose Spark code starts Python workers goes through the entry point this way (found
in the source, so a planner or gate that starts using them is covered without editing this file); the others
run in the JVM only, and their CLI runs are in-process in tests/e2e/test_cli_contract.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from housekeeping.mechanisms.registry import mechanism_names
from tests.conftest import REPO

pytestmark = pytest.mark.processes

# What makes Spark start Python worker processes (a DataFrame built from local Python data does not).
PYTHON_WORKER_CALLS = ("applyInPandas", "mapInPandas", "mapInArrow", "pandas_udf", "udf(", ".rdd", "foreach(")


def mechanisms_with_python_workers() -> list[str]:
    def starts_workers(folder: Path) -> bool:
        return any(call in f.read_text() for f in folder.glob("*.py") for call in PYTHON_WORKER_CALLS)

    if starts_workers(REPO / "spark_apps" / "shared") or starts_workers(REPO / "spark_apps"):
        return list(mechanism_names())
    return [name for name in mechanism_names() if starts_workers(REPO / "spark_apps" / name)]


MECHANISMS = mechanisms_with_python_workers()

COMMAND = Path(sys.executable).parent / "housekeeping"
AS_OF = "2026-11-02T00:00:00Z"


@pytest.fixture(scope="module")
def bare_env(tmp_path_factory) -> dict[str, str]:
    """No virtualenv on PATH, no PYSPARK_* variables, and a python3 first on PATH that fails loudly."""
    bin_dir = tmp_path_factory.mktemp("bare-bin")
    stand_in = bin_dir / "python3"
    stand_in.write_text(
        '#!/bin/sh\necho "wrong interpreter: the first python3 on PATH was started" >&2\nexit 97\n'
    )
    stand_in.chmod(0o755)
    java = shutil.which("java")
    assert java is not None
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYSPARK_", "VIRTUAL_ENV")) and k not in ("PATH", "PYTHONPATH")
    }
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(java).resolve().parent), "/usr/bin", "/bin"])
    assert str(Path(sys.executable).parent) not in env["PATH"]
    return env


@pytest.fixture(scope="module")
def store_root(tmp_path_factory, bare_env) -> Path:
    root = tmp_path_factory.mktemp("bare") / "store"
    subprocess.run(
        [str(COMMAND), "generate", "--store", str(root), "--topics", "12", "--seed", "5"],
        env=bare_env,
        check=True,
        capture_output=True,
    )
    return root


def test_some_planner_starts_python_workers_so_the_check_below_means_something():
    assert MECHANISMS, "no mechanism's Spark code starts Python workers: the interpreter check tests nothing"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_plan_through_the_entry_point_uses_its_own_interpreter(store_root, bare_env, mechanism):
    done = subprocess.run(
        [str(COMMAND), "plan", mechanism, "--store", str(store_root), "--as-of", AS_OF, "--format", "json"],
        env=bare_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "wrong interpreter" not in done.stderr
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    assert document["mechanism"] == mechanism and document["gate"]["success"]
