"""The store scrub's tables, defined once (``housekeeping.engine.contract.Table``): the two it adds to the snapshot
(what the metadata says should be stored, what the storage holds; Parquet, written by ``listing`` as the storage is
walked) and its plan table (the findings). Python writes the snapshot ones, the Spark apps read them with these
schemas; the planner writes the findings, the gate, apply and the report read them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from housekeeping.engine.contract import RunDir, Table, table

LOCAL = "local"
TIER = "tier"

# One row per file location the metadata names, from one read of it. ``source``: ledger (a ledgers row's local
# directory or its offload attempt's object), compacted (a compacted ledger, current or staged), pending (a pending
# deletion's directory or object), purged (a purged deletion's: must be gone), restored_orphan (an orphan a person
# restored: kept), claim (the tier's marker object). ``mustExist``: data the store serves (a stored ledger's local
# copy unless deleted, a completed offload's object, a current compacted ledger's directory). ``stable``: the same
# row, with the same files, in a second read after the listing (false: it changed while the storage was walked,
# so its absence proves nothing). ``checkIds``: its entry ids must be 0..entries-1 (a raw ledger's; a compacted
# ledger keeps the positions it compacted).
SCRUB_EXPECTED = table(
    "scrub_expected",
    "location string!, path string!, source string!, topic string, ledgerId bigint, entries bigint, size bigint, "
    "isOpen boolean!, mustExist boolean!, stable boolean!, checkIds boolean!, pendingId bigint, purgeAfterMs bigint, "
    "runId string, held boolean!",
    format="parquet",
)
# One row per item the storage holds under the ledger tree and the tier's prefix. ``kind``: ledger_dir, staging_dir
# (a writer's, beside a ledger directory), tier_object, other (anything the layout does not name). ``mtimeMs``: the
# newest modification time of the item and, for a directory, its files (physical time). ``topic``: the topic its
# directory encodes (null when it encodes none).
STORAGE_ITEMS = table(
    "storage_items",
    "location string!, path string!, kind string!, topic string, ledgerId bigint, bytes bigint!, files bigint!, "
    "mtimeMs bigint!",
    format="parquet",
)
SNAPSHOT_PARQUET_TABLES = (SCRUB_EXPECTED, STORAGE_ITEMS)

# The plan: one row per finding. ``kind``: orphan, not_freed, missing, mismatch, unreadable, unrecognised,
# purge_overdue; ``severity``: error (a person must look: exit 1, an alert) or notice; ``repair``: the action that
# repairs it (delete_orphan) or none.
FINDINGS = table(
    "findings",
    "kind string!, severity string!, location string!, path string!, topic string, ledgerId bigint, bytes bigint, "
    "ageMs bigint, repair string!, reason string!",
)
ERROR_KINDS = ("orphan", "not_freed", "missing", "mismatch", "unreadable", "unrecognised")


def snapshot_path(run_dir: str | Path, spec: Table) -> Path:
    return RunDir(run_dir).snapshot_dir / f"{spec.name}.parquet"


class ParquetRows:
    """A snapshot table written as Parquet while its rows are produced (batches of ``batch`` rows: memory does not
    grow with the table), every row checked against the table (:meth:`Table.row`)."""

    def __init__(
        self, run_dir: str | Path, spec: Table, batch: int = 50_000, name: str | None = None
    ) -> None:
        """``name``: a file name other than the table's (a working copy, :meth:`read_back` and :meth:`remove`)."""
        import pyarrow.parquet as pq

        self.spec, self.batch, self.rows = spec, batch, []
        self.path = snapshot_path(run_dir, spec)
        if name is not None:
            self.path = self.path.with_name(f"{name}.parquet")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.partial = self.path.with_name(f".{self.path.name}.partial")
        self.writer = pq.ParquetWriter(self.partial, spec.arrow_schema())
        self.count = 0

    def add(self, row: Mapping[str, Any]) -> None:
        self.rows.append(self.spec.row(row))
        if len(self.rows) >= self.batch:
            self._flush()

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.add(row)

    def _flush(self) -> None:
        import pyarrow as pa

        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.writer.schema))
            self.count += len(self.rows)
            self.rows = []

    def close(self) -> None:
        self._flush()
        self.writer.close()
        self.partial.replace(self.path)

    def read_back(self) -> Iterator[dict[str, Any]]:
        """The rows written, a batch at a time."""
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(self.path).iter_batches(batch_size=self.batch):
            yield from batch.to_pylist()

    def remove(self) -> None:
        from housekeeping.store.fs import remove_file

        remove_file(self.path, within=self.path.parent)


def read_snapshot_rows(run_dir: str | Path, spec: Table) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(snapshot_path(run_dir, spec)).to_pylist()
