"""The soak's parts around a live Airflow: an external scheduler triggering every housekeeping DAG through Airflow's
REST API on a short cadence, a fault injector on a seeded schedule, and what it measures (docs/RELIABILITY.md,
"The soak"). The load generator is ``housekeeping simulate``; the checker is :mod:`tests.soak.checker`."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import VENV_BIN

# Every housekeeping DAG that plans, checks and applies (the reports and the what-if change nothing).
DAGS = (
    "consumed_ledger_trim",
    "message_expiry",
    "backlog_quota",
    "inactive_topic_gc",
    "compacted_ledger_retention",
    "ledger_offload",
    "store_scrub",
    "key_erasure",
)
FAULT_KINDS = (
    "kill_apply",  # SIGKILL of a running apply task's process
    "kill_purge",  # SIGKILL of a running purge task's process
    "kill_scheduler",  # SIGKILL of Airflow's scheduler (its LocalExecutor workers with it)
    "kill_spark_connect",  # SIGKILL of the Spark Connect server the Spark steps run on
    "stop_postgres",  # the store's PostgreSQL stopped for a while
    "refuse_tier",  # the S3 tier answering nothing for a while
)
ACTIVE = ("queued", "running")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Fault:
    kind: str
    at_ms: int
    injected: bool = False
    detail: str = ""
    ended_ms: int | None = None


@dataclass
class ExternalScheduler:
    """Triggers each DAG (``{"dry_run": false}``: an apply) whenever it has no run queued or running and its last
    trigger is ``cadence_s`` old, as a scheduler outside Airflow would; counts what it could not trigger."""

    api: Callable[[], Any]
    cadence_s: float
    stop: threading.Event = field(default_factory=threading.Event)
    triggered: dict[str, int] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    first_trigger_ms: int | None = None

    def run(self) -> None:
        last: dict[str, float] = {}
        while not self.stop.is_set():
            for dag_id in DAGS:
                if self.stop.is_set():
                    break
                if time.monotonic() - last.get(dag_id, -1e9) < self.cadence_s:
                    continue
                try:
                    api = self.api()
                    runs = api.get(f"/api/v2/dags/{dag_id}/dagRuns?state=queued&state=running")["dag_runs"]
                    if runs:
                        continue
                    trigger(api, dag_id)
                except Exception as exc:  # the API or its database may be away during a fault
                    self.refused.append(f"{dag_id}: {type(exc).__name__}: {str(exc)[:200]}")
                    continue
                last[dag_id] = time.monotonic()
                self.triggered[dag_id] = self.triggered.get(dag_id, 0) + 1
                self.first_trigger_ms = self.first_trigger_ms or now_ms()
            self.stop.wait(2)


def _send(api, method: str, path: str, body: dict) -> dict:
    import urllib.request

    request = urllib.request.Request(
        f"{api.base}{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {api.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def trigger(api, dag_id: str) -> str:
    """A manual run that applies; its run id."""
    return _send(
        api, "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {"dry_run": False}}
    )["dag_run_id"]


def unpause(api, dag_id: str) -> None:
    _send(api, "PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})


def running_tasks(api, prefix: str) -> list[dict]:
    found = api.get("/api/v2/dags/~/dagRuns/~/taskInstances?state=running&limit=100")["task_instances"]
    return [ti for ti in found if ti["task_id"].startswith(prefix) and ti.get("pid")]


@dataclass
class FaultInjector:
    """One fault of each kind (more in a longer soak, cycling through the kinds in a seeded order), at seeded times
    between ``start_ms`` and ``end_ms``; each is undone before the next (what it killed it starts again)."""

    seed: int
    start_ms: int
    end_ms: int
    actions: dict[str, Callable[[Fault], None]]
    spacing_s: float = 45.0
    stop: threading.Event = field(default_factory=threading.Event)
    faults: list[Fault] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def schedule(self) -> list[tuple[int, str]]:
        rng = random.Random(self.seed)
        span = self.end_ms - self.start_ms
        count = max(len(FAULT_KINDS), int(span / 1000 / self.spacing_s))
        kinds: list[str] = []
        while len(kinds) < count:
            cycle = list(FAULT_KINDS)
            rng.shuffle(cycle)
            kinds += cycle
        step = span / count
        return [
            (int(self.start_ms + step * (i + rng.uniform(0.1, 0.6))), kind)
            for i, kind in enumerate(kinds[:count])
        ]

    def run(self) -> None:
        pending = self.schedule()
        retried: set[str] = set()
        while pending and not self.stop.is_set():
            at, kind = pending.pop(0)
            if self.stop.wait(max(0.0, (at - now_ms()) / 1000)):
                return
            fault = Fault(kind, now_ms())
            try:
                self.actions[kind](fault)
            except Exception as exc:
                self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            fault.ended_ms = now_ms()
            self.faults.append(fault)
            if not fault.injected and kind not in retried and not self.stop.is_set():
                # Nothing to kill this time (no apply running): once more, soon after the next one.
                retried.add(kind)
                pending.insert(min(1, len(pending)), (now_ms() + 5_000, kind))


def kill_task(api_factory, prefix: str, wait_s: float, rng: random.Random) -> Callable[[Fault], None]:
    def act(fault: Fault) -> None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                found = running_tasks(api_factory(), prefix)
            except Exception:
                found = []
            if found:
                ti = found[0]
                time.sleep(rng.uniform(0, 0.8))
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(ti["pid"]), signal.SIGKILL)
                    fault.injected = True
                fault.detail = f"{ti['dag_id']}.{ti['task_id']} {ti['dag_run_id']} pid {ti['pid']}"
                return
            time.sleep(0.25)
        fault.detail = f"no {prefix}* task ran within {wait_s:.0f} s"

    return act


def percentile(values: list[float], q: int) -> float | None:
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def publish_latencies(
    events: list[dict], windows: list[tuple[int, int]], excluded: list[tuple[int, int]]
) -> list[float]:
    """The publish calls' latencies (ms) that began inside one of ``windows`` and in none of ``excluded``."""
    found = []
    for event in events:
        if event["event"] != "publish" or "ms" not in event:
            continue
        at = event["at"]
        if any(a <= at <= b for a, b in windows) and not any(a <= at <= b for a, b in excluded):
            found.append(float(event["ms"]))
    return found


def idle_windows(busy: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The stretches of ``[start, end]`` that no window of ``busy`` covers."""
    idle, at = [], start
    for a, b in sorted(busy):
        if a > at:
            idle.append((at, min(a, end)))
        at = max(at, b)
        if at >= end:
            break
    if at < end:
        idle.append((at, end))
    return [(a, b) for a, b in idle if b > a]


def start_scheduler(env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(VENV_BIN / "airflow"), "scheduler"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def scheduler_processes(roots: list[int]) -> list[Any]:
    """Airflow scheduler processes among ``roots`` and their descendants (standalone's, or one started again)."""
    import psutil

    found = []
    for root in roots:
        try:
            tree = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for process in tree:
            with contextlib.suppress(psutil.Error):
                if "scheduler" in process.cmdline()[1:3] or process.cmdline()[-1:] == ["scheduler"]:
                    found.append(process)
    return found


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
