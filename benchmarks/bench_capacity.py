"""Benchmark: `housekeeping usage`, `housekeeping forecast` and `housekeeping backtest` as the store grows (the
capacity issues' target: each at 100,000 topics within 1 GiB and 30 s).

    python benchmarks/bench_capacity.py [--topics 10000,100000] [--history-days 60] [--work DIR [--keep] [--reuse]]
        [--json OUT]

For each size it generates one store with a history (`generate --history-days`, one seed, 20 entries a ledger)
and runs, each in its own process as an operator would: `usage --by topic` and `usage --by tenant` over the 30
days before the generator's reference, `forecast` at the reference (its backtest 14 days before), and `backtest`
over the same 30 days of a retention of 1 hour set in one namespace and in the broker (every topic). It samples
each process every 0.2 s (`bench_scale.run_sampled`) and reports the wall time, the peak resident memory and the
backtest's error over the store.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import cli, remove, run_sampled, store_size  # noqa: E402

REFERENCE = "2026-11-01T00:00:00Z"
PERIOD = ("--from", "2026-10-02T00:00:00Z", "--to", REFERENCE)


def measure(topics: int, history_days: int, work: Path, reuse: bool) -> dict:
    store = work / f"{topics}"
    if not (reuse and store.is_dir()):
        if store.exists():
            remove(store)
        generate = cli(
            "generate", "--store", str(store), "--topics", str(topics), "--seed", "1",
            "--entries-per-ledger", "20", "--history-days", str(history_days),
        )  # fmt: skip
        generated = run_sampled(generate)
    else:
        generated = {"wall_s": None}
    ledgers, _ = store_size(store)
    row: dict = {"topics": topics, "ledgers": ledgers, "generate_s": generated["wall_s"]}
    changes = _changes(store, work)
    for name, args in (
        ("usage_topic", ("usage", "--store", str(store), *PERIOD, "--by", "topic")),
        ("usage_tenant", ("usage", "--store", str(store), *PERIOD, "--by", "tenant")),
        ("forecast", ("forecast", "--store", str(store), "--as-of", REFERENCE, "--backtest", "14d")),
        (
            "backtest_namespace",
            ("backtest", "--store", str(store), *PERIOD, "--policies", str(changes["namespace"])),
        ),
        (
            "backtest_broker",
            ("backtest", "--store", str(store), *PERIOD, "--policies", str(changes["broker"])),
        ),
    ):
        ran = run_sampled(cli(*args))
        row[f"{name}_s"], row[f"{name}_peak_mib"] = ran["wall_s"], ran["pythonPeakRssMiB"]
        if name == "forecast":
            backtest = json.loads(ran["stdout"])["backtest"]
            predicted = sum(r["predictedBytes"] for r in backtest)
            actual = sum(r["actualBytes"] for r in backtest)
            row["backtest_error"] = round(predicted / actual - 1, 4) if actual else None
            row["namespace_errors"] = [
                round(r["relativeError"], 3) for r in backtest if r["relativeError"] is not None
            ]
    return row


def _changes(store: Path, work: Path) -> dict[str, Path]:
    """The two policy changes the backtest is asked about: a 1-hour retention in the store's first namespace, and in
    the broker."""
    with sqlite3.connect(store / "metadata.db") as db:
        (namespace,) = db.execute("select name from namespaces order by name limit 1").fetchone()
    retention = {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}
    documents = {
        "namespace": {"namespaces": {namespace: {"retention_policies": retention}}},
        "broker": {"broker": {"defaultRetentionTimeInMinutes": 60, "defaultRetentionSizeInMB": -1}},
    }
    paths = {}
    for name, document in documents.items():
        paths[name] = work / f"change-{name}.json"
        paths[name].write_text(json.dumps(document))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", default="10000,100000")
    parser.add_argument("--history-days", type=int, default=60)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--reuse", action="store_true", help="use the stores an earlier --keep run left in --work"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for topics in (int(n) for n in args.topics.split(",")):
            rows.append(measure(topics, args.history_days, work, args.reuse))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if not args.keep:
            remove(work)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    print(
        "| topics | ledgers | usage --by topic | usage --by tenant | forecast | backtest error (store) "
        "| backtest, a namespace | backtest, the broker |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['topics']:,} | {r['ledgers']:,} | {r['usage_topic_s']} s, {r['usage_topic_peak_mib']} MiB "
            f"| {r['usage_tenant_s']} s, {r['usage_tenant_peak_mib']} MiB | {r['forecast_s']} s, "
            f"{r['forecast_peak_mib']} MiB | {r['backtest_error']:+.1%} "
            f"| {r['backtest_namespace_s']} s, {r['backtest_namespace_peak_mib']} MiB "
            f"| {r['backtest_broker_s']} s, {r['backtest_broker_peak_mib']} MiB |"
        )


if __name__ == "__main__":
    main()
