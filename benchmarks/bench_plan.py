"""Benchmark: generate a store, then time a mechanism's steps (snapshot, Spark plan, Spark gate).

    python benchmarks/bench_plan.py [--mechanism trim|expiry|backlog|gc|offload] --topics 300 --entries-per-ledger 5000
        [--store DIR [--reuse]] [--json OUT] [--warm-runs N] [--dataframe-debugging]

For expiry and backlog it also prints what the plan read from the entry store (ledgers and entry bytes,
and their share of the stored entry bytes).

Prints entries generated, generator wall time and peak RSS (a child process, so it is the generator's own),
and the wall time of each step on local[2]. Targets (checked here, never in timed tests):
the generator stays under 1 GiB RSS at any size (it holds one ledger at a time); one Spark application per
run covers all topics. ``--warm-runs N`` plans and gates the same snapshot N more times in the same session and
reports the median (what a warm Spark Connect server or the test suite's one session pays per run);
``--dataframe-debugging`` starts the session with PySpark's default ``spark.python.sql.dataFrameDebugging.enabled``
(on), which the project's sessions turn off (the before figure of that change).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=300)
    parser.add_argument("--entries-per-ledger", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--as-of", default="2026-11-01T00:00:00Z")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--mechanism", choices=["trim", "expiry", "backlog", "gc", "offload"], default="trim")
    parser.add_argument("--reuse", action="store_true", help="time an existing --store, do not generate")
    parser.add_argument(
        "--warm-runs", type=int, default=0, help="plan and gate again N times; median reported"
    )
    parser.add_argument(
        "--dataframe-debugging", action="store_true", help="PySpark's default DataFrame debugging (on)"
    )
    args = parser.parse_args(argv)
    store_root = args.store or Path(tempfile.mkdtemp(prefix="bench-store-"))

    started = time.perf_counter()
    subprocess.run(
        ["true"]
        if args.reuse
        else [
            sys.executable,
            "-m",
            "housekeeping.cli",
            "generate",
            "--store",
            str(store_root),
            "--topics",
            str(args.topics),
            "--seed",
            str(args.seed),
            "--entries-per-ledger",
            str(args.entries_per_ledger),
        ],
        check=True,
    )
    generate_s = time.perf_counter() - started
    generator_rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.engine import launcher
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.mechanisms.steps import snapshot_step
    from housekeeping.store import metadata_schema as t
    from housekeeping.store.store import Store
    from housekeeping.store.tier import OFFLOAD_URL_ENV
    from spark_apps.shared.io import read_snapshot

    spec = get_mechanism(args.mechanism)
    if args.mechanism == "offload" and not os.environ.get(OFFLOAD_URL_ENV):
        # An offloader, or every ledger is kept for want of one: a directory tier (the plan uploads nothing).
        os.environ[OFFLOAD_URL_ENV] = tempfile.mkdtemp(prefix="bench-tier-")
    store = Store.open(store_root)
    with store.engine.connect() as conn:
        entries, ledgers = conn.execute(select(func.sum(t.ledgers.c.entries), func.count())).one()
    # The project's session in every other setting; the debugging setting is static, so it is set at start.
    debugging = {"spark.python.sql.dataFrameDebugging.enabled": "true"} if args.dataframe_debugging else None
    spark = launcher.local_spark("local[2]", debugging)
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    info = snapshot_step(
        store,
        args.mechanism,
        run_id="bench",
        as_of_ms=parse_as_of(args.as_of),
        scope=None,
        max_deleted_share=1.0,
        run_dir=Path(tempfile.mkdtemp(prefix="bench-run-")),
    )
    timings["snapshot_s"] = time.perf_counter() - clock

    def bare_read() -> int:
        """Every snapshot table the mechanism reads, read with its schema and counted: the floor a plan of
        these files stands on (issue 19 compares the plan with it, in the same session)."""
        return sum(frame.count() for frame in read_snapshot(spark, info.run_dir).values())

    def bare_scan() -> None:
        """The same tables with every column read and every row produced (Spark's ``noop`` sink): a count of
        Parquet needs only its footers, a plan reads the values."""
        for frame in read_snapshot(spark, info.run_dir).values():
            frame.write.format("noop").mode("overwrite").save()

    bare_read()  # warm-up: the session's first jobs, not counted
    bare_scan()
    clock = time.perf_counter()
    bare_read()
    timings["bare_read_s"] = time.perf_counter() - clock
    clock = time.perf_counter()
    bare_scan()
    timings["bare_scan_s"] = time.perf_counter() - clock
    clock = time.perf_counter()
    summary = launcher.plan_in_process(spark, info.run_dir, spec)
    timings["plan_s"] = time.perf_counter() - clock
    clock = time.perf_counter()
    gate = launcher.gate_in_process(spark, info.run_dir, spec)
    timings["gate_s"] = time.perf_counter() - clock
    warm: dict[str, list[float]] = {"plan_warm_s": [], "gate_warm_s": []}
    for _ in range(args.warm_runs):
        clock = time.perf_counter()
        launcher.plan_in_process(spark, info.run_dir, spec)
        warm["plan_warm_s"].append(time.perf_counter() - clock)
        clock = time.perf_counter()
        launcher.gate_in_process(spark, info.run_dir, spec)
        warm["gate_warm_s"].append(time.perf_counter() - clock)
    timings.update({k: statistics.median(v) for k, v in warm.items() if v})
    result = {
        "topics": args.topics + 1,
        "ledgers": ledgers,
        "entries": int(entries),
        "storeBytesOnDisk": sum(p.stat().st_size for p in store.ledgers_root.rglob("*.parquet")),
        "generate_s": None if args.reuse else round(generate_s, 2),
        "generatorPeakRssMiB": round(generator_rss_mib, 1),
        **{k: round(v, 2) for k, v in timings.items()},
        "mechanism": args.mechanism,
        "dataframeDebugging": args.dataframe_debugging,
        "planOverBareRead": round(timings["plan_s"] / max(timings["bare_read_s"], 1e-9), 2),
        "planOverBareScan": round(timings["plan_s"] / max(timings["bare_scan_s"], 1e-9), 2),
        "gateOverPlan": round(timings["gate_s"] / max(timings["plan_s"], 1e-9), 2),
        **(
            {"planWarmOverBareScan": round(timings["plan_warm_s"] / max(timings["bare_scan_s"], 1e-9), 2)}
            if "plan_warm_s" in timings
            else {}
        ),
        **{
            k: summary[k]
            for k in ("ledgersToDelete", "ledgersToOffload", "cursorsToMove", "entriesToAcknowledge", "reads")
            if k in summary
        },
        "gatePassed": gate.success,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
