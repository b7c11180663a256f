"""The contract between the library and the Spark apps: a run directory's paths and every table in it.

A run of a mechanism lives in one directory (``<store>/runs/<mechanism>/<run>/``)::

    snapshot/run.json           the run's facts (``documents.RunInfo``)
    snapshot/<table>.parquet    SNAPSHOT_TABLES: written by Python (housekeeping.engine.snapshot), read by Spark
                                (a run snapshotted before 2026-11-26 has snapshot/<table>.jsonl: still read);
                                a table with a topic column is clustered by topic: row group b holds whole
                                topics, those of bucket b (:func:`topic_bucket`, ``snapshotBuckets`` in run.json)
    plan/<table>/part-*.json    the planner's tables: written by Spark, read by the gate, apply and the report
    plan/compaction/*           compaction's entry tables (Parquet)
    plan/summary.json           the planner's totals
    gate/result.json            the gate's verdict; gate/data_docs/index.html its Great Expectations pages
    approval/request.json       whether the plan needs a person's approval (thresholds), request.md what they see;
    approval/decision.json      who approved or rejected it, and when
    apply/result.json           what apply did; apply/purge.json what purge did
    report/report.json          the report's data; report/report.md the page a person reads

Every path is a property of :class:`housekeeping.engine.run_dir.RunDir`; every table is a :class:`Table`, defined
once here (the snapshot's, the plan's; a mechanism's own in its ``tables.py``): the Python writer
builds its rows through :meth:`Table.row` (a key the table does not define is an error), the Spark side derives
its schemas from :meth:`Table.ddl`, and :meth:`Table.read_row` reads a row back with every column present. Types
are Spark SQL type names. Changing a table here changes both sides; nothing else spells out its columns. A topic's bucket in a clustered
table is :func:`topic_bucket`.

Beside it: the run directory and its JSON files (``run_dir``), the Parquet writers (``parquet_rows``), the readers
of the snapshot's tables (``snapshot_reads``).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from housekeeping.core.errors import InputError


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark SQL type: string, bigint, int, boolean, double, array<bigint>, ...
    nullable: bool = True


_ARROW_TYPES = {"string": "string", "bigint": "int64", "int": "int32", "boolean": "bool", "double": "double"}


def _arrow_type(spark_type: str) -> Any:
    import pyarrow as pa

    if spark_type not in _ARROW_TYPES:
        raise ValueError(f"no Arrow type for the Spark type {spark_type!r} (scalar columns only)")
    return pa.type_for_alias(_ARROW_TYPES[spark_type])


def sql_identifier(name: str) -> str:
    """A column name as a Spark SQL identifier (the DDL of a table, a projection written as SQL text)."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Table:
    """One table of the run directory: its name (the file or directory under ``snapshot/`` or ``plan/``), its
    columns in the order they are written, and the format of its files."""

    name: str
    columns: tuple[Column, ...]
    format: str = "json"  # json (JSON lines) or parquet; every snapshot table is parquet
    # A table several mechanisms write, each with the columns it uses (actions, blockers): a writer may leave a
    # nullable column out (it is null). Every other table is written whole.
    sparse: bool = False

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @cached_property
    def _name_set(self) -> frozenset[str]:
        return frozenset(self.names)

    @cached_property
    def _required(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if not c.nullable)

    def ddl(self) -> str:
        """The Spark schema, as a DDL string (``spark.read.schema``, ``createDataFrame``)."""
        return ", ".join(f"{sql_identifier(c.name)} {c.type}" for c in self.columns)

    def arrow_schema(self) -> Any:
        """The table's schema in Arrow (Python reads and writes a table columnar with it); scalar columns only."""
        import pyarrow as pa

        return pa.schema([pa.field(c.name, _arrow_type(c.type), c.nullable) for c in self.columns])

    def row(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A row to write, in column order, checked (:meth:`check`)."""
        self.check(values)
        return {name: values.get(name) for name in self.names}

    def check(self, values: Mapping[str, Any]) -> None:
        """A key the table does not define, or a required column left out or None, is a bug in the writer:
        ValueError, before anything is written. (Called per row a writer is given as a mapping, so the column sets
        are computed once per table; a batch of rows is checked by :meth:`check_batch`.)"""
        if not self._name_set.issuperset(values):
            unknown = sorted(set(values) - self._name_set)
            raise ValueError(
                f"table {self.name}: no column {', '.join(unknown)} (columns: {', '.join(self.names)})"
            )
        missing = [name for name in self._required if values.get(name) is None]
        if missing:
            raise ValueError(f"table {self.name}: required column(s) {', '.join(missing)} missing")

    def check_batch(self, batch: Any) -> None:
        """:meth:`check` for a batch of rows (an Arrow table): its columns must be the table's, in order and of
        their types, and no required column may hold a null. ValueError, before anything is written."""
        found = [f"{field.name} {field.type}" for field in batch.schema]
        if found != [f"{field.name} {field.type}" for field in self.arrow_schema()]:
            raise ValueError(
                f"table {self.name}: a batch of columns {', '.join(found)} (columns: {self.ddl()})"
            )
        missing = [name for name in self._required if batch.column(name).null_count]
        if missing:
            raise ValueError(f"table {self.name}: required column(s) {', '.join(missing)} missing")

    def read_row(self, raw: Mapping[str, Any], where: str) -> dict[str, Any]:
        """A row read back (Spark's JSON writer leaves null columns out): every column present, None when
        absent. A column the table does not define means the file is not this table: bad input naming it."""
        unknown = sorted(set(raw) - set(self.names))
        if unknown:
            raise InputError(f"{where}: column(s) {', '.join(unknown)} are not in table {self.name}")
        return {c.name: raw.get(c.name) for c in self.columns}

    def select(self, *names: str) -> Table:
        """The same table with only ``names`` (a reader that needs a few columns)."""
        by_name = {c.name: c for c in self.columns}
        return Table(self.name, tuple(by_name[n] for n in names), self.format, self.sparse)


def _cols(spec: str) -> tuple[Column, ...]:
    """``"topic string!, ledgerId bigint"``: name, type, ``!`` = not null."""
    out = []
    for part in spec.split(","):
        name, type_ = part.split(None, 1)
        required = type_.endswith("!")
        out.append(Column(name.strip(), type_.rstrip("!").strip(), not required))
    return tuple(out)


def table(name: str, spec: str, format: str = "json", *, sparse: bool = False) -> Table:
    """A table from a column spec ``"topic string!, ledgerId bigint"`` (``!``: not null); a mechanism declares
    its own plan tables with it (``mechanisms/<m>/tables.py``)."""
    return Table(name, _cols(spec), format, sparse)


# --- snapshot tables (housekeeping.engine.snapshot writes them; every planner and the gate read them) ------------------
# Parquet, one file each: the Spark apps read the columns a query uses without parsing every row's text (a
# 100,000-topic trim plan read its JSON-lines snapshot in about half its time; benchmarks/README.md).


def snapshot_table_spec(name: str, spec: str) -> Table:
    return table(name, spec, "parquet")


TOPICS = snapshot_table_spec(
    "topics",
    "topic string!, namespace string!, tenant string!, isSystemTopic boolean!, version bigint!, incarnation string, "
    "producers bigint!, consumers bigint!, lastActiveMs bigint, retentionTimeMs bigint!, retentionSizeBytes bigint!, "
    "retentionSource string!, retentionDescription string!, messageTtlSeconds bigint!, messageTtlSource string!, "
    "sizeQuotaLimitBytes bigint!, sizeQuotaPolicy string!, timeQuotaLimitSeconds bigint!, timeQuotaPolicy string!, "
    "policies string!, inactiveDeleteMode string, maxInactiveSeconds bigint, deleteWhileInactive boolean, "
    "inactivePolicySource string, partitionedTopic string, compactionThresholdBytes bigint, "
    "compactedRetentionTimeMs bigint, compactedRetentionSizeBytes bigint, compactedRetentionDescription string, "
    "tombstoneGraceMs bigint, heldBy string, "
    # Tiered storage: whether an offloader applies to the topic (a tier is configured and the namespace is not a
    # system-service one: NullLedgerOffloader), the resolved offload thresholds (< 0 disabled) and the
    # offload-deletion lag (-1 never, null unset everywhere).
    "offloader boolean!, offloadThresholdBytes bigint!, offloadThresholdSeconds bigint!, offloadDeletionLagMs bigint, "
    "offloadPolicyDescription string!",
)
LEDGERS = snapshot_table_spec(
    "ledgers",
    "topic string!, ledgerId bigint!, entries bigint!, size bigint!, closedAtMs bigint, minEntryTsMs bigint, "
    "maxEntryTsMs bigint, entriesStored boolean!, "
    # The offload context: an attempt was made (a UUID is recorded), it completed, when completion was recorded,
    # the local copy is deleted (read from the tier).
    "offloadAttempted boolean!, offloadComplete boolean!, offloadedAtMs bigint, localDeleted boolean!",
)
CURSORS = snapshot_table_spec(
    "cursors",
    "topic string!, name string!, durable boolean!, markDeleteLedger bigint!, markDeleteEntry bigint!, "
    "lastActiveMs bigint, consumers bigint!",
)
NAMESPACES = snapshot_table_spec("namespaces", "namespace string!, storedBytes bigint!, topicCount bigint!")
QUOTA_STATES = snapshot_table_spec(
    "quota_states",
    "topic string!, quotaType string!, policy string!, exceeded boolean!, limitValue bigint!, "
    "measuredValue bigint, exceededSinceMs bigint, asOfMs bigint!",
)
PARTITIONED_TOPICS = snapshot_table_spec(
    "partitioned_topics",
    "partitionedTopic string!, namespace string!, partitions bigint!, existingPartitions bigint!, heldBy string",
)
HOLDS = snapshot_table_spec(
    "holds", "target string!, scope string!, reason string!, createdBy string!, createdAtMs bigint!"
)
COMPACTED_LEDGERS = snapshot_table_spec(
    "compacted_ledgers",
    "topic string!, ledgerId bigint!, horizonLedger bigint!, horizonEntry bigint!, entries bigint!, size bigint!, "
    "minEntryTsMs bigint, maxEntryTsMs bigint, tombstones bigint!, oldestTombstoneTsMs bigint, "
    "compactedAsOfMs bigint!",
)
# Key erasure: the requests to act on (the key's SHA-256 only) and the files waiting for purge (they may hold a key).
ERASURE_REQUESTS = snapshot_table_spec(
    "erasure_requests",
    "requestId bigint!, keyDigest string!, scope string!, target string!, requestedAtMs bigint!",
)
PENDING_FILES = snapshot_table_spec(
    "pending_files",
    "pendingId bigint!, topic string!, ledgerId bigint!, path string!, kind string!, size bigint!, "
    "purgeAfterMs bigint!, erasedBy string",
)
SNAPSHOT_TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        TOPICS,
        LEDGERS,
        CURSORS,
        NAMESPACES,
        QUOTA_STATES,
        PARTITIONED_TOPICS,
        COMPACTED_LEDGERS,
        HOLDS,
        ERASURE_REQUESTS,
        PENDING_FILES,
    )
}
# Every mechanism reads these; a mechanism's spec names the others it needs.
BASE_SNAPSHOT_TABLES = ("topics", "ledgers", "cursors", "namespaces", "holds")

# --- plan tables (the planners write them; the gate, apply and the report read them) ------------------------

# Every mechanism's actions, one table: the plan JSON contract (docs/cli.md). A mechanism fills the columns its
# actions use; the others stay null (left out of the JSON lines).
ACTIONS = table(
    "actions",
    "topic string, action string!, ledgerId bigint, subscription string, from string, to string, bytes bigint, "
    "reason string, "
    # flag_backlog_quota: which quota, its policy, the new state and the measurement
    "quotaType string, policy string, exceeded boolean, limitValue bigint, measuredValue bigint, "
    "exceededSinceMs bigint, "
    # delete_topic: the lastActive the decision was made on; refresh_last_active: the new value
    "lastActiveMs bigint, "
    # rewrite_compacted: where the raw read started (previous horizon), the counts that reconcile, and the size of
    # the compacted ledger it replaces (what it frees: bytesReplaced - bytes, the new one's)
    "readFrom string, entriesRead bigint, entriesKept bigint, entriesSuperseded bigint, entriesTombstoned bigint, "
    "entriesExpiredTime bigint, entriesExpiredSize bigint, entriesKeylessDropped bigint, entriesExpired bigint, "
    "bytesReplaced bigint, "
    # redact_ledger / redact_compacted: the files generation replaced and the entries redacted; expedite_purge:
    # the pending deletion whose purge is brought forward
    "fromGeneration bigint, entriesRedacted bigint, pendingId bigint, "
    # delete_local_copy: when the ledger's offload completed (the lag counts from it; apply compares it)
    "offloadedAtMs bigint, "
    # delete_orphan (store scrub): where the item is (local or tier), its path or object key, and the modification
    # time it was listed with (apply compares it)
    "location string, path string, mtimeMs bigint",
    sparse=True,
)
# Why what remains was kept: per topic (ledgers) or per subscription (entries).
BLOCKERS = table(
    "blockers",
    "topic string, subscription string, kind string, detail string, bytes bigint, ledgers bigint, entries bigint",
    sparse=True,
)


def topic_bucket(topic: str | None, buckets: int) -> int:
    """The bucket of a topic's rows in a clustered snapshot table: a hash stable across processes and versions
    (CRC-32 of the name), so every table of a run, and every point of a sweep, puts a topic in the same bucket."""
    return zlib.crc32((topic or "").encode()) % buckets


def topic_buckets(topics: Any, buckets: int) -> Any:
    """:func:`topic_bucket` of each of an Arrow array of topics (a NumPy array): computed once per distinct name,
    a batch's rows being whole topics."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(topics, pa.ChunkedArray):
        topics = topics.combine_chunks()
    encoded = pc.dictionary_encode(topics)
    names = encoded.dictionary.to_pylist()
    per_name = np.fromiter((topic_bucket(name, buckets) for name in names), np.int64, len(names))
    return per_name[encoded.indices.to_numpy(zero_copy_only=False)]
