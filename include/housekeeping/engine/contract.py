"""The contract between the library and the Spark apps: a run directory's paths and every table in it.

A run of a mechanism lives in one directory (``<store>/runs/<mechanism>/<run>/``)::

    snapshot/run.json           the run's facts (RUN_INFO_KEYS)
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

Every path is a property of :class:`RunDir`; every table is a :class:`Table`, defined once here: the Python writer
builds its rows through :meth:`Table.row` (a key the table does not define is an error), the Spark side derives
its schemas from :meth:`Table.ddl`, and :meth:`Table.read_row` reads a row back with every column present. Types
are Spark SQL type names. Changing a table here changes both sides; nothing else spells out its columns.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

from housekeeping.core.errors import InputError
from housekeeping.store.fs import remove_file


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

# The keys of snapshot/run.json.
RUN_INFO_KEYS = (
    "runId",
    "mechanism",
    "asOfMs",
    "asOf",
    "scope",
    "maxDeletedShare",
    "maxDeletedTopicShare",
    "compactTopics",
    "scheduleIntervalMs",
    "store",
    "metadata",
    "broker",
    "takenAtWallClockMs",
    "actor",
    "snapshotTables",
    "snapshotBuckets",
    "fileGenerations",
    "offloadTier",
    "offloadEndpoint",
    "tierLedgers",
    "scrubMinAgeSeconds",
)


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


# --- the run directory -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunDir:
    """Every path of one run directory (see the module docstring)."""

    path: Path

    def __init__(self, path: str | Path | RunDir) -> None:
        object.__setattr__(self, "path", Path(path.path if isinstance(path, RunDir) else path))

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    # snapshot
    @property
    def snapshot_dir(self) -> Path:
        return self.path / "snapshot"

    @property
    def run_info(self) -> Path:
        return self.snapshot_dir / "run.json"

    def snapshot_table(self, table: Table | str) -> Path:
        """Where a snapshot table is written (Parquet). Readers go through :func:`snapshot_file`, which also finds
        a run snapshotted as JSON lines before."""
        name = table if isinstance(table, str) else table.name
        return self.snapshot_dir / f"{name}.parquet"

    # plan
    @property
    def plan_dir(self) -> Path:
        return self.path / "plan"

    def plan_table(self, table: Table | str) -> Path:
        return self.plan_dir / (table if isinstance(table, str) else table.name)

    @property
    def plan_summary(self) -> Path:
        return self.plan_dir / "summary.json"

    # gate
    @property
    def gate_dir(self) -> Path:
        return self.path / "gate"

    @property
    def gate_result(self) -> Path:
        return self.gate_dir / "result.json"

    @property
    def data_docs_dir(self) -> Path:
        return self.gate_dir / "data_docs"

    @property
    def data_docs_index(self) -> Path:
        return self.data_docs_dir / "index.html"

    # approval (housekeeping.engine.approval): what was asked of a person, and what they decided
    @property
    def approval_dir(self) -> Path:
        return self.path / "approval"

    @property
    def approval_request(self) -> Path:
        return self.approval_dir / "request.json"

    @property
    def approval_request_md(self) -> Path:
        return self.approval_dir / "request.md"

    @property
    def approval_decision(self) -> Path:
        return self.approval_dir / "decision.json"

    # apply and purge
    @property
    def staged_ledgers_dir(self) -> Path:
        """Key erasure's redacted ledgers, written by the plan and moved into the store by apply (outside
        ``plan/``: the plan's ``erasure/ledgers`` table binds each one by its SHA-256)."""
        return self.path / "staged"

    def staged_ledger(self, name: str) -> Path:
        return self.staged_ledgers_dir / name

    @property
    def apply_dir(self) -> Path:
        return self.path / "apply"

    @property
    def apply_result(self) -> Path:
        return self.apply_dir / "result.json"

    @property
    def purge_result(self) -> Path:
        return self.apply_dir / "purge.json"

    @property
    def purge_due(self) -> Path:
        """What purge is about to remove, written before apply (the approval step): ``due``, ``held``, ``bytes``."""
        return self.approval_dir / "purge-due.json"

    # report
    @property
    def report_dir(self) -> Path:
        return self.path / "report"

    @property
    def report_json(self) -> Path:
        return self.report_dir / "report.json"

    def erasure_proof(self, request_id: int) -> Path:
        """Key erasure's proof-of-erasure document of one request (``housekeeping.mechanisms.erasure.proof``)."""
        return self.report_dir / "proofs" / f"request-{int(request_id)}.json"

    @property
    def report_md(self) -> Path:
        return self.report_dir / "report.md"


def _side_file(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place. One name per writer (a file's permissions as any
    other file's: mkstemp's would be 0600)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")


@contextmanager
def _replacing_file(path: Path) -> Iterator[Path]:
    """A side file beside ``path``, renamed onto it only when the block ends without an error: a reader never
    sees half a file, and a failed write leaves an earlier file as it was."""
    path = Path(path).absolute()  # the side file's removal resolves it against the directory it must stay in
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = _side_file(path)
    try:
        yield partial
        partial.replace(path)
    finally:
        remove_file(partial, within=path.parent)  # gone already when renamed


@contextmanager
def _replacing(path: Path) -> Iterator[TextIO]:
    """A text file written as :func:`_replacing_file` writes one."""
    with _replacing_file(path) as partial, partial.open("w", encoding="utf-8") as handle:
        yield handle


def write_json(path: Path, document: Any, *, indent: int | None = 2) -> None:
    """A run directory's JSON document (sorted keys: diffable, and stable for the plan digest), encoded in
    chunks: no second copy of a large document (a report of 100,000 topics) as one string."""
    with _replacing(path) as handle:
        json.dump(document, handle, indent=indent, sort_keys=True, default=str)


# Sorted keys and str() of what JSON has no type for, as write_json; compact, so the C encoder writes it.
_SORTED_KEYS_DEFAULT_STR = json.JSONEncoder(sort_keys=True, default=str)


def write_json_one_line_each(path: Path, document: Any, *, depth: int = 2, indent: int = 2) -> None:
    """A large JSON document (a run's report: one entry per topic, 100,000 of them), laid out for diffs and
    encoded fast: containers above ``depth`` indented, every value at ``depth`` on one line of its own (a topic's
    entry is one line), sorted keys. Python's ``json.dump`` encodes an indented document in pure Python (its C
    encoder only writes compact text), which dominated the time of a report of many topics."""
    encode = _SORTED_KEYS_DEFAULT_STR.encode
    with _replacing(path) as handle:
        for chunk in _laid_out(document, 0, depth, indent, encode):
            handle.write(chunk)
        handle.write("\n")


def _laid_out(value: Any, level: int, depth: int, indent: int, encode: Callable[[Any], str]) -> Iterator[str]:
    if level >= depth or not isinstance(value, dict | list | tuple) or not value:
        # A list subclass produced as it is iterated (the report's StreamedList) is iterated here: the C encoder
        # would read the list's own storage, which is empty. (One nested inside a value written on one line would
        # be written as []: the report keeps its streamed list at the top.)
        yield encode(list(value) if isinstance(value, list) and type(value) is not list else value)
        return
    pad, close = "\n" + " " * (indent * (level + 1)), "\n" + " " * (indent * level)
    if isinstance(value, dict):
        yield "{"
        for i, key in enumerate(sorted(value)):
            name = key if isinstance(key, str) else json.dumps(key)
            yield ("," if i else "") + pad + encode(name) + ": "
            yield from _laid_out(value[key], level + 1, depth, indent, encode)
        yield close + "}"
        return
    yield "["
    for i, item in enumerate(value):
        yield ("," if i else "") + pad
        yield from _laid_out(item, level + 1, depth, indent, encode)
    yield close + "]"


def read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# Rows per Parquet row group as a table is written: Python holds one group's rows at a time.
PARQUET_BATCH_ROWS = 50_000
# Rows a clustered table's writer holds across its buckets before it spills them: fewer than a Parquet row group,
# the topics table's rows being wide dicts.
SPILL_BATCH_ROWS = 16_000


class _RowWriter:
    """A writer used as a context manager: closed (the file in place) when the block ends, aborted (no file, an
    earlier one as it was) when it raises."""

    def close(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


class _CheckedBatches:
    """Rows checked against the table (:meth:`Table.check`) as they come and handed to ``self._writer`` (anything with
    Arrow's ``write_table``) a batch at a time, so memory does not grow with the table. Rows may also come a batch
    at a time already (:meth:`add_batch`); they are held and written with the rows around them, in order."""

    def __init__(self, spec: Table, batch: int, writer: Any) -> None:
        self.spec, self.batch, self._writer = spec, batch, writer
        self.schema = spec.arrow_schema()
        self.rows: list[Mapping[str, Any]] = []
        self._held: list[Any] = []  # Arrow tables before ``rows``, in order
        self._held_rows = 0
        self.count = 0

    def add(self, row: Mapping[str, Any]) -> None:
        # Checked, not copied in column order: Arrow takes each column's value from every row by name.
        self.spec.check(row)
        self.rows.append(row)
        if len(self.rows) + self._held_rows >= self.batch:
            self._flush()

    def add_batch(self, batch: Any) -> None:
        """Rows already columnar (an Arrow table of the table's schema), checked (:meth:`Table.check_batch`) and
        written after the rows added before them."""
        self.spec.check_batch(batch)
        self._hold_rows()
        self._held.append(batch.cast(self.schema))
        self._held_rows += batch.num_rows
        if self._held_rows >= self.batch:
            self._flush()

    def extend(self, rows: Iterable[Any]) -> None:
        add_rows(self, rows)

    def _hold_rows(self) -> None:
        import pyarrow as pa

        if self.rows:
            self._held.append(pa.Table.from_pylist(self.rows, schema=self.schema))
            self._held_rows += len(self.rows)
            self.rows = []

    def _flush(self) -> None:
        import pyarrow as pa

        self._hold_rows()
        if self._held_rows:
            self._writer.write_table(pa.concat_tables(self._held))
            self.count += self._held_rows
        self._held, self._held_rows = [], 0


class ParquetRows(_CheckedBatches, _RowWriter):
    """A table written as Parquet while its rows are produced, a batch at a time, every row checked. The file
    appears at ``path`` only when :meth:`close` is reached; :meth:`abort` (or an error inside ``with``) leaves an
    earlier file as it was."""

    def __init__(self, path: Path, spec: Table, batch: int = PARQUET_BATCH_ROWS) -> None:
        import pyarrow.parquet as pq

        self.path = Path(path).absolute()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.partial = _side_file(self.path)
        super().__init__(spec, batch, pq.ParquetWriter(self.partial, spec.arrow_schema()))

    def close(self) -> None:
        try:
            self._flush()
            self._writer.close()
            self.partial.replace(self.path)
        finally:
            remove_file(self.partial, within=self.path.parent)  # gone already when renamed

    def abort(self) -> None:
        self._writer.close()
        remove_file(self.partial, within=self.path.parent)

    def read_back(self) -> Iterator[dict[str, Any]]:
        """The rows written (after :meth:`close`), a batch at a time."""
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(self.path).iter_batches(batch_size=self.batch):
            yield from batch.to_pylist()


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


def add_rows(writer: Any, rows: Iterable[Any]) -> None:
    """Each item of ``rows`` to ``writer``: a row (a mapping) through ``add``, a batch of rows (an Arrow table)
    through ``add_batch``."""
    for row in rows:
        if isinstance(row, Mapping):
            writer.add(row)
        else:
            writer.add_batch(row)


class _ArrowSpill(_CheckedBatches):
    """One bucket's rows as they come, appended a batch at a time to an Arrow IPC file (an IPC writer holds no
    per-column encoding state, which one Parquet writer per bucket of a wide table does)."""

    def __init__(self, path: Path, spec: Table, batch: int) -> None:
        import pyarrow as pa

        self.path = path
        super().__init__(spec, batch, pa.ipc.new_file(str(path), spec.arrow_schema()))

    def read(self) -> Any:
        """Every row spilled, as one Arrow table (the writer closed)."""
        import pyarrow as pa

        self._flush()
        self._writer.close()
        with pa.OSFile(str(self.path)) as source:
            return pa.ipc.open_file(source).read_all()

    def abort(self) -> None:
        with suppress(Exception):  # closed already by read(), or its file half-written
            self._writer.close()


class BucketedParquetRows(_RowWriter):
    """A snapshot table clustered by topic (:func:`topic_bucket`): row group ``b`` of the file holds exactly the
    rows of bucket ``b``'s topics, sorted by topic with each topic's rows in the order they came, so one Spark task
    reads whole topics with one row-group read. Rows are spilled to one side file per bucket while they are
    produced (memory holds a batch per bucket, then one bucket at a time); the file appears at ``path`` only when
    :meth:`close` is reached, as :class:`ParquetRows`'s."""

    def __init__(self, path: Path, spec: Table, buckets: int, batch: int = SPILL_BATCH_ROWS) -> None:
        self.path, self.spec, self.buckets = Path(path).absolute(), spec, buckets
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._spills = [
            _ArrowSpill(
                _side_file(self.path.with_name(f"{self.path.name}.bucket-{b}")),
                spec,
                max(1, batch // buckets),
            )
            for b in range(buckets)
        ]
        self.count = 0

    def add(self, row: Mapping[str, Any]) -> None:
        self._spills[topic_bucket(row.get("topic"), self.buckets)].add(row)

    def add_batch(self, batch: Any) -> None:
        """A batch of rows (an Arrow table), each bucket's rows to its spill in the order they came."""
        import numpy as np
        import pyarrow as pa

        self.spec.check_batch(batch)
        if not batch.num_rows:
            return
        ids = topic_buckets(batch.column("topic"), self.buckets)
        ordered = batch.take(pa.array(np.argsort(ids, kind="stable")))
        start = 0
        for bucket, rows in enumerate(np.bincount(ids, minlength=self.buckets).tolist()):
            if rows:
                self._spills[bucket].add_batch(ordered.slice(start, rows))
                start += rows

    def extend(self, rows: Iterable[Any]) -> None:
        add_rows(self, rows)

    def close(self) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        partial = _side_file(self.path)
        try:
            writer = pq.ParquetWriter(partial, self.spec.arrow_schema())
            for spill in self._spills:
                bucket = spill.read()
                remove_file(spill.path, within=self.path.parent)
                order = pc.sort_indices(bucket, sort_keys=[("topic", "ascending")])  # stable
                # One row group per bucket, an empty one included: row group b is bucket b.
                writer.write_table(bucket.take(order), row_group_size=max(1, bucket.num_rows))
                self.count += bucket.num_rows
                del bucket, order
            writer.close()
            partial.replace(self.path)
        finally:
            remove_file(partial, within=self.path.parent)
            self.abort()

    def abort(self) -> None:
        for spill in self._spills:
            spill.abort()
            remove_file(spill.path, within=self.path.parent)


def write_parquet(path: Path, table: Table, rows: Iterable[Any], *, buckets: int | None = None) -> int:
    """A table written from ``rows`` as they are produced (:class:`ParquetRows`), clustered by topic into
    ``buckets`` row groups when given (:class:`BucketedParquetRows`); a bad row leaves no file behind and an
    earlier one as it was. Each item of ``rows`` is a row (a mapping) or a batch of rows (an Arrow table of the
    table's schema: a builder that reads its source a batch at a time). Returns the rows written."""
    writer = ParquetRows(path, table) if buckets is None else BucketedParquetRows(path, table, buckets)
    with writer:
        writer.extend(rows)
    return writer.count


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return list(iter_jsonl(path))


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a JSON-lines file, each parsed as it is read."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def read_run_info(run_dir: str | Path | RunDir) -> dict[str, Any]:
    path = RunDir(run_dir).run_info
    if not path.is_file():
        raise InputError(f"run directory {run_dir} has no snapshot ({path} is missing)")
    return json.loads(path.read_text(encoding="utf-8"))


def _existing_snapshot_file(run_dir: str | Path | RunDir, table: Table | str) -> tuple[Path, Path | None]:
    """The table's Parquet path, and the file it is read from: that one, or the JSON-lines file of a run
    snapshotted before the snapshot was Parquet (its approval, apply, report and the storage report's history still
    read it); None when the run has neither."""
    path = RunDir(run_dir).snapshot_table(table)
    legacy = path.with_suffix(".jsonl")
    return path, next((p for p in (path, legacy) if p.is_file()), None)


def snapshot_file(run_dir: str | Path | RunDir, table: Table | str) -> Path:
    """The file a snapshot table is read from (:func:`_existing_snapshot_file`). A table the run does not have is
    bad input naming the file."""
    path, existing = _existing_snapshot_file(run_dir, table)
    if existing is None:
        raise InputError(f"run directory {run_dir} has no snapshot table {path.stem!r} ({path} is missing)")
    return existing


def has_snapshot_table(run_dir: str | Path | RunDir, table: Table | str) -> bool:
    return _existing_snapshot_file(run_dir, table)[1] is not None


def is_json_lines(path: Path) -> bool:
    """A snapshot table written as JSON lines (a run snapshotted before the snapshot was Parquet)."""
    return path.suffix == ".jsonl"


def read_snapshot_table(run_dir: str | Path | RunDir, table: Table) -> list[dict[str, Any]]:
    """Every row of a (small) snapshot table, every column present."""
    import pyarrow.parquet as pq

    path = snapshot_file(run_dir, table)
    rows = read_jsonl(path) if is_json_lines(path) else pq.read_table(path).to_pylist()
    return [table.read_row(row, str(path)) for row in rows]


def count_snapshot_rows(run_dir: str | Path | RunDir, table: Table) -> int:
    """How many rows a snapshot table holds, counted without reading them (a report's "topics examined")."""
    import pyarrow.parquet as pq

    path = snapshot_file(run_dir, table)
    if is_json_lines(path):
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    return pq.ParquetFile(path).metadata.num_rows


def json_read_options() -> Any:
    """How Python reads a JSON-lines table into Arrow: on one thread, a MiB at a time. Arrow's default (threads,
    larger blocks) holds several blocks being parsed at once, so a large table's peak memory would grow with the
    threads; one block at a time is no slower."""
    import pyarrow.json as pj

    return pj.ReadOptions(use_threads=False, block_size=1 << 20)


def read_snapshot_columns(
    run_dir: str | Path | RunDir,
    table: Table,
    *,
    shared: Sequence[str] = (),
    row_groups: Sequence[int] | None = None,
) -> Any:
    """The columns ``table`` names (a :meth:`Table.select` of a snapshot table) of every row, as one Arrow table
    with their contract types: a report that needs a topic's retention text reads only that column of 100,000
    topics. ``shared``: text columns read dictionary-encoded from Parquet, each distinct text held once (the
    policies documents a million topics share). ``row_groups``: only those row groups of a Parquet table (a clustered
    table's buckets). A column missing, or of another type, means the file is not this table: bad input naming it."""
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    path = snapshot_file(run_dir, table)
    schema = table.arrow_schema()
    try:
        if not is_json_lines(path):
            for name in shared:
                field = schema.field(name)
                schema = schema.set(
                    schema.get_field_index(name), field.with_type(pa.dictionary(pa.int32(), field.type))
                )
            parquet = pq.ParquetFile(path, read_dictionary=list(shared) or None)
            if row_groups is None:
                read = parquet.read(columns=list(table.names))
            else:
                read = parquet.read_row_groups(row_groups, columns=list(table.names))
            return read.select(table.names).cast(schema)
        if path.stat().st_size == 0:
            return schema.empty_table()
        options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        return pj.read_json(path, read_options=json_read_options(), parse_options=options).select(table.names)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError) as exc:
        raise InputError(
            f"{path}: not snapshot table {table.name} (columns {', '.join(table.names)}): {exc}"
        ) from exc


def snapshot_has_column(run_dir: str | Path | RunDir, table: Table, column: str) -> bool:
    """Whether the snapshot's ``table`` has ``column`` (a Parquet table's schema, read from its footer): a run
    snapshotted by an earlier version may lack a column added since."""
    import pyarrow.parquet as pq

    path = snapshot_file(run_dir, table)
    if is_json_lines(path):
        return False
    return column in pq.read_schema(path).names


def snapshot_topic_values(
    run_dir: str | Path | RunDir, *columns: str, topics: Iterable[str] | None = None
) -> dict[str, Any]:
    """Per topic, the value of one column of the snapshot's topics table (a tuple of several), read columnar
    (:func:`read_snapshot_columns`); of ``topics`` only when given."""
    import pyarrow as pa
    import pyarrow.compute as pc

    read = read_snapshot_columns(run_dir, TOPICS.select("topic", *columns), shared=text_columns(columns))
    if topics is not None:
        wanted = pa.array(sorted(set(topics)), pa.string())
        read = read.filter(pc.is_in(read.column("topic"), value_set=wanted))
    return _values_by_topic(read, columns)


def text_columns(columns: Sequence[str]) -> list[str]:
    """Those of the topics table's ``columns`` that hold text: read dictionary-encoded (``shared``), as a million
    topics share a few policies documents and retention descriptions."""
    return [c for c in columns if TOPICS.select(c).columns[0].type == "string"]


def _values_by_topic(read: Any, columns: Sequence[str]) -> dict[str, Any]:
    """A read of the topics table's ``topic`` and ``columns`` as topic -> value (a tuple of several)."""
    names = read.column("topic").to_pylist()
    if len(columns) == 1:
        return dict(zip(names, _shared_values(read.column(columns[0])), strict=True))
    values = zip(*(_shared_values(read.column(c)) for c in columns), strict=True)
    return dict(zip(names, values, strict=True))


def _shared_values(column: Any) -> list[Any]:
    """A column's values as Python objects; of a dictionary-encoded one, one object per distinct text in each chunk:
    a million topics share a few policies documents (8 distinct: 3.1 GiB as a string each)."""
    import pyarrow as pa

    if not pa.types.is_dictionary(column.type):
        return column.to_pylist()
    values: list[Any] = []
    for chunk in column.chunks:
        distinct = chunk.dictionary.to_pylist()
        values.extend(None if index is None else distinct[index] for index in chunk.indices.to_pylist())
    return values


class BucketedSnapshot:
    """A snapshot table's columns (``table``, a :meth:`Table.select` with a topic column) a bucket at a time: of a
    clustered table, the row group of the asked topic's bucket is read when first needed and kept, made into what the
    caller keeps of it (``index``), until a topic of another bucket is asked (apply and approval go through the plan
    a bucket's part at a time), not the whole table of a million topics. The whole table is read once instead when
    it is not clustered (a run snapshotted before clustering, JSON lines), or when a bucket is asked for again after
    another (the lookups do not come a bucket at a time). ``shared``: text columns read dictionary-encoded."""

    def __init__(
        self,
        run_dir: str | Path | RunDir,
        info: Mapping[str, Any],
        table: Table,
        index: Callable[[Any], Any],
        *,
        shared: Sequence[str] = (),
    ) -> None:
        import pyarrow.parquet as pq

        self._run, self._table, self._index, self._shared = RunDir(run_dir), table, index, shared
        self._path = snapshot_file(self._run, table)
        self._buckets = int(info.get("snapshotBuckets") or 0)
        if self._buckets and not is_json_lines(self._path):
            if pq.ParquetFile(self._path).metadata.num_row_groups != self._buckets:
                self._buckets = 0  # rewritten by another writer: not clustered as run.json says
        else:
            self._buckets = 0
        self._bucket: int | None = None  # the bucket held
        self._read: set[int] = set()
        self._whole = False  # every topic held
        self._held: Any = None

    def of(self, topic: str) -> Any:
        """What ``index`` made of the rows of ``topic``'s bucket (of every row, once the whole table is held)."""
        if self._whole:
            return self._held
        bucket = topic_bucket(topic, self._buckets) if self._buckets else None
        if bucket is not None and bucket == self._bucket:
            return self._held
        if bucket is None or bucket in self._read:
            read = read_snapshot_columns(self._run, self._table, shared=self._shared)
            self._held, self._whole = self._index(read), True
            return self._held
        read = read_snapshot_columns(self._run, self._table, shared=self._shared, row_groups=[bucket])
        self._check_clustered(read.column("topic"), bucket)
        self._held, self._bucket = self._index(read), bucket
        self._read.add(bucket)
        return self._held

    def _check_clustered(self, topic: Any, bucket: int) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        plain = topic.cast(pa.string()) if pa.types.is_dictionary(topic.type) else topic
        names = pc.unique(plain).to_pylist()
        misplaced = next(
            (n for n in names if n is not None and topic_bucket(n, self._buckets) != bucket), None
        )
        if misplaced is not None:
            raise InputError(
                f"{self._path}: row group {bucket} holds topic {misplaced} of another bucket: the table is not "
                "clustered by topic as its run.json says"
            )


class SnapshotTopicLookup:
    """Per topic, the value of some columns of the snapshot's topics table (a tuple of several), as
    :func:`snapshot_topic_values` gives them, read a bucket at a time (:class:`BucketedSnapshot`): a bucket's topics
    as a dict, not a dict of a million topics."""

    def __init__(self, run_dir: str | Path | RunDir, info: Mapping[str, Any], *columns: str) -> None:
        self._snapshot = BucketedSnapshot(
            run_dir,
            info,
            TOPICS.select("topic", *columns),
            lambda read: _values_by_topic(read, columns),
            shared=text_columns(columns),
        )

    def __getitem__(self, topic: str) -> Any:
        return self._snapshot.of(topic)[topic]

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and topic in self._snapshot.of(topic)

    def get(self, topic: str, default: Any = None) -> Any:
        return self._snapshot.of(topic).get(topic, default)
