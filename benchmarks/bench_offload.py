"""Benchmark: ledger offload to the object tier and Spark reading offloaded ledgers back, on a directory tier and on
a real S3 API server on loopback (moto, as the tests start it).

    python benchmarks/bench_offload.py --topics 20 --ledgers 10 --entries-per-ledger 25000 [--tiers directory,s3]
        [--json OUT]

The store: bench_compaction's (keyed topics, payload ~100 bytes). Per tier kind:

1. offload with a time threshold of 0 (every closed ledger): snapshot, Spark plan and Spark gate timed together,
   then the apply, which uploads each ledger under a fresh attempt UUID and reads it back before recording it
   complete (one ledger at a time, as Pulsar's offloadLoop);
2. ``apply trim`` with an offload-deletion lag of 0 and a purge: the local copies go, the ledgers live in the tier
   only;
3. one Spark read of every entry (count and total payload) through ``LedgerFiles.read``: the same read on the
   local store before step 2 (Spark's Parquet source) against the tier-only store (``mapInArrow`` over pyarrow.fs),
   each after one warm-up read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def set_offload_policies(store, policies: dict) -> None:
    """Every namespace's offload policies (the benchmark's set-up; an operator would use pulsar-admin)."""
    from sqlalchemy import update

    from housekeeping.store import metadata_schema as t
    from housekeeping.store.store import write_transaction

    with write_transaction(store.engine) as conn:
        for row in conn.execute(t.namespaces.select()).all():
            # Retention unlimited: every ledger stays listed, only its local copy goes.
            merged = {
                **json.loads(row.policies),
                "offload_policies": policies,
                "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
            }
            conn.execute(
                update(t.namespaces)
                .where(t.namespaces.c.name == row.name)
                .values(policies=json.dumps(merged))
            )


def timed_read(spark, store, as_of_ms: int, run_dir: Path) -> tuple[float, int, int]:
    """Seconds, entries and payload bytes of one Spark read of every ledger's entries (after a warm-up read)."""
    from pyspark.sql import functions as F

    from housekeeping.engine.contract import LEDGERS
    from housekeeping.engine.documents import read_run_info
    from housekeeping.engine.snapshot_reads import read_snapshot_columns
    from housekeeping.mechanisms.steps import snapshot_step
    from spark_apps.shared.io import LedgerFiles, entry_columns

    snapshot_step(store, "compaction", run_id=run_dir.name, as_of_ms=as_of_ms, run_dir=run_dir)
    ledgers = [
        (r["topic"], r["ledgerId"])
        for r in read_snapshot_columns(run_dir, LEDGERS.select("topic", "ledgerId")).to_pylist()
    ]
    files = LedgerFiles.of(read_run_info(run_dir))
    columns = entry_columns("ledgerId", "entryId", "value")

    def once() -> tuple[int, int]:
        frame = files.read(spark, ledgers, columns)
        row = frame.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).collect()[0]
        return int(row["n"]), int(row["b"] or 0)

    once()
    started = time.perf_counter()
    entries, payload = once()
    return time.perf_counter() - started, entries, payload


def quiet_cli(argv: list[str]) -> None:
    """The CLI in this process, its JSON result not printed."""
    import contextlib
    import io

    from housekeeping.cli.main import main as cli

    with contextlib.redirect_stdout(io.StringIO()):
        code = cli(argv)
    assert code == 0, argv


def start_s3(base: Path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.s3_server import CREDENTIALS, S3Server

    os.environ.update(CREDENTIALS)
    server = S3Server.start()
    return server, f"s3://{server.create_bucket('bench')}/offloaded", server.endpoint_url


def run_tier(kind: str, args, base: Path, spark) -> dict:
    from bench_compaction import build_store

    from housekeeping.store.store import Store
    from housekeeping.store.tier import OFFLOAD_ENDPOINT_ENV, OFFLOAD_URL_ENV

    server = None
    if kind == "s3":
        server, url, endpoint = start_s3(base)
        os.environ[OFFLOAD_ENDPOINT_ENV] = endpoint
    else:
        (base / "tier").mkdir()
        url = str(base / "tier")
        os.environ.pop(OFFLOAD_ENDPOINT_ENV, None)
    os.environ[OFFLOAD_URL_ENV] = url
    try:
        root = base / "store"
        store, as_of_ms = build_store(
            root, args.topics, args.ledgers, args.entries_per_ledger, args.keys, args.payload, args.seed
        )
        set_offload_policies(store, {"managedLedgerOffloadThresholdInSeconds": 0})
        from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, snapshot_step

        started = time.perf_counter()
        info = snapshot_step(store, "offload", run_id="bench", as_of_ms=as_of_ms)
        assert plan_and_gate_in_process(info.run_dir, "offload", "local[2]", spark).success
        planned_s = time.perf_counter() - started
        started = time.perf_counter()
        result = apply_step(store, info.run_dir)
        offload_s = time.perf_counter() - started
        assert result["ledgersOffloaded"] == args.topics * (args.ledgers - 1), result
        offloaded = int(
            result["bytesOffloaded"]
        )  # the ledgers' sizes (their Parquet objects: about the same)
        local_ref = base / "local-ref"
        shutil.copytree(root, local_ref)
        local_s, entries, payload = timed_read(spark, Store.open(local_ref), as_of_ms, base / "read-local")

        set_offload_policies(store, {"managedLedgerOffloadDeletionLagInMillis": 0})
        later = as_of_ms + 1000
        from housekeeping.core.timeutil import format_ms

        started = time.perf_counter()
        quiet_cli(["apply", "trim", "--store", str(root), "--as-of", format_ms(later)])
        quiet_cli(["purge", "--store", str(root), "--as-of", format_ms(later + 10**10)])
        lag_s = time.perf_counter() - started
        tier_s, tier_entries, tier_payload = timed_read(spark, Store.open(root), later, base / "read-tier")
        assert (tier_entries, tier_payload) == (entries, payload), "the tier read must equal the local one"
        return {
            "tier": kind,
            "entries": entries,
            "bytesOffloaded": offloaded,
            "ledgersOffloaded": result["ledgersOffloaded"],
            "snapshotPlanGateSeconds": round(planned_s, 2),
            "offloadApplySeconds": round(offload_s, 2),
            "applyMiBPerSecond": round(offloaded / 2**20 / offload_s, 1),
            "lagDeleteAndPurgeSeconds": round(lag_s, 2),
            "localReadSeconds": round(local_s, 2),
            "tierReadSeconds": round(tier_s, 2),
            "tierOverLocal": round(tier_s / local_s, 2),
        }
    finally:
        if server is not None:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--ledgers", type=int, default=10)
    parser.add_argument("--entries-per-ledger", type=int, default=25_000)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tiers", default="directory,s3")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here.parent))
    sys.path.insert(0, str(here))

    from housekeeping.engine import launcher

    spark = launcher.local_spark("local[2]")
    results = []
    for kind in args.tiers.split(","):
        with tempfile.TemporaryDirectory(prefix=f"bench-offload-{kind}-") as tmp:
            results.append(run_tier(kind, args, Path(tmp), spark))
            print(json.dumps(results[-1]), flush=True)
    document = {
        "topics": args.topics,
        "ledgers": args.ledgers,
        "entriesPerLedger": args.entries_per_ledger,
        "results": results,
    }
    print(json.dumps(document, indent=2))
    if args.json:
        args.json.write_text(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
