"""The durable cursors' positions over time (docs/semantics.md §12.4), from the runs' own snapshots.

Every run that reads the store for a plan has its cursors in its snapshot; :func:`record_cursors` keeps a compact
copy of the durable ones in ``<store>/history/cursors/``, one Parquet file per run (not yet called by the runs: a
snapshot writing there broke "a refused run changes nothing in the store"; the backtest's issue wires it to the
runs that apply):
``topic``, ``subscription``, ``markDeleteLedger``, ``markDeleteEntry`` (topics dictionary-encoded, zstd), named by
the run's as-of, mechanism and id. At most one file per ``HOUSEKEEPING_CURSOR_HISTORY_INTERVAL_SECONDS`` of logical
time (runs every five minutes would otherwise write 288 a day), and none older than
``HOUSEKEEPING_CURSOR_HISTORY_DAYS`` behind the newest (logical time: a backfill replays the same files). A scoped
run's file holds its scope's topics.

Between two recorded runs a cursor may have moved either way (acknowledgements move it forward, a reset anywhere):
what the history knows of a time between them is the position before and the position after, and whoever reads it
(a backtest) answers with both as bounds.
"""

from __future__ import annotations

import bisect
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from housekeeping.core.settings import Setting
from housekeeping.store.fs import remove_file

if TYPE_CHECKING:
    from housekeeping.store.store import Store

HISTORY_DIR = Path("history") / "cursors"
CURSOR_HISTORY_INTERVAL = Setting(
    "HOUSEKEEPING_CURSOR_HISTORY_INTERVAL_SECONDS",
    int,
    3600,
    minimum=0,
    help="the cursor history keeps a run's cursors only when its last file is at least this much older (logical "
    "time; 0: every run's)",
)
CURSOR_HISTORY_DAYS = Setting(
    "HOUSEKEEPING_CURSOR_HISTORY_DAYS",
    int,
    35,
    minimum=1,
    help="days of cursor history kept behind the newest recorded run (logical time)",
)
COLUMNS = ("topic", "subscription", "markDeleteLedger", "markDeleteEntry")
_NAME = re.compile(r"^(\d{13})-([a-z_]+)-(.+)\.parquet$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+=-]")


@dataclass(frozen=True, order=True)
class Recorded:
    """One run's file: its as-of, mechanism, run id (made file-safe) and path."""

    as_of_ms: int
    mechanism: str
    run: str
    path: Path


def history_dir(store: Store) -> Path:
    return store.root / HISTORY_DIR


def recorded(store: Store) -> list[Recorded]:
    """Every run's file, oldest first."""
    found = []
    directory = history_dir(store)
    if directory.is_dir():
        for path in directory.iterdir():
            match = _NAME.match(path.name)
            if match:
                found.append(Recorded(int(match.group(1)), match.group(2), match.group(3), path))
    return sorted(found)


def record_cursors(
    store: Store, snapshot_cursors: Path, *, as_of_ms: int, mechanism: str, run_id: str
) -> Path | None:
    """Keep the durable cursors of a run's snapshot (its ``cursors`` table at ``snapshot_cursors``), unless a run
    within the interval before it is kept already; then drop the files older than the retention. Returns the file
    written, or None."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    kept = recorded(store)
    interval_ms = int(CURSOR_HISTORY_INTERVAL.read()) * 1000
    times = [r.as_of_ms for r in kept]
    earlier = bisect.bisect_right(times, as_of_ms)
    if interval_ms and earlier and as_of_ms - times[earlier - 1] < interval_ms:
        return None
    table = pq.read_table(
        snapshot_cursors, columns=["topic", "name", "durable", "markDeleteLedger", "markDeleteEntry"]
    )
    table = table.filter(pc.field("durable")).drop_columns(["durable"]).rename_columns(list(COLUMNS))
    table = table.set_column(0, "topic", pc.dictionary_encode(table.column("topic")))
    directory = history_dir(store)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{as_of_ms:013d}-{mechanism}-{_UNSAFE.sub('_', run_id)}.parquet"
    staging = directory / f".{path.name}.{uuid.uuid4().hex[:8]}"
    pq.write_table(table, staging, compression="zstd")
    os.replace(staging, path)
    newest = max(as_of_ms, times[-1] if times else as_of_ms)
    horizon = newest - int(CURSOR_HISTORY_DAYS.read()) * 86_400_000
    for old in kept:
        if old.as_of_ms < horizon:
            remove_file(old.path, within=directory)
    return path


def around(store: Store, at_ms: int) -> tuple[Recorded | None, Recorded | None]:
    """The recorded runs just before (at or before) and just after ``at_ms``: the bounds of what the history
    knows of the cursors then."""
    kept = recorded(store)
    times = [r.as_of_ms for r in kept]
    index = bisect.bisect_right(times, at_ms)
    before = kept[index - 1] if index else None
    after = next((r for r in kept[index:] if r.as_of_ms > at_ms), None)
    return before, after
