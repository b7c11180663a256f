"""Benchmark: the first DAG run after `make airflow` starts, against the Spark Connect warm-up it starts beside it.

    python benchmarks/bench_first_run.py [--port 8099] [--dag consumed_ledger_trim] [--json OUT]

Runs scripts/airflow-standalone.sh (what `make airflow` runs) with an Airflow home, a Spark Connect state directory and
a demo store of its own, so it starts as a fresh checkout's does: a fresh server and its warm-up in the background. As
soon as the API answers, it triggers a dry run of the DAG (the DAG unpaused through the API, as the trigger form's
"Unpause on trigger" does) and reports how long after the start the run began and ended, and what the warm-up did
(its log: the rounds it ran and whether it gave way to the run). Everything it started is stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--connect-port", type=int, default=15099)
    parser.add_argument("--dag", default="consumed_ledger_trim")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-first-run-"))
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(work / "airflow"),
        "AIRFLOW_PORT": str(args.port),
        "HOUSEKEEPING_SPARK_CONNECT_PORT": str(args.connect_port),
        "HOUSEKEEPING_SPARK_CONNECT_STATE": str(work / "spark-connect"),
        "HOUSEKEEPING_STORE_ROOT": str(work / "demo-store"),
    }
    env.pop("HOUSEKEEPING_SPARK_CONNECT_BUSY_FILE", None)
    started = time.monotonic()
    log = (work / "airflow.log").open("wb")
    process = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "airflow-standalone.sh")], env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{args.port}"
    try:
        token = None
        while token is None:
            assert process.poll() is None, (work / "airflow.log").read_text()[-3000:]
            try:
                passwords = json.loads(
                    (work / "airflow" / "simple_auth_manager_passwords.json.generated").read_text()
                )
                answer = httpx.post(
                    f"{base}/auth/token", json={"username": "admin", "password": passwords["admin"]}
                )
                token = answer.json()["access_token"] if answer.status_code in (200, 201) else None
            except (OSError, ValueError, httpx.HTTPError):
                pass
            time.sleep(1)
        headers = {"Authorization": f"Bearer {token}"}
        while httpx.get(f"{base}/api/v2/dags/{args.dag}", headers=headers).status_code != 200:
            time.sleep(1)
        api_up = time.monotonic() - started
        httpx.patch(f"{base}/api/v2/dags/{args.dag}", headers=headers, json={"is_paused": False})
        run = httpx.post(
            f"{base}/api/v2/dags/{args.dag}/dagRuns", headers=headers,
            json={"logical_date": None, "conf": {"dry_run": True}},
        ).json()  # fmt: skip
        triggered = time.monotonic() - started
        while (state := httpx.get(f"{base}/api/v2/dags/{args.dag}/dagRuns/{run['dag_run_id']}", headers=headers)
               .json()["state"]) not in ("success", "failed"):  # fmt: skip
            time.sleep(2)
        ended = time.monotonic() - started
        warm_up = (
            (work / "spark-connect" / "warm-up.log").read_text()
            if (work / "spark-connect" / "warm-up.log").is_file()
            else ""
        )
        result = {
            "apiUpSeconds": round(api_up, 1),
            "triggeredSeconds": round(triggered, 1),
            "runEndedSeconds": round(ended, 1),
            "runSeconds": round(ended - triggered, 1),
            "state": state,
            "warmUp": warm_up.strip()[-2000:],
        }
        print(json.dumps(result, indent=2))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
    finally:
        # Airflow's components start process groups of their own: the whole tree, not the script's group.
        import psutil

        tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
        for member in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.terminate()
        _, alive = psutil.wait_procs(tree, timeout=60)
        for member in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.kill()
        subprocess.run(
            [str(REPO / ".venv" / "bin" / "housekeeping"), "spark-connect", "stop", "--state-dir", str(work / "spark-connect")],
            env=env, capture_output=True,
        )  # fmt: skip
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
