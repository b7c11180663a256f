"""Entry I/O of topic compaction, shared by the planner, the gate and the apply app (only I/O lives here).

What compaction reads for one topic (Pulsar's ``RawReader`` on ``__compaction`` with ``readCompacted``):
the topic's current compacted ledger, whole, then the raw entries after that ledger's horizon up to the
run's horizon. Without a compacted ledger it reads every raw entry still stored (see docs/semantics.md:
strictly safer than starting at a ``__compaction`` cursor that has no compacted ledger behind it).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.shared.io import ENTRY_COLUMNS, LedgerFiles, entry_columns

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


def _ledger_paths(files: LedgerFiles, topic: str, ledger_ids: list[int]) -> list[str]:
    return [str(files.checked_dir(topic, ledger_id)[0]) for ledger_id in ledger_ids]


def read_compaction_input(
    spark: SparkSession, files: LedgerFiles, inputs: list[TopicInput], *, full: bool = False
) -> DataFrame:
    """The entries compaction reads, with ``source`` (compacted | raw) and ``entryTs`` (broker timestamp when
    stored, else publish time). ``full`` adds the payload and properties (the apply app's copy)."""
    schema = ENTRY_COLUMNS if full else DECISION_COLUMNS  # full: everything the apply app copies
    bounds_rows = []
    compacted_paths: list[str] = []
    raw_ledgers: list[tuple[str, int]] = []
    for item in inputs:
        if item.compacted_ledger_id is not None:
            compacted_paths += _ledger_paths(files, item.topic, [item.compacted_ledger_id])
        raw_ledgers += [(item.topic, ledger_id) for ledger_id in item.raw_ledger_ids]
        low = item.read_from or (-1, -1)
        bounds_rows.append((item.topic, low[0], low[1], item.horizon[0], item.horizon[1]))
    bounds = spark.createDataFrame(
        bounds_rows,
        "topic string, fromLedger long, fromEntry long, horizonLedger long, horizonEntry long",
    )
    empty = spark.createDataFrame([], schema)
    compacted = spark.read.schema(schema).parquet(*compacted_paths) if compacted_paths else empty
    # A raw ledger whose local copy is deleted is read from the object tier (compacted ledgers are never offloaded).
    raw = files.read(spark, raw_ledgers, schema)
    position = F.struct("ledgerId", "entryId")
    raw = (
        raw.join(F.broadcast(bounds), "topic")
        .where(
            (position > F.struct(F.col("fromLedger").alias("ledgerId"), F.col("fromEntry").alias("entryId")))
            & (
                position
                <= F.struct(F.col("horizonLedger").alias("ledgerId"), F.col("horizonEntry").alias("entryId"))
            )
        )
        .select(*schema.fieldNames())
    )
    return (
        compacted.withColumn("source", F.lit("compacted"))
        .unionByName(raw.withColumn("source", F.lit("raw")))
        .withColumn("entryTs", F.coalesce(F.col("brokerTimestamp"), F.col("publishTime")))
    )


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
