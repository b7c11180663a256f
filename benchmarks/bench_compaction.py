"""Benchmark: topic compaction of a generated keyed topic set, Spark (the DAG's apps on local[2]) against the same
computation in DuckDB (a single-process engine) on the same Parquet files, measured in one run.

    python benchmarks/bench_compaction.py --topics 20 --ledgers 10 --entries-per-ledger 25000 --keys 50000
        [--store DIR] [--json OUT]

The store: one namespace ``bench/tables`` (compaction threshold 1 byte, compacted retention 7 days / unlimited
size), every topic keyed with ``--keys`` keys (uniform), ~5 % tombstones, ~1 % keyless, payload ~``--payload``
bytes, entries spread over the 10 days before the as-of time (so the retention time drops some latest values).

Timed: Spark plan (every entry decided or counted; the session's first, then again warm), Spark gate (Great Expectations, independent re-derivation),
Spark apply (copy of the kept entries with payloads into the new compacted ledgers + metadata switch); DuckDB:
the same decisions (latest per key, tombstones, keyless, retention time) and the same output (kept entries with
payloads written as Parquet per topic). The kept counts of both must agree.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

AS_OF = "2026-11-01T00:00:00Z"
NAMESPACE = "bench/tables"
RETENTION_MINUTES = 7 * 24 * 60


def build_store(root: Path, topics: int, ledgers: int, per_ledger: int, keys: int, payload: int, seed: int):
    import pyarrow as pa

    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.store.entries import ENTRY_SCHEMA, write_ledger
    from housekeeping.store.manifest.load import write_store
    from housekeeping.store.manifest.model import LedgerSpec, StoreContent, TopicSpec
    from housekeeping.store.manifest.validate import validate_content

    as_of_ms = parse_as_of(AS_OF)
    span = 10 * 24 * 3_600_000
    names = [f"persistent://{NAMESPACE}/table-{i:03d}" for i in range(topics)]
    specs = []
    for name in names:
        specs.append(
            TopicSpec(
                name,
                {},
                [
                    LedgerSpec(
                        100 + k,
                        per_ledger,
                        0,
                        as_of_ms - span + (k + 1) * span // ledgers if k < ledgers - 1 else None,
                        entries_stored=True,
                    )
                    for k in range(ledgers)
                ],
                last_active_ms=as_of_ms,
            )
        )
    content = StoreContent(
        broker={},
        namespaces={
            NAMESPACE: {
                "compaction_threshold": 1,
                "compacted_retention": {"retentionTimeInMinutes": RETENTION_MINUTES, "retentionSizeInMB": -1},
            }
        },
        topics=specs,
    )
    validate_content(content)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)

    def write(staging) -> None:
        rng = np.random.default_rng(seed)
        for spec in specs:
            for k, ledger in enumerate(spec.ledgers):
                n = per_ledger
                start = as_of_ms - span + k * span // ledgers
                times = np.sort(rng.integers(start, start + span // ledgers, size=n))
                key_ids = rng.integers(0, keys, size=n)
                key_array = pa.array([f"key-{i:07d}" for i in key_ids.tolist()], pa.string())
                keyless = rng.random(n) < 0.01
                key_array = pa.array(
                    np.where(keyless, None, key_array.to_numpy(zero_copy_only=False)), pa.string()
                )
                tombstone = rng.random(n) < 0.05
                sizes = np.where(tombstone, 0, rng.integers(payload // 2, payload * 3 // 2, size=n)).astype(
                    np.int32
                )
                blob = alphabet[rng.integers(0, len(alphabet), size=int(sizes.sum()))].tobytes()
                offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
                values = pa.BinaryArray.from_buffers(
                    pa.binary(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(blob)]
                )
                values = pa.array(
                    [None if t else v for t, v in zip(tombstone.tolist(), values.to_pylist(), strict=True)],
                    pa.binary(),
                )
                ledger.size_bytes = int(sizes.sum())
                ledger.min_entry_ts_ms, ledger.max_entry_ts_ms = int(times[0]), int(times[-1])
                table = pa.table(
                    {
                        "topic": [spec.name] * n,
                        "ledgerId": np.full(n, ledger.ledger_id, dtype=np.int64),
                        "entryId": np.arange(n, dtype=np.int64),
                        "publishTime": times.astype(np.int64),
                        "brokerTimestamp": pa.nulls(n, pa.int64()),
                        "key": key_array,
                        "value": values,
                        "size": sizes,
                        "properties": pa.nulls(n, pa.map_(pa.string(), pa.string())),
                    },
                    schema=ENTRY_SCHEMA,
                )
                write_ledger(staging.ledger_dir(spec.name, ledger.ledger_id), table)

    return write_store(root, content, write), as_of_ms


def duckdb_compaction(store_root: Path, out: Path, as_of_ms: int) -> dict:
    """The same decisions and output in DuckDB, on the raw ledger files (read before any compacted ledger is
    written next to them)."""
    import duckdb

    glob = str(store_root / "ledgers" / "persistent" / "bench" / "tables" / "*" / "*" / "*.parquet")
    limit_ms = RETENTION_MINUTES * 60_000
    connection = duckdb.connect()
    started = time.perf_counter()
    connection.execute(
        f"""
        COPY (
          WITH ranked AS (
            SELECT *, row_number() OVER (PARTITION BY topic, key ORDER BY ledgerId DESC, entryId DESC) AS rn,
                   coalesce(brokerTimestamp, publishTime) AS entryTs
            FROM read_parquet('{glob}') WHERE key IS NOT NULL
          )
          SELECT topic, ledgerId, entryId, publishTime, brokerTimestamp, key, value, size, properties
          FROM ranked
          WHERE rn = 1 AND size > 0 AND {as_of_ms} - entryTs <= {limit_ms}
          ORDER BY topic, ledgerId, entryId
        ) TO '{out}' (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (topic))
        """
    )
    seconds = time.perf_counter() - started
    kept = connection.execute(f"SELECT count(*) FROM read_parquet('{out}/*/*.parquet')").fetchone()[0]
    return {"seconds": round(seconds, 2), "kept": int(kept)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--ledgers", type=int, default=10)
    parser.add_argument("--entries-per-ledger", type=int, default=25_000)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

    from housekeeping.engine import launcher
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.mechanisms.steps import snapshot_step

    spec = get_mechanism("compaction")

    root = args.store or Path(tempfile.mkdtemp(prefix="bench-compaction-"))
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

    duck = duckdb_compaction(root, root / "duckdb-out", as_of_ms)
    print(f"duckdb compaction (decide + write kept entries): {duck['seconds']} s, kept {duck['kept']:,}")

    spark = launcher.local_spark("local[2]")
    timings = {}
    started = time.perf_counter()
    info = snapshot_step(store, "compaction", run_id="bench", as_of_ms=as_of_ms)
    timings["snapshot"] = time.perf_counter() - started
    started = time.perf_counter()
    summary = launcher.plan_in_process(spark, info.run_dir, spec)
    timings["spark_plan"] = time.perf_counter() - started
    # The same plan again in the now warm session (a warm Spark Connect server's case; the first plan above also
    # pays the session's first queries). It rewrites the same plan tables.
    started = time.perf_counter()
    again = launcher.plan_in_process(spark, info.run_dir, spec)
    timings["spark_plan_warm"] = time.perf_counter() - started
    assert again == summary, "the same snapshot plans the same"
    started = time.perf_counter()
    gate = launcher.gate_in_process(spark, info.run_dir, spec)
    timings["spark_gate"] = time.perf_counter() - started
    assert gate.success, gate.describe_failures()
    started = time.perf_counter()
    result = launcher.apply_in_process(spark, info.run_dir, spec, store, 3600)
    timings["spark_apply"] = time.perf_counter() - started
    timings = {k: round(v, 2) for k, v in timings.items()}
    print(f"spark (local[2]): {timings}; kept {summary['entriesKept']:,} of {summary['entriesRead']:,}")
    assert summary["entriesKept"] == duck["kept"] == result["entriesWritten"], (
        "both engines must keep the same"
    )
    document = {
        "entries": entries,
        "topics": args.topics,
        "keysPerTopic": args.keys,
        "onDiskBytes": on_disk,
        "generateSeconds": round(generated, 2),
        "duckdb": duck,
        "spark": timings,
        "sparkPlanPlusApply": round(timings["spark_plan"] + timings["spark_apply"], 2),
        "sparkWarmPlanPlusApply": round(timings["spark_plan_warm"] + timings["spark_apply"], 2),
        "kept": summary["entriesKept"],
        "superseded": summary["entriesSuperseded"],
        "tombstoned": summary["entriesTombstoned"],
        "expired": summary["entriesExpired"],
        "keylessDropped": summary["entriesKeylessDropped"],
    }
    print(json.dumps(document, indent=2))
    if args.json:
        args.json.write_text(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
