"""Benchmark: key erasure of ``--keys-to-erase`` keys from a generated keyed store (bench_compaction's store: every
topic keyed, uniform keys, tombstones, keyless entries), through the DAG's apps on local[2]: snapshot, Spark plan
(find the entries, write each affected ledger anew), Spark gate (Great Expectations: independent re-derivation,
entry-by-entry comparison of every staged ledger), apply (install + one metadata switch per topic), purge (erasure
grace 0) and the proof (a final scan of every file of each target).

    python benchmarks/bench_erasure.py --topics 20 --ledgers 10 --entries-per-ledger 25000 --keys 50000 \\
        --keys-to-erase 10 [--store DIR] [--json OUT]

The erased keys are requested namespace-wide (every topic), so each is found in most ledgers: the rewrite touches
most of the store, the heavy case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--ledgers", type=int, default=10)
    parser.add_argument("--entries-per-ledger", type=int, default=25_000)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--keys-to-erase", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here.parent))
    sys.path.insert(0, str(here))
    os.environ["HOUSEKEEPING_ERASURE_GRACE_SECONDS"] = "0"

    from bench_compaction import NAMESPACE, build_store

    from housekeeping.engine import launcher
    from housekeeping.engine.purge import purge
    from housekeeping.mechanisms.erasure.proof import prove
    from housekeeping.mechanisms.erasure.requests import add_request, list_requests
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.mechanisms.steps import apply_step, snapshot_step

    spec = get_mechanism("erasure")
    root = args.store or Path(tempfile.mkdtemp(prefix="bench-erasure-"))
    started = time.perf_counter()
    store, as_of_ms = build_store(
        root, args.topics, args.ledgers, args.entries_per_ledger, args.keys, args.payload, args.seed
    )
    generated = time.perf_counter() - started
    entries = args.topics * args.ledgers * args.entries_per_ledger
    on_disk = sum(p.stat().st_size for p in (root / "ledgers").rglob("*.parquet"))
    print(
        f"store {root}: {entries:,} entries in {args.topics} topics, {on_disk / 2**20:.0f} MiB, {generated:.1f} s"
    )
    step = max(1, args.keys // args.keys_to_erase)
    for i in range(args.keys_to_erase):
        add_request(
            store,
            key=f"key-{i * step:07d}",
            namespace=NAMESPACE,
            reason="benchmark",
            requested_at_ms=as_of_ms - 1,
            actor="bench",
        )

    spark = launcher.local_spark("local[2]")
    timings = {}
    started = time.perf_counter()
    info = snapshot_step(store, "erasure", run_id="bench", as_of_ms=as_of_ms)
    timings["snapshot"] = time.perf_counter() - started
    started = time.perf_counter()
    summary = launcher.plan_in_process(spark, info.run_dir, spec)
    timings["spark_plan"] = time.perf_counter() - started
    started = time.perf_counter()
    gate = launcher.gate_in_process(spark, info.run_dir, spec)
    timings["spark_gate"] = time.perf_counter() - started
    assert gate.success, gate.describe_failures()
    started = time.perf_counter()
    result = apply_step(store, info.run_dir, purge_grace_seconds=0)
    timings["apply"] = time.perf_counter() - started
    started = time.perf_counter()
    purged = purge(store, as_of_ms=as_of_ms, run_id="bench-purge")
    timings["purge"] = time.perf_counter() - started
    started = time.perf_counter()
    proofs = prove(store, info.run_dir, dry_run=False)
    timings["proof_scan"] = time.perf_counter() - started
    timings = {k: round(v, 2) for k, v in timings.items()}
    states = sorted({r["state"] for r in list_requests(store)})
    assert states == ["done"], states
    document = {
        "entries": entries,
        "topics": args.topics,
        "keysPerTopic": args.keys,
        "keysErased": args.keys_to_erase,
        "onDiskBytes": on_disk,
        "generateSeconds": round(generated, 2),
        "seconds": timings,
        "totalSeconds": round(sum(timings.values()), 2),
        "ledgersRewritten": result["ledgersRewritten"],
        "entriesRedacted": result["entriesRedacted"],
        "bytesRedacted": result["bytesRedacted"],
        "filesPurged": len(purged.purged),
        "filesScannedByTheProof": max((p["finalScan"]["filesScanned"] for p in proofs), default=0),
        "planSummary": summary,
    }
    print(json.dumps(document, indent=2))
    if args.json:
        args.json.write_text(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
