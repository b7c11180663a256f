"""Benchmark: `housekeeping apply trim` and `apply gc` end to end as the store grows (issue 19's scale target).

    python benchmarks/bench_scale.py [--topics 1000,10000,100000] [--mechanisms trim,gc]
        [--entries-per-ledger 20] [--metadata-only] [--work DIR [--keep] [--reuse]] [--json OUT] [--plot OUT.svg]

For each size it generates one store (the CLI's generator, one seed), copies it once per mechanism and runs the
CLI's apply on the copy in its own process, as an operator would: snapshot (Python), plan and gate (Spark,
local[2], one application), apply and journal (Python). It samples the process tree every 0.2 s and reports the
wall time, the peak resident memory of the Python process (snapshot, apply) and of the Spark driver's JVM, and
what was deleted. Time per thousand topics at each size and the marginal slope between sizes (seconds per
thousand more topics) say whether the cost is linear. The plot: wall time and the Python process's peak memory
against topics, one line per mechanism. ``--metadata-only`` generates the stores without entry files
(``housekeeping generate --metadata-only``): a million topics on one disk.

Targets (issue 19), checked here and never in timed tests: time per thousand topics flat from 1,000 to 100,000,
peak memory bounded.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

AS_OF = "2026-11-01T00:00:00Z"


def run_sampled(command: list[str], ok_codes: tuple[int, ...] = (0,)) -> dict:
    """Run COMMAND; its wall time, stdout, and the peak RSS (MiB) of its own process and of its Java
    descendants (the Spark driver), sampled every 0.2 s. An exit code outside ``ok_codes`` stops the benchmark."""
    peaks = {"python": 0, "jvm": 0}
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        root = psutil.Process(process.pid)
        while not done.is_set():
            try:
                peaks["python"] = max(peaks["python"], root.memory_info().rss)
                jvm = sum(
                    child.memory_info().rss
                    for child in root.children(recursive=True)
                    if child.name().startswith("java")
                )
                peaks["jvm"] = max(peaks["jvm"], jvm)
            except psutil.Error:
                pass
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    done.set()
    sampler.join()
    wall = time.perf_counter() - started
    if process.returncode not in ok_codes:
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}:\n{err[-3000:]}")
    return {
        "wall_s": round(wall, 2),
        "pythonPeakRssMiB": round(peaks["python"] / 2**20, 1),
        "jvmPeakRssMiB": round(peaks["jvm"] / 2**20, 1),
        "stdout": out,
        "returncode": process.returncode,
    }


# Where a run's phases end: the file each one writes last (the run directory's layout, docs/cli.md).
APPLY_PHASES = (
    ("snapshot_s", "snapshot/run.json"),
    ("plan_s", "plan/summary.json"),
    ("gate_s", "gate/result.json"),
    ("apply_s", "apply/result.json"),
    ("report_s", "report/report.md"),
)


def phases(
    run_dir: Path, started: float, marks: tuple[tuple[str, str], ...] = APPLY_PHASES
) -> dict[str, float]:
    """Seconds each phase of a CLI run took, from the modification times of the files that end them (``started``:
    the wall clock when the process was launched, so the first phase includes Python's start)."""
    out, previous = {}, started
    for name, path in marks:
        stamp = (run_dir / path).stat().st_mtime
        out[name] = round(stamp - previous, 2)
        previous = stamp
    return out


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "housekeeping.cli", *args]


def store_size(root: Path) -> tuple[int, int]:
    """(ledgers, entries) of a generated store, from its metadata."""
    from sqlalchemy import func, select

    from housekeeping.store import metadata_schema as t
    from housekeeping.store.store import Store

    store = Store.open(root)
    with store.engine.connect() as conn:
        ledgers, entries = conn.execute(select(func.count(), func.sum(t.ledgers.c.entries))).one()
    store.engine.dispose()
    return int(ledgers), int(entries)


def measure(
    topics: int,
    mechanisms: list[str],
    entries_per_ledger: int,
    work: Path,
    keep: bool,
    reuse: bool = False,
    metadata_only: bool = False,
) -> list[dict]:
    template = work / f"{topics}" / "template"
    if reuse and template.is_dir():
        # A store an earlier --keep run generated (same seed and sizes): its generation is not measured again.
        generated = {"wall_s": None, "pythonPeakRssMiB": None}
    else:
        if template.exists():
            remove(template.parent)
        generated = run_sampled(
            cli(
                "generate", "--store", str(template), "--topics", str(topics), "--seed", "1",
                "--entries-per-ledger", str(entries_per_ledger), *(["--metadata-only"] if metadata_only else []),
            )
        )  # fmt: skip
    ledgers, entries = store_size(template)
    rows = []
    for mechanism in mechanisms:
        store = template.parent / mechanism
        subprocess.run(["cp", "-a", str(template), str(store)], check=True)
        started = time.time()
        applied = run_sampled(
            cli(
                "apply", mechanism, "--store", str(store), "--as-of", AS_OF, "--max-deleted-share", "1",
                *(["--max-deleted-topic-share", "1"] if mechanism == "gc" else []), "--format", "json",
            )
        )  # fmt: skip
        document = json.loads(applied.pop("stdout"))
        rows.append(
            {
                "topics": topics,
                "ledgers": ledgers,
                "entries": entries,
                "mechanism": mechanism,
                "generate_s": generated["wall_s"],
                "generatorPeakRssMiB": generated["pythonPeakRssMiB"],
                **applied,
                **phases(Path(document["runDir"]), started),
                "perThousandTopics_s": round(applied["wall_s"] / topics * 1000, 3),
                "result": {k: v for k, v in document.items() if isinstance(v, (int, float, str, bool))},
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        remove(store)
    if not keep:
        remove(template)
    return rows


def remove(path: Path) -> None:
    """``rm -rf``: several times faster than shutil.rmtree on a store of half a million ledger directories."""
    subprocess.run(["rm", "-rf", str(path)], check=True)


def series(rows: list[dict], measure: str = "wall_s") -> dict[str, list[tuple[int, float]]]:
    """Per mechanism, in the rows' order: (topics, the row's ``measure``), by size."""
    mechanisms = dict.fromkeys(r["mechanism"] for r in rows)
    return {m: sorted((r["topics"], r[measure]) for r in rows if r["mechanism"] == m) for m in mechanisms}


def slopes(rows: list[dict]) -> dict[str, list[dict]]:
    """Per mechanism: the marginal cost between consecutive sizes, seconds per thousand more topics."""
    return {
        mechanism: [
            {"from": a, "to": b, "secondsPerThousandMoreTopics": round((tb - ta) / (b - a) * 1000, 3)}
            for (a, ta), (b, tb) in zip(points, points[1:], strict=False)
        ]
        for mechanism, points in series(rows).items()
    }


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (timed, memory) = plt.subplots(1, 2, figsize=(11, 4))
    for axis, measure, label in (
        (timed, "wall_s", "wall time, end to end (s)"),
        (memory, "pythonPeakRssMiB", "Python process peak memory (MiB)"),
    ):
        for mechanism, points in series(rows, measure).items():
            axis.plot(*zip(*points, strict=True), marker="o", label=f"housekeeping apply {mechanism}")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("topics in the store")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    figure.suptitle("Against topics (local[2], 2 cores)")
    figure.tight_layout()
    figure.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", default="1000,10000,100000", help="comma-separated store sizes")
    parser.add_argument("--mechanisms", default="trim,gc")
    parser.add_argument("--entries-per-ledger", type=int, default=20)
    parser.add_argument("--work", type=Path, help="where the stores are generated (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep each generated store (WORK/N/template)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="use WORK/N/template when it exists (kept before) instead of generating",
    )
    parser.add_argument("--metadata-only", action="store_true", help="stores without entry files")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    mechanisms = args.mechanisms.split(",")
    rows = [
        row
        for topics in sorted(int(n) for n in args.topics.split(","))
        for row in measure(
            topics, mechanisms, args.entries_per_ledger, work, args.keep, args.reuse, args.metadata_only
        )
    ]
    result = {"rows": rows, "slopes": slopes(rows)}
    print(json.dumps(result["slopes"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
