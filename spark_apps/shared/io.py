"""I/O of the Spark apps through the contract (``housekeeping.engine.contract``): the snapshot tables, the plan tables
they write and read, the plan summary, and the entries of ledgers. Decision logic is in each app's transforms."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from housekeeping.core.errors import InputError
from housekeeping.engine.contract import ACTIONS, BASE_SNAPSHOT_TABLES, SNAPSHOT_TABLES, Table, sql_identifier
from housekeeping.engine.documents import PlanSummary, RunInfo, read_run_info, write_document
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot_reads import is_json_lines, snapshot_file
from spark_apps.shared.session import materialize

_ATOMIC = {
    "string": T.StringType(),
    "bigint": T.LongType(),
    "int": T.IntegerType(),
    "boolean": T.BooleanType(),
    "double": T.DoubleType(),
    "binary": T.BinaryType(),
}


def _spark_type(name: str) -> T.DataType:
    if name.startswith("array<") and name.endswith(">"):
        return T.ArrayType(_spark_type(name[len("array<") : -1]))
    return _ATOMIC[name]


def schema(table: Table) -> T.StructType:
    """The table's Spark schema (the contract's types and nullability), without a session."""
    return T.StructType([T.StructField(c.name, _spark_type(c.type), c.nullable) for c in table.columns])


def read_snapshot_table(spark: SparkSession, run_dir: str | Path | RunDir, table: Table) -> DataFrame:
    """One snapshot table with the contract's schema: its Parquet file (or a run's from before, JSON lines)."""
    path = snapshot_file(run_dir, table)
    reader = spark.read.schema(table.ddl())
    return reader.json(str(path)) if is_json_lines(path) else reader.parquet(str(path))


def read_snapshot(spark: SparkSession, run_dir: str | Path | RunDir) -> dict[str, DataFrame]:
    """The snapshot tables the run's mechanism needs (``snapshotTables`` in run.json), by name."""
    run = RunDir(run_dir)
    names = read_run_info(run).snapshot_tables or list(SNAPSHOT_TABLES)
    return {
        name: read_snapshot_table(spark, run, SNAPSHOT_TABLES[name])
        for name in dict.fromkeys([*BASE_SNAPSHOT_TABLES, *names])
    }


def conform(frame: DataFrame, table: Table) -> DataFrame:
    """The frame as the contract's table: exactly its columns, in its order, with its types. A column the frame
    lacks (unless the table is sparse and the column nullable: it is null) or one the table does not define is a
    bug in the app: ValueError, nothing is written."""
    present = set(frame.columns)
    missing = [c.name for c in table.columns if c.name not in present and not (table.sparse and c.nullable)]
    extra = [name for name in frame.columns if name not in table.names]
    if missing or extra:
        raise ValueError(
            f"plan table {table.name}: the frame "
            + "; ".join(
                part
                for part in (
                    f"lacks {', '.join(missing)}" if missing else "",
                    f"has columns the contract does not define: {', '.join(extra)}" if extra else "",
                )
                if part
            )
        )
    # One projection of SQL expressions, parsed by Spark in one call: built from Column objects it would take
    # several py4j round trips per column (a plan conforms a few hundred columns per run), as strings one each.
    return frame.selectExpr(
        *[
            f"CAST({sql_identifier(c.name) if c.name in present else 'NULL'} AS {c.type}) AS {sql_identifier(c.name)}"
            for c in table.columns
        ]
    )


def write_table(frame: DataFrame, run_dir: str | Path | RunDir, table: Table, order_by: list[str]) -> None:
    """A plan table, conformed to the contract. JSON: one part file, rows in a stable order, so plans are diffable
    and digestible; Parquet (entry tables): partitioned by topic, sorted within."""
    out = conform(frame, table)
    path = str(RunDir(run_dir).plan_table(table))
    if table.format == "parquet":
        out.repartition("topic").sortWithinPartitions(*order_by).write.mode("overwrite").parquet(path)
    else:
        out.repartition(1).sortWithinPartitions(*order_by).write.mode("overwrite").json(path)


def read_table(spark: SparkSession, run_dir: str | Path | RunDir, table: Table) -> DataFrame:
    """A plan table written by :func:`write_table`, read with the contract's schema."""
    path = str(RunDir(run_dir).plan_table(table))
    reader = spark.read.schema(table.ddl())
    return reader.parquet(path) if table.format == "parquet" else reader.json(path)


def read_actions(spark: SparkSession, run_dir: str | Path | RunDir) -> DataFrame:
    return read_table(spark, run_dir, ACTIONS)


def action_rows(frame: DataFrame, action: str, **columns: Column) -> DataFrame:
    """Rows of the contract's actions table: ``action`` and the given columns; every other column null."""
    return conform(
        frame.select(F.lit(action).alias("action"), *[v.alias(k) for k, v in columns.items()]), ACTIONS
    )


def write_summary(run_dir: str | Path | RunDir, summary: PlanSummary) -> None:
    """``plan/summary.json`` (read back by ``housekeeping.engine.plan.read_summary``)."""
    write_document(RunDir(run_dir).plan_summary, summary)


# A ledger file's entries as Spark reads them: housekeeping.store.entries.ENTRY_SCHEMA's columns, types and order.
ENTRY_COLUMNS = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("ledgerId", T.LongType(), False),
        T.StructField("entryId", T.LongType(), False),
        T.StructField("publishTime", T.LongType(), False),
        T.StructField("brokerTimestamp", T.LongType(), True),
        T.StructField("key", T.StringType(), True),
        T.StructField("value", T.BinaryType(), True),
        T.StructField("size", T.IntegerType(), False),
        T.StructField("properties", T.MapType(T.StringType(), T.StringType()), True),
    ]
)


def entry_columns(*names: str) -> T.StructType:
    """Some of :data:`ENTRY_COLUMNS`, in the file's order (a read of only these columns)."""
    return T.StructType([f for f in ENTRY_COLUMNS.fields if f.name in names])


def key_digests(keys: Any) -> Any:
    """Each entry key's SHA-256 in hex, as Spark's ``sha2(key, 256)`` computes it (of the key's UTF-8 bytes; null
    stays null): how plans name keys. ``keys``: an Arrow array or chunked array of strings."""
    import hashlib

    import pyarrow as pa

    return pa.array(
        [None if key is None else hashlib.sha256(key.encode()).hexdigest() for key in keys.to_pylist()],
        pa.string(),
    )


def input_file_dir() -> Column:
    """The directory of the file a row was read from, as a plain path."""
    return file_dir(F.input_file_name())


def file_dir(uri: Column) -> Column:
    """The directory of a file Spark names by a URI (``file:///a%20b/c+d/part-0.parquet``), as a plain path: '%'
    escapes are decoded, while a '+' is a '+' (URL-form decoding would make it a space; run directories of Airflow
    runs hold '+' and ':')."""
    path = F.regexp_replace(F.regexp_replace(uri, "^file:/*", "/"), "\\+", "%2B")
    return F.regexp_replace(F.url_decode(path), "/[^/]*$", "")


def read_dirs(spark: SparkSession, dirs: list[str], columns: T.StructType) -> DataFrame:
    """The entries (``columns``) of the ledger directories ``dirs`` in one read, each row with the ``dir`` it was
    read from (to join the directory's own facts on)."""
    if not dirs:
        return spark.createDataFrame([], columns).withColumn("dir", F.lit(None).cast("string"))
    return spark.read.schema(columns).parquet(*dirs).withColumn("dir", input_file_dir())


def entries_of_digests(entries: DataFrame, digests: DataFrame) -> DataFrame:
    """The entries (with ``key``) whose key's SHA-256 is a ``keyDigest`` of ``digests``, each with its
    ``keyDigest``."""
    wanted = F.broadcast(digests.select("keyDigest").distinct())
    return (
        entries.where(F.col("key").isNotNull())
        .withColumn("keyDigest", F.sha2(F.col("key"), 256))
        .join(wanted, "keyDigest", "left_semi")
    )


def read_dirs_of_digests(
    spark: SparkSession, dirs: list[str], columns: T.StructType, digests: DataFrame
) -> DataFrame:
    """As :func:`read_dirs`, only the entries whose key's SHA-256 is a ``keyDigest`` of ``digests`` (``columns``
    with ``key``), each with its ``keyDigest``. The entries found are materialized before their directory is
    derived from the file's name: a later join on ``dir`` would otherwise have the optimizer test the directory
    of every entry read, not of the few found."""
    if not dirs:
        return entries_of_digests(read_dirs(spark, [], columns), digests)
    read = spark.read.schema(columns).parquet(*dirs).withColumn("file", F.input_file_name())
    found = materialize(entries_of_digests(read, digests))
    return found.withColumn("dir", file_dir(F.col("file"))).drop("file")


@dataclass(frozen=True)
class LedgerFiles:
    """Where each ledger's entries are at the run's snapshot: ``<ledgerId>`` unless key erasure rewrote the ledger
    (``fileGenerations`` in run.json lists the ledgers whose files are at a later generation), or in the object tier
    when its local copy is deleted (``tierLedgers``: read through ``spark_apps.shared.tier_reads``)."""

    root: Path
    generations: dict[tuple[str, int], int] = field(default_factory=dict)
    tier_objects: dict[tuple[str, int], str] = field(default_factory=dict)  # (topic, ledger) -> object key
    tier: dict[str, str | None] = field(default_factory=dict)  # url, endpoint_url

    @classmethod
    def of(cls, info: RunInfo) -> LedgerFiles:
        from housekeeping.store.tier import object_key

        return cls(
            Path(info.store),
            {(topic, int(ledger)): int(gen) for topic, ledger, gen in info.file_generations or []},
            {
                (topic, int(ledger)): object_key(topic, int(ledger), uuid)
                for topic, ledger, uuid in info.tier_ledgers or []
            },
            {"url": info.offload_tier, "endpoint_url": info.offload_endpoint},
        )

    def generation(self, topic: str, ledger_id: int) -> int:
        return self.generations.get((topic, int(ledger_id)), 0)

    def dir(self, topic: str, ledger_id: int) -> Path:
        from housekeeping.store.store import ledger_rel_path

        return self.root / ledger_rel_path(topic, ledger_id, self.generation(topic, ledger_id))

    def in_tier(self, topic: str, ledger_id: int) -> bool:
        return (topic, int(ledger_id)) in self.tier_objects

    def checked_dir(self, topic: str, ledger_id: int) -> tuple[Path, list[Path]]:
        """The ledger's directory and its Parquet files, checked (``check_ledger_files``: the error names the
        topic, ledger and file)."""
        from housekeeping.store.entries import check_ledger_files

        ledger_dir = self.dir(topic, ledger_id)
        return ledger_dir, check_ledger_files(topic, ledger_id, ledger_dir)

    def read(
        self,
        spark: SparkSession,
        ledgers: list[tuple[str, int]],
        columns: T.StructType,
        *,
        with_dir: bool = False,
    ) -> DataFrame:
        """The entries (``columns``) of these ledgers in one frame, each read where it is: its local directory
        (checked first) or its tier object. ``with_dir``: each row with the ``dir`` of its ledger's local copy."""
        local = [str(self.checked_dir(t, lid)[0]) for t, lid in ledgers if not self.in_tier(t, lid)]
        tiered = [(t, int(lid)) for t, lid in ledgers if self.in_tier(t, lid)]
        frame = read_dirs(spark, local, columns)
        if tiered:
            frame = frame.unionByName(self._read_tier(spark, tiered, columns))
        return frame if with_dir else frame.drop("dir")

    def tier_ledgers_by_dir(self) -> dict[str, tuple[str, int]]:
        """(topic, ledger) of each ledger only in the tier, by the directory its local copy had."""
        return {str(self.dir(t, lid)): (t, lid) for t, lid in self.tier_objects}

    def read_dirs_of_digests(
        self, spark: SparkSession, dirs: list[str], columns: T.StructType, digests: DataFrame
    ) -> DataFrame:
        """As :func:`read_dirs_of_digests`, a ledger whose local copy is deleted read from the tier under its
        directory."""
        by_dir = self.tier_ledgers_by_dir()
        tiered = [by_dir[d] for d in dirs if d in by_dir]
        local = read_dirs_of_digests(spark, [d for d in dirs if d not in by_dir], columns, digests)
        if not tiered:
            return local
        return local.unionByName(entries_of_digests(self._read_tier(spark, tiered, columns), digests))

    def tier_object(self, topic: str, ledger_id: int) -> str:
        """The object key of a ledger only in the tier; bad input when the run has no tier configured."""
        if not self.tier.get("url"):
            raise InputError(
                f"topic {topic} ledger {ledger_id} is only in the object tier, which this run has not configured "
                "(HOUSEKEEPING_OFFLOAD_URL)"
            )
        return self.tier_objects[(topic, int(ledger_id))]

    def _read_tier(
        self, spark: SparkSession, ledgers: list[tuple[str, int]], columns: T.StructType
    ) -> DataFrame:
        """The entries of ledgers only in the tier, each row with its ledger's local ``dir``."""
        from spark_apps.shared.tier_reads import read_tier_ledgers

        objects = [(self.tier_object(*key), str(self.dir(*key))) for key in ledgers]
        return read_tier_ledgers(spark, self.tier, objects, columns)


class TopicEntryReads:
    """A per-topic rule's entry reads (``spark_apps.shared.cursor_rule.EntryReader``), inside a pass's task: each
    ledger read once, where it is (its local files, checked first: the error names the topic, ledger and file; or
    its tier object), its entries as (entryId, publishTime, entryTs: broker timestamp when stored, else publish
    time); what was read is counted: the ledgers, their payload bytes per the metadata and the local files' bytes."""

    COLUMNS = ("topic", "ledgerId", "entryId", "publishTime", "brokerTimestamp")

    def __init__(self, files: LedgerFiles, topic: str) -> None:
        self.files, self.topic = files, topic
        self.read_ledgers: dict[int, list[dict]] = {}
        self.cost = {"ledgersRead": 0, "entryBytesRead": 0, "fileBytesRead": 0}

    def __call__(self, ledger_id: int, payload_bytes: int) -> list[dict]:
        if ledger_id not in self.read_ledgers:
            self.read_ledgers[ledger_id] = self._read(ledger_id)
            self.cost["ledgersRead"] += 1
            self.cost["entryBytesRead"] += int(payload_bytes)
        return self.read_ledgers[ledger_id]

    def cost_row(self, ledgers: list[dict]) -> dict[str, int]:
        """What this topic read, beside what its ledgers store: a row of a pass's :data:`READ_COST` table."""
        stored = [r["size"] for r in ledgers if r["entriesStored"]]
        return {**self.cost, "ledgersStored": len(stored), "storedEntryBytes": sum(stored)}

    def _read(self, ledger_id: int) -> list[dict]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from housekeeping.store.tier import ObjectTier

        columns = list(self.COLUMNS)
        if self.files.in_tier(self.topic, ledger_id):
            tier = ObjectTier.of(str(self.files.tier["url"]), self.files.tier.get("endpoint_url"))
            table = tier.read_ledger(self.files.tier_object(self.topic, ledger_id), columns=columns)
        else:
            paths = self.files.checked_dir(self.topic, ledger_id)[1]
            self.cost["fileBytesRead"] += sum(path.stat().st_size for path in paths)
            table = pa.concat_tables([pq.ParquetFile(path).read(columns=columns) for path in paths])
        return [
            {
                "entryId": row["entryId"],
                "publishTime": row["publishTime"],
                "entryTs": row["publishTime"] if row["brokerTimestamp"] is None else row["brokerTimestamp"],
            }
            for row in table.to_pylist()
            if row["topic"] == self.topic and row["ledgerId"] == ledger_id
        ]


# A one-pass rule's extra table of what each topic read from the entry store (:meth:`TopicEntryReads.cost_row`),
# added up into the plan's summary, never written.
READ_COST = "reads"


def read_costs(rows: list[dict[str, int]]) -> dict[str, int]:
    """A bucket's :data:`READ_COST` rows added up."""
    total: dict[str, int] = {}
    for row in rows:
        for key, value in row.items():
            total[key] = total.get(key, 0) + value
    return total


def read_cost(reads: dict[str, int]) -> dict[str, Any]:
    """The summary's ``reads``: what the plan read from the entry store, against what the store holds."""
    stored, read = int(reads.get("storedEntryBytes", 0)), int(reads.get("entryBytesRead", 0))
    return {
        "ledgersRead": int(reads.get("ledgersRead", 0)),
        "ledgersStored": int(reads.get("ledgersStored", 0)),
        "entryBytesRead": read,
        "fileBytesRead": int(reads.get("fileBytesRead", 0)),
        "storedEntryBytes": stored,
        "readShare": (read / stored) if stored else 0.0,
    }
