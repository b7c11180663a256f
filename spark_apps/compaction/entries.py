"""Entry I/O of topic compaction, shared by the planner, the gate and the apply app (only I/O lives here).

What compaction reads for one topic (Pulsar's ``RawReader`` on ``__compaction`` with ``readCompacted``):
the topic's current compacted ledger, whole, then the raw entries after that ledger's horizon up to the
run's horizon. Without a compacted ledger it reads every raw entry still stored (see docs/semantics.md §11:
strictly safer than starting at a ``__compaction`` cursor that has no compacted ledger behind it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession

from spark_apps.shared.io import LedgerFiles, entry_columns
from spark_apps.shared.task_files import TaskParts, TopicRows, topic_tasks

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
