"""Entry I/O of topic compaction, shared by the planner, the gate and the apply app (only I/O lives here).

What compaction reads for one topic (Pulsar's ``RawReader`` on ``__compaction`` with ``readCompacted``):
the topic's current compacted ledger, whole, then the raw entries after that ledger's horizon up to the
run's horizon. Without a compacted ledger it reads every raw entry still stored (see docs/semantics.md §11:
strictly safer than starting at a ``__compaction`` cursor that has no compacted ledger behind it).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession

from housekeeping.store.fs import remove_tree
from spark_apps.shared.io import LedgerFiles, entry_columns

if TYPE_CHECKING:
    import pyarrow as pa

# The entry columns compaction decides on (no payload: a tombstone is an entry of payload size 0).
DECISION_COLUMNS = entry_columns(
    "topic", "ledgerId", "entryId", "publishTime", "brokerTimestamp", "key", "size"
)


@dataclass(frozen=True)
class TopicInput:
    """Where one topic's compaction input lives (metadata only; collected on the driver per topic)."""

    topic: str
    compacted_ledger_id: int | None  # the current compacted ledger, read whole
    read_from: tuple[int, int] | None  # raw entries strictly after this position (None: from the start)
    horizon: tuple[int, int]  # raw entries up to and including this position
    raw_ledger_ids: tuple[int, ...]  # the stored raw ledgers that can hold entries in (read_from, horizon]

    @property
    def bounds(self) -> tuple[int, int, int, int]:
        """fromLedger, fromEntry (-1, -1: from the start), horizonLedger, horizonEntry of the raw read."""
        low = self.read_from or (-1, -1)
        return (low[0], low[1], *self.horizon)


# One row per topic for the tasks that read a topic's whole input themselves (``map_topic_inputs``): its files,
# resolved and checked on the driver, and the bounds of its raw read.
TOPIC_SOURCES = (
    "topic string, compactedFiles array<string>, rawFiles array<string>, rawTierObjects array<string>, "
    "fromLedger long, fromEntry long, horizonLedger long, horizonEntry long"
)


def topic_sources(spark: SparkSession, files: LedgerFiles, inputs: list[TopicInput]) -> DataFrame:
    """:data:`TOPIC_SOURCES`, one row per topic of ``inputs``: a ledger file that is missing or not entry Parquet,
    or a tier ledger without a configured tier, is bad input named here, before any task runs."""
    rows = []
    for item in inputs:
        compacted = (
            _ledger_files(files, item.topic, item.compacted_ledger_id)
            if item.compacted_ledger_id is not None
            else []
        )
        raw_files: list[str] = []
        raw_objects: list[str] = []
        for ledger_id in item.raw_ledger_ids:
            if files.in_tier(item.topic, ledger_id):
                raw_objects.append(files.tier_object(item.topic, ledger_id))
            else:
                raw_files += _ledger_files(files, item.topic, ledger_id)
        rows.append((item.topic, compacted, raw_files, raw_objects, *item.bounds))
    return spark.createDataFrame(rows, TOPIC_SOURCES)


def _ledger_files(files: LedgerFiles, topic: str, ledger_id: int) -> list[str]:
    return [str(path) for path in files.checked_dir(topic, ledger_id)[1]]


def topic_input_parts(source: dict[str, Any], names: list[str], tier: Any = None) -> Iterator[pa.Table]:
    """One topic's compaction input in Arrow (inside a task), one file at a time, so a task holds one file's
    entries, not the topic's: the ``names`` columns (publishTime and brokerTimestamp among them) of its compacted
    ledger and of its raw entries in (from, horizon], each with ``source`` (compacted | raw) and ``entryTs`` (the
    broker timestamp when stored, else the publish time); parts and rows in no particular order. ``tier``: an
    ``ObjectTier`` for the raw ledgers only in the object tier."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from housekeeping.store.entries import ENTRY_SCHEMA

    columns = [*dict.fromkeys([*names, "ledgerId", "entryId"])]
    # Files written by different writers differ in their columns' nullability only: read all as nullable.
    schema = pa.schema([ENTRY_SCHEMA.field(name).with_nullable(True) for name in columns])

    def part(table: pa.Table, label: str) -> pa.Table:
        if label == "raw":
            ledger, entry = table["ledgerId"], table["entryId"]
            after = pc.or_(
                pc.greater(ledger, source["fromLedger"]),
                pc.and_(pc.equal(ledger, source["fromLedger"]), pc.greater(entry, source["fromEntry"])),
            )
            up_to = pc.or_(
                pc.less(ledger, source["horizonLedger"]),
                pc.and_(
                    pc.equal(ledger, source["horizonLedger"]), pc.less_equal(entry, source["horizonEntry"])
                ),
            )
            table = table.filter(pc.and_(after, up_to))
        table = table.select(columns).cast(schema).select(names)
        return table.append_column("source", pa.array([label] * table.num_rows, pa.string())).append_column(
            "entryTs", pc.coalesce(table["brokerTimestamp"], table["publishTime"])
        )

    # A topic the caller added without input (no sources row of its own) has no files.
    for path in source["compactedFiles"] or []:
        yield part(pq.ParquetFile(path).read(columns=columns), "compacted")
    for path in source["rawFiles"] or []:
        yield part(pq.ParquetFile(path).read(columns=columns), "raw")
    for key in source["rawTierObjects"] or []:
        yield part(tier.read_ledger(key, columns=columns), "raw")


def positions_by_ledger(positions: pa.Table | None) -> dict[int, pa.Array]:
    """Positions (a table with ``ledgerId`` and ``entryId``), as their entry ids per ledger id."""
    if positions is None or positions.num_rows == 0:
        return {}
    grouped = positions.group_by("ledgerId").aggregate([("entryId", "list")])
    return {
        ledger_id: entries.values
        for ledger_id, entries in zip(
            grouped["ledgerId"].to_pylist(), grouped["entryId_list"].combine_chunks(), strict=True
        )
    }


def at_positions(part: pa.Table, by_ledger: dict[int, pa.Array]) -> Any:
    """Which rows of an input part are at one of the positions (:func:`positions_by_ledger`): matched ledger by
    ledger, exact for any id (no packing)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chosen = pa.array([False] * part.num_rows, pa.bool_())
    for ledger_id in pc.unique(part["ledgerId"]).to_pylist():
        if ledger_id in by_ledger:
            in_ledger = pc.and_(
                pc.equal(part["ledgerId"], ledger_id),
                pc.is_in(part["entryId"], value_set=by_ledger[ledger_id].cast(pa.int64())),
            )
            chosen = pc.or_(chosen, in_ledger)
    return chosen


class TaskParts:
    """Parquet part files a task writes itself, one per table of ``tables`` (name -> (directory, Arrow schema)):
    tables of entries that then never pass through Spark's rows. A part is opened at the task's first rows for it,
    written under a hidden name and renamed when the task's input ends, so no reader sees a half-written part and
    a task run again replaces its own (its name is the task's partition)."""

    def __init__(self, tables: Mapping[str, tuple[str, pa.Schema]]) -> None:
        from pyspark import TaskContext

        context = TaskContext.get()
        self._task = context.partitionId() if context else 0
        self._attempt = context.attemptNumber() if context else 0
        self._tables = tables
        self._open: dict[str, tuple[Any, Path]] = {}

    def write(self, name: str, rows: pa.Table) -> None:
        import pyarrow.parquet as pq

        if not rows.num_rows:
            return
        directory, schema = self._tables[name]
        if name not in self._open:
            hidden = Path(directory) / f".part-{self._task:05d}-{self._attempt}.parquet"
            self._open[name] = (pq.ParquetWriter(hidden, schema), hidden)
        self._open[name][0].write_table(rows.select(schema.names).cast(schema))

    def close(self) -> None:
        for writer, hidden in self._open.values():
            writer.close()
            os.replace(hidden, hidden.with_name(f"part-{self._task:05d}.parquet"))
        self._open.clear()


def prepare_parts(tables: Mapping[str, tuple[str, pa.Schema]], within: Path) -> None:
    """The directories (inside ``within``) of the tables tasks write with :class:`TaskParts`, emptied: a plan made
    again replaces its tables whole."""
    for directory, _ in tables.values():
        remove_tree(Path(directory), within=within)
        Path(directory).mkdir(parents=True)


def finish_parts(tables: Mapping[str, tuple[str, pa.Schema]]) -> None:
    """A table no task wrote a row of gets one empty part with its schema, as a Spark write of no rows leaves."""
    import pyarrow.parquet as pq

    for directory, schema in tables.values():
        if not any(Path(directory).glob("part-*")):
            pq.write_table(schema.empty_table(), Path(directory) / "part-00000.parquet")


class TopicRows:
    """One plan table's rows looked up by topic inside a task, with no shuffle. Its Parquet files (each file a
    Spark reader reads: not hidden, not a checksum) are each sorted by topic (as :class:`TaskParts` and
    ``write_table`` write them), so the topic ranges of each file's row groups, read once from the footers, say
    where a topic's rows can be: only those row groups are read, and their rows filtered to the topic. A row group
    without statistics is read for every topic, and a file whose ranges are out of order is searched whole."""

    def __init__(self, directory: str, schema: pa.Schema) -> None:
        import pyarrow.parquet as pq

        self._columns = [*dict.fromkeys(["topic", *schema.names])]
        self._schema = schema
        self._files = []
        visible = (p for p in Path(directory).glob("*") if not p.name.startswith((".", "_")))
        for path in sorted(p for p in visible if p.suffix != ".crc"):
            parquet = pq.ParquetFile(path)
            column = parquet.schema_arrow.get_field_index("topic")
            ranged, unranged = [], []
            for index in range(parquet.metadata.num_row_groups):
                stats = parquet.metadata.row_group(index).column(column).statistics
                if stats is not None and stats.has_min_max:
                    ranged.append((stats.min, stats.max, index))
                else:
                    unranged.append(index)
            in_order = all(ranged[i][0] >= ranged[i - 1][1] for i in range(1, len(ranged)))
            self._files.append(
                (parquet, ranged, [high for _, high, _ in ranged] if in_order else None, unranged)
            )

    def _row_groups(self, ranged: list, highs: list | None, topic: str) -> list[int]:
        """The row groups whose topic range holds ``topic``; in a file in order, consecutive from the first whose
        highest topic is not below it."""
        chosen = []
        for low, high, index in ranged[bisect.bisect_left(highs, topic) :] if highs is not None else ranged:
            if low > topic:
                if highs is not None:
                    break
                continue
            if high >= topic:
                chosen.append(index)
        return chosen

    def of(self, topic: str | None) -> pa.Table:
        """The rows of ``topic`` (None: the rows without one) with the schema asked for, in file order."""
        import pyarrow as pa
        import pyarrow.compute as pc

        found = []
        for parquet, ranged, highs, unranged in self._files:
            if topic is None:  # rows without a topic: no range holds them
                chosen = list(range(parquet.metadata.num_row_groups))
            else:
                chosen = sorted(self._row_groups(ranged, highs, topic) + unranged)
            if chosen:
                rows = parquet.read_row_groups(chosen, columns=self._columns)
                mine = rows.filter(
                    pc.is_null(rows["topic"]) if topic is None else pc.equal(rows["topic"], topic)
                )
                found.append(mine.select(self._schema.names).cast(self._schema))
        return pa.concat_tables(found) if found else self._schema.empty_table()


@dataclass
class TopicWork:
    """What a task gives the work on one topic (:func:`map_topic_inputs`)."""

    source: dict[str, Any]  # the topic's sources row
    entries: Iterator[pa.Table]  # its input, a file at a time (topic_input_parts)
    rows: dict[str, pa.Table]  # its rows of each plan table the caller named
    written: TaskParts  # the task's part files of the tables the caller writes


def map_topic_inputs(
    sources: DataFrame,
    topics: int,
    tier: dict[str, str | None],
    names: list[str],
    per_topic: Callable[[TopicWork], pa.Table],
    schema: str,
    *,
    parts: Mapping[str, tuple[str, pa.Schema]] | None = None,
    rows: Mapping[str, tuple[str, pa.Schema]] | None = None,
) -> DataFrame:
    """``per_topic`` of each topic (:class:`TopicWork`) in the task that reads the topic's input
    (:func:`topic_input_parts`), one topic at a time, the task's topics in name order: the input is grouped by
    topic on disk, so work per topic needs no shuffle. ``sources``: :data:`TOPIC_SOURCES` rows (``topics`` of
    them), plus any columns ``per_topic`` reads; ``schema``: of the Arrow tables ``per_topic`` returns; ``parts``:
    the tables ``per_topic`` may write rows of (name -> directory and schema, :class:`TaskParts`; the directories
    prepared by the caller); ``rows``: plan tables whose rows of the topic it reads (name -> directory and the
    schema of the columns read, :class:`TopicRows`)."""
    url, endpoint_url = tier.get("url"), tier.get("endpoint_url")
    tables, lookups = dict(parts or {}), dict(rows or {})

    def run(batches: Iterator) -> Iterator:
        object_tier = _object_tier(url, endpoint_url)
        written = TaskParts(tables)
        by_topic = {name: TopicRows(*where) for name, where in lookups.items()}
        for batch in batches:
            for source in batch.to_pylist():
                work = TopicWork(
                    source,
                    topic_input_parts(source, names, object_tier),
                    {name: table.of(source["topic"]) for name, table in by_topic.items()},
                    written,
                )
                yield from per_topic(work).to_batches()
        written.close()

    tasks = topic_tasks(sources, topics)
    return sources.repartition(tasks).sortWithinPartitions("topic").mapInArrow(run, schema)


def _object_tier(url: str | None, endpoint_url: str | None) -> Any:
    from housekeeping.store.tier import ObjectTier

    return ObjectTier.of(url, endpoint_url) if url else None


def topic_tasks(frame: DataFrame, topics: int) -> int:
    """How many tasks share ``topics`` topics: one per topic, at most the session's shuffle partitions (the knob
    docs/deployment.md has operators raise for a larger cluster), and never fewer than one."""
    partitions = int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions") or 1)
    return max(1, min(topics, partitions))


def _get(row, name: str):
    """A field of a Spark Row or of a JSON row (where null fields are left out)."""
    return row.get(name) if isinstance(row, dict) else row[name]


def topic_inputs(rows: list) -> list[TopicInput]:
    """TopicInput per planned row (``readFromLedger``/``readFromEntry`` null = from the start)."""
    return [
        TopicInput(
            topic=row["topic"],
            compacted_ledger_id=_get(row, "prevCompactedLedgerId"),
            read_from=(
                (int(row["readFromLedger"]), int(row["readFromEntry"]))
                if _get(row, "readFromLedger") is not None
                else None
            ),
            horizon=(int(row["horizonLedger"]), int(row["horizonEntry"])),
            raw_ledger_ids=tuple(int(i) for i in row["rawLedgerIds"]),
        )
        for row in rows
    ]
