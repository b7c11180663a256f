"""Benchmark: a policy sweep against single what-ifs on one generated store (issue 17).

    python benchmarks/bench_what_if.py --topics 5000 [--store DIR [--reuse]] [--points 1h,6h,1d,3d,7d]
        [--json OUT]

Times, in one warm local[2] session (the first Spark job is paid by a warm-up plan, not by either side):
- one what-if (``housekeeping.what_if.what_if.what_if``: the current and the candidate plan with the gate each) with the
  first point's overlay;
- the sweep of ``retention-time`` over the points (``housekeeping.what_if.sweep.run_sweep``: one read of the
  store, one Spark application, no gate);
- the same points as separate what-ifs' candidate plans without the gate (snapshot with the overlay and the
  plan app per point), what a sweep would cost done point by point.
It checks the sweep's points equal the point-by-point plans' bytes per namespace. No assertion on time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _timed(label: str, timings: dict[str, float], action):
    started = time.perf_counter()
    result = action()
    timings[label] = round(time.perf_counter() - started, 2)
    print(f"{label}: {timings[label]:.2f} s", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=5000)
    parser.add_argument("--entries-per-ledger", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--reuse", action="store_true", help="time an existing --store, do not generate")
    parser.add_argument("--as-of", default="2026-11-01T00:00:00Z")
    parser.add_argument("--points", default="2h,6h,1d,3d,7d")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    store_root = args.store or Path(tempfile.mkdtemp(prefix="bench-what-if-"))
    if not args.reuse:
        subprocess.run(
            [sys.executable, "-m", "housekeeping.cli", "generate", "--store", str(store_root),
             "--topics", str(args.topics), "--seed", str(args.seed),
             "--entries-per-ledger", str(args.entries_per_ledger)],
            check=True,
        )  # fmt: skip

    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.engine import launcher
    from housekeeping.engine.plan import read_summary
    from housekeeping.engine.snapshot import read_store_state
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.mechanisms.steps import snapshot_step
    from housekeeping.store.store import Store
    from housekeeping.what_if.overlay import PolicyOverlay
    from housekeeping.what_if.sweep import Sweep, point_overlays, run_sweep
    from housekeeping.what_if.what_if import what_if

    store = Store.open(store_root)
    spark = launcher.local_spark("local[2]")
    sweep = Sweep.parse(f"retention-time={args.points}")
    state = read_store_state(store)
    overlays = point_overlays(sweep, PolicyOverlay(), state.namespaces, state.broker)
    timings: dict[str, float] = {}
    spec = get_mechanism("trim")

    def plans_one_by_one(points: list = overlays) -> list[dict]:
        with tempfile.TemporaryDirectory() as tmp:
            results = []
            for index, overlay in enumerate(points):
                run_dir = Path(tmp) / str(index)
                snapshot_step(store, "trim", run_id=f"p{index}", as_of_ms=parse_as_of(args.as_of),
                              run_dir=run_dir, policy_overlay=overlay)  # fmt: skip
                launcher.plan_in_process(spark, run_dir, spec)
                results.append(read_summary(run_dir)["perNamespace"])
            return results

    _timed("warm-up (one plan, not counted)", {}, lambda: plans_one_by_one(overlays[:1]))
    _timed("one what-if (current + candidate, gate each)", timings,
           lambda: what_if(store, ["trim"], overlays[0], as_of=args.as_of, spark=spark))  # fmt: skip
    swept = _timed(f"sweep of {len(overlays)} values (one app, no gate)", timings,
                   lambda: run_sweep(store, sweep, PolicyOverlay(), as_of=args.as_of, spark=spark))  # fmt: skip
    alone = _timed(f"{len(overlays)} candidate plans one by one (no gate)", timings, plans_one_by_one)
    for point, per_namespace in zip(swept["points"], alone, strict=True):
        expected = {ns: v["bytes"] for ns, v in per_namespace.items()}
        got = {ns: m["bytesFreed"] for ns, m in point["perNamespace"].items() if m["bytesFreed"]}
        assert got == expected, (point["value"], got, expected)
    print("sweep points == point-by-point plans: yes")
    result = {"topics": args.topics, "points": args.points, "timings": timings,
              "freedPerPoint": [p["total"]["bytesFreed"] for p in swept["points"]]}  # fmt: skip
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
