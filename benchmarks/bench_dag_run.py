"""Benchmark: the fixed cost of a DAG run. `airflow dags test consumed_ledger_trim` (or `--dag`, e.g.
inactive_topic_gc) on a freshly generated demo store, with the Spark steps on spark-submit and on a Spark Connect
server, side by side in one invocation.

    source scripts/env.sh
    python benchmarks/bench_dag_run.py [--dag DAG_ID] [--topics 40 | --template STORE] [--runs 2]
        [--modes submit,connect] [--warm-up-rounds N] [--json OUT]

Each run regenerates the store (same seed), or copies ``--template`` (a store generated before, e.g. by
bench_scale.py --keep: the 100,000-topic run), so every run plans and applies the same thing. Prints the whole
command's wall time and each task's (from the `[DAG TEST] starting/end task` lines). With `connect`, the server
is started once before the first run (its start is reported apart): run 1 meets a fresh server, later runs a
warm one, which is what a long-lived deployment sees; ``--warm-up-rounds N`` warms the fresh server first as
``housekeeping spark-connect start --warm-up-rounds N`` does (reported apart too).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

DEFAULT_DAG_ID = "consumed_ledger_trim"
LOGICAL_DATE = "2026-11-01T00:00:00+00:00"
TASK_LINE = re.compile(r"^(\S+Z) .*\[DAG TEST\] (starting|end task) task_id=(\w+)")


def task_seconds(log: str) -> dict[str, float]:
    started: dict[str, datetime] = {}
    seconds: dict[str, float] = {}
    for line in log.splitlines():
        match = TASK_LINE.match(line)
        if not match:
            continue
        moment = datetime.fromisoformat(match.group(1).replace("Z", "+00:00"))
        if match.group(2) == "starting":
            started[match.group(3)] = moment
        else:
            seconds[match.group(3)] = round((moment - started[match.group(3)]).total_seconds(), 1)
    return seconds


def dag_run(
    dag_id: str, env: dict[str, str], store: Path, topics: int, template: Path | None
) -> dict[str, object]:
    subprocess.run(["rm", "-rf", str(store)], check=True)
    subprocess.run(
        ["cp", "-a", str(template), str(store)]
        if template
        else ["housekeeping", "generate", "--store", str(store), "--topics", str(topics), "--seed", "7"],
        env=env,
        check=True,
        capture_output=True,
    )
    started = time.perf_counter()
    done = subprocess.run(
        ["airflow", "dags", "test", dag_id, LOGICAL_DATE], env=env, capture_output=True, text=True
    )
    wall = round(time.perf_counter() - started, 1)
    log = done.stdout + done.stderr
    if done.returncode != 0 or "state=success" not in log:
        raise SystemExit(f"the DAG run failed:\n{log[-4000:]}")
    return {"wall_s": wall, "tasks_s": task_seconds(log)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dag", default=DEFAULT_DAG_ID, help="the DAG id to run (default: %(default)s)")
    parser.add_argument("--topics", type=int, default=40)
    parser.add_argument("--template", type=Path, help="copy this store before each run instead of generating")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--modes", default="submit,connect")
    parser.add_argument("--port", type=int, default=15077)
    parser.add_argument(
        "--warm-up-rounds",
        type=int,
        default=0,
        help="with connect: warm the fresh server (`housekeeping spark-connect warm-up`) before the first run",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from housekeeping.orchestration import spark_connect

    base = Path(tempfile.mkdtemp(prefix="bench-dag-run-"))
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(base / "airflow"),
        "HOUSEKEEPING_STORE_ROOT": str(base / "store"),
        "AIRFLOW_CONN_SPARK_CONNECT_BENCH": json.dumps(
            {"conn_type": "spark_connect", "host": "localhost", "port": args.port}
        ),
    }
    subprocess.run(["airflow", "db", "migrate"], env=env, check=True, capture_output=True)
    # --topics only sizes a generated store; a template's size is its own.
    results: dict[str, object] = {
        "dag": args.dag,
        "topics": None if args.template else args.topics,
        "template": str(args.template or ""),
    }
    for mode in args.modes.split(","):
        mode_env = dict(env)
        if mode == "connect":
            started = time.perf_counter()
            spark_connect.start(base / "spark-connect", port=args.port)
            results["connect_server_start_s"] = round(time.perf_counter() - started, 1)
            if args.warm_up_rounds:
                from housekeeping.orchestration.warm_up import warm_up

                results["warm_up"] = warm_up(f"sc://localhost:{args.port}", rounds=args.warm_up_rounds)
                print(
                    f"warm-up: {results['warm_up']['seconds']} s {results['warm_up']['rounds']}", flush=True
                )
            mode_env["HOUSEKEEPING_SPARK_CONN_ID"] = "spark_connect_bench"
        else:
            mode_env["HOUSEKEEPING_SPARK_CONN_ID"] = "spark_default"
        try:
            results[mode] = [
                dag_run(args.dag, mode_env, base / "store", args.topics, args.template)
                for _ in range(args.runs)
            ]
        finally:
            if mode == "connect":
                spark_connect.stop(base / "spark-connect")
        for number, run in enumerate(results[mode], 1):
            print(f"{mode} run {number}: {run['wall_s']} s  {run['tasks_s']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
