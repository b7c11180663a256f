"""Benchmark: the console's store browser at scale (the console issue's target: search and paging at 100,000
topics). What each page asks of the store, timed in one process as the api-server's worker answers it.

    python benchmarks/bench_console.py [--topics 100000] [--work DIR [--keep] [--reuse]] [--repeat 3] [--json OUT]

It generates a metadata-only store (`generate --metadata-only`, seed 1, 20 entries a ledger) and, with its largest
namespace, times (best of ``--repeat``, after one warm-up): the store page's per-namespace figures
(``observe.console.namespaces``), that namespace's first page of topics, its last page, a search by part of a name,
a topic's page (``observe.browse.topic_view``) and the journal's first page; and the peak resident memory of the
process over all of them.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import cli, remove, run_sampled  # noqa: E402


def best_of(repeat: int, call: Callable[[], object]) -> tuple[float, object]:
    call()  # warm-up: the database's pages in the cache, as for a page viewed after another
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return round(min(times), 3), result


def measure(store_root: Path, repeat: int) -> dict:
    from sqlalchemy import func, select

    from housekeeping.core.timeutil import wall_clock_ms
    from housekeeping.observe.browse import namespace_view, topic_view
    from housekeeping.observe.console import journal, namespaces
    from housekeeping.observe.journal_view import JournalFilter
    from housekeeping.store import metadata_schema as t
    from housekeeping.store.store import Store, read_transaction

    store = Store.open(store_root)
    with read_transaction(store.engine) as conn:
        total = conn.execute(select(func.count()).select_from(t.topics)).scalar_one()
        largest, size = conn.execute(
            select(t.topics.c.namespace, func.count())
            .group_by(t.topics.c.namespace)
            .order_by(func.count().desc())
            .limit(1)
        ).one()
    last_offset = (size - 1) // 100 * 100
    row: dict = {"topics": total, "largestNamespace": largest, "itsTopics": size}
    row["store_page_s"], found = best_of(repeat, lambda: namespaces(store, wall_clock_ms(), {}))
    row["namespaces"] = len(found)
    row["namespace_first_page_s"], first = best_of(repeat, lambda: namespace_view(store, largest))
    row["namespace_last_page_s"], last = best_of(
        repeat, lambda: namespace_view(store, largest, offset=last_offset)
    )
    assert first["topics"]["total"] == size and last["topics"]["rows"], (first["topics"]["total"], size)
    # Part of a name many topics share (t-0001 of t-00010..t-00019 and more), as an operator narrows a list.
    needle = last["topics"]["rows"][-1]["topic"].rsplit("/", 1)[-1][:-2]
    row["search"] = needle
    row["namespace_search_s"], searched = best_of(
        repeat, lambda: namespace_view(store, largest, search=needle)
    )
    row["searchMatches"] = searched["topics"]["total"]
    topic = last["topics"]["rows"][-1]["topic"]
    row["topic_page_s"], view = best_of(repeat, lambda: topic_view(store, topic))
    row["topicLedgers"] = len(view["ledgers"])
    row["journal_page_s"], _ = best_of(repeat, lambda: journal(store, JournalFilter(), limit=200))
    row["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--work", type=Path, default=None, help="where the store goes (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated store")
    parser.add_argument("--reuse", action="store_true", help="reuse a store a --keep run left in --work")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-console-"))
    store = work / f"console-{args.topics}"
    generated = None
    if not (args.reuse and store.is_dir()):
        if store.exists():
            remove(store)
        generate = cli(
            "generate", "--store", str(store), "--topics", str(args.topics), "--seed", "1",
            "--entries-per-ledger", "20", "--metadata-only",
        )  # fmt: skip
        generated = run_sampled(generate)["wall_s"]
    try:
        row = {**measure(store, args.repeat), "generate_s": generated}
    finally:
        if not args.keep:
            remove(store)
    print(json.dumps(row, indent=2))
    if args.json:
        args.json.write_text(json.dumps(row, indent=2) + "\n")


if __name__ == "__main__":
    main()
