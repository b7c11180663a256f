"""Benchmark: apply alone on a planned run at a store size, for two checkouts of the code side by side.

    python benchmarks/bench_apply.py prepare --work DIR --code CHECKOUT [--topics 100000] [--mechanism trim]
    python benchmarks/bench_apply.py measure --pair CHECKOUT:DIR [--pair CHECKOUT:DIR ...] [--rounds 2]

``prepare`` generates a metadata-only store (``housekeeping generate --metadata-only``, seed 1) and plans and gates one
run on it (``housekeeping plan MECHANISM --run-dir``), all with CHECKOUT's code (its ``include`` and the checkout
itself first on PYTHONPATH), and keeps the store with its run as DIR/pristine. ``measure`` times, for each pair in
turn and round after round (so both see the same machine), the apply step alone (``steps.apply_step``, grace 0) of
the pair's checkout on a fresh copy of its pristine store, in a process of its own; it prints one JSON line per
apply (wall seconds of the apply call, topics applied, skipped and narrowed, ledgers deleted). Each checkout needs
its own pristine store: a store's metadata schema is its code's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

AS_OF = "2026-11-01T00:00:00Z"
APPLY = """
import json, sys, time
from pathlib import Path
from housekeeping.mechanisms.steps import apply_step
from housekeeping.store.store import Store
store, run_dir = Store.open(Path(sys.argv[1])), Path(sys.argv[2])
started = time.perf_counter()
result = apply_step(store, run_dir, purge_grace_seconds=0)
print(json.dumps({"apply_s": round(time.perf_counter() - started, 2), "applied": len(result["appliedTopics"]),
                  "skipped": len(result["skippedTopics"]), "narrowed": len(result.get("narrowedTopics") or {}),
                  "ledgersDeleted": result["ledgersDeleted"]}))
"""


def _env(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{code / 'include'}:{code}"}


def _run(code: Path, *argv: str) -> str:
    done = subprocess.run(argv, env=_env(code), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def _copy(source: Path, target: Path) -> None:
    """``rm -rf`` then ``cp -a`` (several times faster than shutil on a large store), then ``sync``."""
    subprocess.run(["rm", "-rf", str(target)], check=True)
    subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    # The copy's dirty pages written out before the apply starts, not during it.
    subprocess.run(["sync"], check=True)


def prepare(work: Path, code: Path, topics: int, mechanism: str) -> None:
    live, pristine = work / "live", work / "pristine"
    subprocess.run(["rm", "-rf", str(live), str(pristine)], check=True)
    live.mkdir(parents=True)
    cli = [sys.executable, "-m", "housekeeping.cli"]
    _run(
        code,
        *cli,
        "generate",
        "--store",
        str(live / "store"),
        "--topics",
        str(topics),
        "--seed",
        "1",
        "--metadata-only",
    )
    _run(
        code, *cli, "plan", mechanism, "--store", str(live / "store"), "--as-of", AS_OF,
        "--run-dir", str(live / "run"), "--format", "json",
    )  # fmt: skip
    live.rename(pristine)


def measure(pairs: list[tuple[Path, Path]], rounds: int) -> None:
    for round_no in range(1, rounds + 1):
        for code, work in pairs:
            _copy(work / "pristine", work / "live")
            out = _run(
                code, sys.executable, "-c", APPLY, str(work / "live" / "store"), str(work / "live" / "run")
            )
            row = {"round": round_no, "code": str(code), **json.loads(out.strip().splitlines()[-1])}
            print(json.dumps(row), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare")
    prep.add_argument("--work", type=Path, required=True)
    prep.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1])
    prep.add_argument("--topics", type=int, default=100_000)
    prep.add_argument("--mechanism", default="trim")
    run = commands.add_parser("measure")
    run.add_argument("--pair", action="append", required=True, help="CHECKOUT:WORK (repeatable)")
    run.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.work.resolve(), args.code.resolve(), args.topics, args.mechanism)
    else:
        pairs = [tuple(Path(part).resolve() for part in pair.split(":", 1)) for pair in args.pair]
        measure(pairs, args.rounds)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
