"""The durable cursors' positions over time (docs/semantics.md §12.4), from the runs' own snapshots.

Every run that reads the store for a plan has its cursors in its snapshot; :func:`record_cursors` keeps a compact
copy of the durable ones in ``<store>/history/cursors/``, one Parquet file per run that applied (the shared apply
calls it once the run's changes are committed: a run that only read the store leaves the store unchanged):
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
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

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


COMPACTION_CURSOR = "__compaction"  # compaction's own cursor: no subscriber's


@dataclass(frozen=True)
class CursorSeries:
    """One durable subscription's mark-delete at the kept runs: times ascending, positions alongside."""

    times: np.ndarray  # float64, epoch ms
    ledger: np.ndarray  # int64
    entry: np.ndarray  # int64

    def acked(self, index: np.ndarray, ledger: int, entry: np.ndarray) -> np.ndarray:
        """Whether the kept run ``index`` (-1 or past the end: none) had acknowledged ``(ledger, entry)``."""
        valid = (index >= 0) & (index < len(self.times))
        i = np.clip(index, 0, max(len(self.times) - 1, 0))
        ml, me = self.ledger[i], self.entry[i]
        return valid & ((ml > ledger) | ((ml == ledger) & (me >= entry)))


def read_series(
    store: Store,
    topics: set[str] | None,
    *,
    to_ms: int,
    from_ms: int | None = None,
    every_ms: int = 0,
) -> tuple[dict[str, dict[str, CursorSeries]], list[int]]:
    """The kept runs' durable cursors of ``topics`` (None: every topic) per topic and subscription (compaction's
    cursor left out), from the runs in ``[from_ms, to_ms]`` (a later run is not seen: a backfill reads what the day
    had) at most one per ``every_ms``; and every kept run's time up to ``to_ms``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    points: dict[tuple[str, str], list[tuple[int, int, int]]] = defaultdict(list)
    times: list[int] = []
    last_read: int | None = None
    wanted = pa.array(sorted(topics), type=pa.string()) if topics is not None else None
    for kept in recorded(store):
        if kept.as_of_ms > to_ms:
            continue
        times.append(kept.as_of_ms)
        if (topics is not None and not topics) or (from_ms is not None and kept.as_of_ms < from_ms):
            continue
        if last_read is not None and kept.as_of_ms - last_read < every_ms:
            continue
        last_read = kept.as_of_ms
        table = pq.read_table(kept.path)
        if wanted is not None:
            table = table.filter(pc.is_in(pc.cast(table.column("topic"), pa.string()), value_set=wanted))
        columns = table.to_pydict()
        for topic, name, ledger, entry in zip(
            columns["topic"], columns["subscription"], columns["markDeleteLedger"], columns["markDeleteEntry"],
            strict=True,
        ):  # fmt: skip
            if name != COMPACTION_CURSOR:
                points[(topic, name)].append((kept.as_of_ms, int(ledger), int(entry)))
    series: dict[str, dict[str, CursorSeries]] = defaultdict(dict)
    for (topic, name), rows in points.items():
        rows.sort()
        array = np.array(rows, dtype=np.float64).reshape(-1, 3)
        series[topic][name] = CursorSeries(
            array[:, 0], array[:, 1].astype(np.int64), array[:, 2].astype(np.int64)
        )
    return dict(series), times
