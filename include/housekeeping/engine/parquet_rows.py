"""The Parquet writers of the contract's tables (``housekeeping.engine.contract``): rows checked against their
:class:`~housekeeping.engine.contract.Table` as they come, written a batch at a time (:class:`ParquetRows`), or
clustered by topic, row group ``b`` holding the topics of bucket ``b`` (:class:`BucketedParquetRows`), one bucket
spilled to disk while the others fill."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from housekeeping.engine.contract import Table, topic_bucket, topic_buckets
from housekeeping.engine.run_dir import side_file
from housekeeping.store.fs import remove_file

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
        self.partial = side_file(self.path)
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
                side_file(self.path.with_name(f"{self.path.name}.bucket-{b}")),
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

        partial = side_file(self.path)
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
