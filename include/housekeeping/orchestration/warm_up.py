"""Warming a Spark Connect server: every mechanism's snapshot, plan and gate on a small generated store, run against
the server before the DAGs need it (``housekeeping spark-connect warm-up``, or ``start --warm-up-rounds N``).

A fresh server's JVM interprets Spark's planner until its JIT has compiled it, so the first DAG runs on a fresh server
are markedly slower than later ones (benchmarks/README.md has the figures). The query shapes are the DAGs' own (the same apps), only the store is small, so the compiled code is the code the
runs use. The warm-up's store, run directories and session are its own and are gone when it ends; it changes
nothing the DAGs read. Its as-of time is the generator's reference time, not the clock: the plans are thrown away,
but they are computed as any run's are.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from housekeeping.core.errors import InputError
from housekeeping.orchestration.spark_connect import (
    SparkConnectError,
    busy_file,
    connect_target,
    port_open,
)

# Small enough to take seconds a round, large enough that every mechanism has actions to plan and check.
WARM_UP_TOPICS = 8
WARM_UP_SEED = 7


def warm_up(
    url: str,
    *,
    rounds: int = 2,
    mechanisms: Sequence[str] | None = None,
    work_dir: Path | None = None,
    wait_s: float = 0.0,
) -> dict[str, Any]:
    """Run ``mechanisms`` (default: every registered one) ``rounds`` times on the server at ``url``; returns each
    round's seconds per mechanism. ``work_dir``: where the small store goes (a temporary directory in it); the
    server and its executors must read it at the same path, so with a server in another container give a
    directory they all see. ``wait_s``: how long to wait for a server that is still starting."""
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.engine import launcher
    from housekeeping.engine.documents import Intent
    from housekeeping.mechanisms.registry import get_mechanism, mechanism_names
    from housekeeping.mechanisms.steps import plan_and_gate_in_process, snapshot_step
    from housekeeping.store.generate import DEFAULT_REFERENCE, GenerateOptions, generate_store

    if rounds < 1:
        raise InputError(f"--rounds must be >= 1, got {rounds}")
    names = list(mechanisms or mechanism_names())
    for name in names:
        get_mechanism(name)  # an unknown name is bad input, named, before anything runs
    _wait_for_server(url, wait_s)
    as_of_ms = parse_as_of(DEFAULT_REFERENCE)
    seconds: list[dict[str, float]] = []
    started = time.perf_counter()
    since = time.time()  # wall clock on purpose: compared with the busy file's modification time
    stopped = None
    with tempfile.TemporaryDirectory(prefix="housekeeping-warm-up-", dir=work_dir) as tmp:
        # Its own SQLite metadata, named: a store opened without a URL takes HOUSEKEEPING_METADATA_URL, which in a
        # deployment is the real store's database (and generating replaces a store's content).
        root = Path(tmp) / "store"
        store = generate_store(
            root,
            GenerateOptions(topics=WARM_UP_TOPICS, seed=WARM_UP_SEED),
            f"sqlite:///{root / 'metadata.db'}",
        )
        spark = launcher.local_spark(url)
        try:
            for round_number in range(rounds):
                took: dict[str, float] = {}
                for name in names:
                    stopped = _given_way(since)
                    if stopped:
                        break
                    begun = time.perf_counter()
                    run_dir = Path(tmp) / "runs" / f"{round_number}-{name}"
                    snapshot_step(
                        store,
                        name,
                        run_id=f"warm-up-{round_number}-{name}",
                        as_of_ms=as_of_ms,
                        run_dir=run_dir,
                        intent=Intent.PLAN,
                    )
                    plan_and_gate_in_process(run_dir, name, url, spark)
                    took[name] = round(time.perf_counter() - begun, 2)
                seconds.append(took)
                if stopped:
                    break
        finally:
            spark.stop()  # the server frees the session's checkpoints and cached data now
    return {
        "url": url,
        "mechanisms": names,
        "rounds": seconds,
        "seconds": round(time.perf_counter() - started, 1),
        "stopped": stopped,
    }


def _wait_for_server(url: str, wait_s: float) -> None:
    host, port = connect_target(url)
    deadline = time.monotonic() + wait_s
    while not port_open(host, port, timeout_s=5.0):
        if time.monotonic() >= deadline:
            raise SparkConnectError(
                f"no Spark Connect server answers at {host}:{port}"
                + (f" after {wait_s:.0f} s" if wait_s else "")
                + ": start it first"
            )
        time.sleep(1.0)


def _given_way(since: float) -> str | None:
    """Why the warm-up stops now: a DAG run's Spark step touched the busy file after ``since``; None to go on."""
    busy = busy_file()
    if busy is not None and busy.is_file() and busy.stat().st_mtime >= since:
        return f"a DAG run's Spark step started on the server ({busy}): the warm-up gave way"
    return None
