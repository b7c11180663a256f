"""The installed ``housekeeping`` command works without activating anything (docs/cli.md).

Run by its full path, as cron, systemd or another tool runs it, with a PATH that does not hold the virtualenv and
whose first ``python3`` is a stand-in that refuses to run: Spark's Python workers must start the interpreter the
command runs in (``spark_apps.shared.session.use_own_interpreter``), never the first ``python3`` on PATH.

What makes that hold for every piece of Spark code that starts Python workers is one fact checked here without
Spark: every session of the project comes from the one builder, ``spark_apps.shared.session.get_spark``, which
sets the interpreter before the session starts; the workers then import the project's code from the same
installed packages whichever mechanism's or shared module's code they run. So the entry point is run once, with
the ``plan`` of one mechanism whose Spark code starts workers on any store (``WORKER_RUN``, the scrub's: it reads
every stored ledger's files in Python workers). A run per worker-starting mechanism would take the same session
path in a cold process each. The CLI runs of the others are in-process (tests/housekeeping/cli/test_cli_contract.py).
"""

from __future__ import annotations

import json
import os
import re
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


def _starts_workers(path: Path) -> bool:
    return any(call in path.read_text() for call in PYTHON_WORKER_CALLS)


def mechanisms_with_python_workers() -> list[str]:
    """The mechanisms whose own Spark package starts Python workers."""
    return [
        name
        for name in mechanism_names()
        if any(_starts_workers(f) for f in (REPO / "spark_apps" / name).glob("*.py"))
    ]


def session_builders() -> dict[str, list[int]]:
    """The project's Python files that build a SparkSession or SparkContext, with the lines doing it."""
    pattern = re.compile(r"SparkSession\.builder|SparkContext\(")
    found: dict[str, list[int]] = {}
    for top in ("spark_apps", "include", "plugins", "dags"):
        for path in sorted((REPO / top).rglob("*.py")):
            lines = [i for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
            if lines:
                found[str(path.relative_to(REPO))] = lines
    return found


# The one mechanism planned through the entry point: its Spark code starts Python workers on every store.
WORKER_RUN = "scrub"

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


def test_every_session_comes_from_the_one_builder_that_sets_the_interpreter():
    """The reason one worker-starting run stands for all: a second builder would need a run of its own."""
    assert list(session_builders()) == ["spark_apps/shared/session.py"], session_builders()


def test_the_mechanism_planned_below_starts_python_workers_so_the_check_means_something():
    assert WORKER_RUN in mechanisms_with_python_workers(), (
        f"{WORKER_RUN}'s Spark code no longer starts Python workers: plan one whose code does "
        f"({mechanisms_with_python_workers()}) in WORKER_RUN"
    )


def plan_through_the_command(env: dict[str, str], mechanism: str, store: Path, as_of: str) -> dict:
    """`housekeeping plan MECHANISM` by the entry point's full path: it ran with its own interpreter (the stand-in
    was never started) and succeeded; its JSON document."""
    done = subprocess.run(
        [str(COMMAND), "plan", mechanism, "--store", str(store), "--as-of", as_of, "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "wrong interpreter" not in done.stderr
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_plan_whose_code_starts_python_workers_uses_the_commands_own_interpreter(store_root, bare_env):
    """The scrub's plan reads every stored ledger's files in Python workers (``spark_apps/scrub/files.py``)."""
    document = plan_through_the_command(bare_env, WORKER_RUN, store_root, AS_OF)
    assert document["mechanism"] == WORKER_RUN and document["gate"]["success"]
    assert document["summary"]["ledgersChecked"] > 0, f"the {WORKER_RUN} plan read no ledger file: {document}"
