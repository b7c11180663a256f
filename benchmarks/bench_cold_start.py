"""Benchmark: `housekeeping plan MECHANISM` on a fresh store, against a cold trivial Spark application, in one run.

    python benchmarks/bench_cold_start.py [--topics 10000] [--mechanism trim] [--rounds 3] [--store DIR [--reuse]]
        [--metadata-only] [--json OUT]

Generates the store (``housekeeping generate``, seed 1) unless ``--reuse``, then, round by round, times two commands,
each a process of its own started cold: the project's local Spark session (``steps.local_spark``, the settings every
in-process run uses) starting and running one trivial job, and ``housekeeping plan MECHANISM --format json`` (the
CLI's whole run: imports, snapshot, Spark's start, plan and gate; it changes nothing in the store). Prints each
round's two times and their ratio, and the best of each.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AS_OF = "2026-11-01T00:00:00Z"
TRIVIAL_APP = (
    "from housekeeping.mechanisms.steps import local_spark\n"
    "spark = local_spark('local[2]')\n"
    "assert spark.range(0, 1000, 1, 2).count() == 1000\n"
    "spark.stop()\n"
)


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--mechanism", default="trim")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--reuse", action="store_true", help="plan the store already at --store")
    parser.add_argument("--metadata-only", action="store_true", help="generate a store without entry files")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    store = args.store or Path(tempfile.mkdtemp(prefix="bench-cold-start-")) / "store"
    if not args.reuse:
        generate = [
            "housekeeping",
            "generate",
            "--store",
            str(store),
            "--topics",
            str(args.topics),
            "--seed",
            "1",
        ]
        print(f"generated in {timed(generate + (['--metadata-only'] if args.metadata_only else [])):.1f} s")
    plan = [
        "housekeeping",
        "plan",
        args.mechanism,
        "--store",
        str(store),
        "--as-of",
        AS_OF,
        "--format",
        "json",
    ]
    rounds = []
    for number in range(1, args.rounds + 1):
        trivial = timed([sys.executable, "-c", TRIVIAL_APP])
        planned = timed(plan)
        rounds.append({"trivialApp": round(trivial, 2), "plan": round(planned, 2)})
        print(
            f"round {number}: trivial Spark app {trivial:.1f} s, plan {planned:.1f} s ({planned / trivial:.2f}x)"
        )
    best_trivial, best_plan = min(r["trivialApp"] for r in rounds), min(r["plan"] for r in rounds)
    print(
        f"best: trivial Spark app {best_trivial:.1f} s, plan {best_plan:.1f} s ({best_plan / best_trivial:.2f}x)"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"store": str(store), "topics": args.topics, "rounds": rounds}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
