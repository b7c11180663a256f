"""Benchmark: `housekeeping scrub` (the store scrub) as the store grows (issue 36's scale figures).

    python benchmarks/bench_scrub.py [--topics 10000,100000] [--entries-per-ledger 20] [--work DIR [--reuse]]
        [--json OUT]

For each size it generates one store (the CLI's generator; `--reuse` takes WORK/N/template, the store
`bench_scale.py --keep` leaves), damages it on purpose (three five-day-old orphan directories, one removed ledger
directory, one truncated Parquet file) and runs `housekeeping scrub --format json` in its own process, as an operator
would: the metadata read and the listing of the ledger tree (Python), the findings with every stored ledger's
footers and entry ids read in Spark tasks (local[2]), the Great Expectations gate, the report. It reports the wall
time, each phase (from the run directory's files), the peak resident memory of the Python process and of the Spark
driver's JVM, and checks that exactly the damage was found. The scrub without --repair changes nothing but its run
directory, which is removed afterwards.
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

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import cli, phases, run_sampled, store_size  # noqa: E402

DAY = 86_400


def damage(root: Path) -> None:
    """Three old orphan directories, one ledger directory removed, one Parquet file truncated; once per store (a
    marker beside the metadata, outside what the scrub lists, says a reused store is damaged already)."""
    marker = root / ".bench-scrub-damaged"
    if marker.exists():
        return
    marker.touch()
    topics = sorted(p for p in (root / "ledgers" / "persistent").glob("*/*/*") if len(list(p.iterdir())) >= 3)
    old = time.time() - 5 * DAY
    for index, topic in enumerate(topics[:3]):
        source = sorted(topic.iterdir(), key=lambda p: int(p.name.split(".")[0]))[0]
        orphan = topic / "999999999"
        shutil.copytree(source, orphan)
        for item in [*orphan.rglob("*"), orphan]:
            os.utime(item, (old, old))
        if index == 0:
            shutil.rmtree(sorted(topic.iterdir(), key=lambda p: int(p.name.split(".")[0]))[1])
        if index == 1:
            part = next(sorted(topic.iterdir(), key=lambda p: int(p.name.split(".")[0]))[1].glob("*.parquet"))
            part.write_bytes(part.read_bytes()[:100])


SCRUB_PHASES = (
    ("snapshotAndListing_s", "snapshot/scrub.json"),
    ("plan_s", "plan/summary.json"),
    ("gate_s", "gate/result.json"),
    ("report_s", "report/report.md"),
)


def measure(topics: int, entries_per_ledger: int, work: Path, reuse: bool) -> dict:
    template = work / str(topics) / "template"
    generated = None
    if not (reuse and template.is_dir()):
        if template.exists():
            shutil.rmtree(template)
        template.parent.mkdir(parents=True, exist_ok=True)
        generated = run_sampled(
            cli(
                "generate",
                "--store",
                str(template),
                "--topics",
                str(topics),
                "--seed",
                "7",
                "--entries-per-ledger",
                str(entries_per_ledger),
            )
        )["wall_s"]
    damage(template)
    ledgers, entries = store_size(template)
    started = time.time()
    result = run_sampled(
        cli("scrub", "--store", str(template), "--format", "json", "--min-age-seconds", str(DAY)),
        ok_codes=(1,),
    )
    document = json.loads(result["stdout"])
    summary = document["summary"]
    run_dir = Path(document["runDir"])
    row = {
        "topics": topics,
        "ledgers": ledgers,
        "entries": entries,
        "generate_s": generated,
        "itemsListed": summary["itemsListed"],
        "ledgersRead": summary["ledgersChecked"],
        "wall_s": result["wall_s"],
        **phases(run_dir, started, SCRUB_PHASES),
        "pythonPeakRssMiB": result["pythonPeakRssMiB"],
        "jvmPeakRssMiB": result["jvmPeakRssMiB"],
        "found": {k: v["count"] for k, v in summary["perKind"].items()},
    }
    expected = {"orphan": 3, "missing": 1, "unreadable": 1}
    row["exact"] = {k: v for k, v in row["found"].items() if k != "purge_overdue"} == expected
    shutil.rmtree(run_dir)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument("--entries-per-ledger", type=int, default=20)
    parser.add_argument("--work", type=Path, help="where the stores are (default: a temp dir)")
    parser.add_argument("--reuse", action="store_true", help="scrub WORK/N/template if it exists")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-scrub-"))
    rows = [measure(int(n), args.entries_per_ledger, work, args.reuse) for n in args.topics.split(",")]
    for row in rows:
        print(json.dumps(row, sort_keys=True))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, sort_keys=True))
    return 0 if all(row["exact"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
