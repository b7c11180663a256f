"""Reading a run's snapshot tables back in Python (the library's side; the Spark apps read them in
``spark_apps.shared.io``): whole, a column at a time, a bucket at a time (:class:`BucketedSnapshot`), or the
per-topic values a report looks up (:class:`SnapshotTopicLookup`), dictionary-encoded so each distinct text is one
Python string."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from housekeeping.core.errors import InputError
from housekeeping.engine.contract import TOPICS, Table, topic_bucket
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir, read_jsonl


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
        info: RunInfo,
        table: Table,
        index: Callable[[Any], Any],
        *,
        shared: Sequence[str] = (),
    ) -> None:
        import pyarrow.parquet as pq

        self._run, self._table, self._index, self._shared = RunDir(run_dir), table, index, shared
        self._path = snapshot_file(self._run, table)
        self._buckets = int(info.snapshot_buckets or 0)
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

    def __init__(self, run_dir: str | Path | RunDir, info: RunInfo, *columns: str) -> None:
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
