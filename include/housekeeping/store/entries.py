"""Entry storage: the Parquet schema of a ledger's entries and atomic ledger writes.

Schema (one row per entry; all timestamps are epoch milliseconds, as Pulsar's):

==================  =====================  =====================================================
column              type                   meaning
==================  =====================  =====================================================
topic               string, not null       persistent://tenant/namespace/topic
ledgerId            int64, not null        ledger holding the entry
entryId             int64, not null        0..entries-1 within the ledger
publishTime         int64, not null        producer publish time (client clock)
brokerTimestamp     int64, nullable        broker entry-metadata timestamp when the broker adds one
key                 string, nullable       message key (null: keyless)
value               binary, nullable       payload; null means a tombstone
size                int32, not null        payload size in bytes (0 for a tombstone)
properties          map<string,string>     message properties
==================  =====================  =====================================================
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from housekeeping.store.fs import remove_file, remove_tree

ENTRY_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("ledgerId", pa.int64(), nullable=False),
        pa.field("entryId", pa.int64(), nullable=False),
        pa.field("publishTime", pa.int64(), nullable=False),
        pa.field("brokerTimestamp", pa.int64(), nullable=True),
        pa.field("key", pa.string(), nullable=True),
        pa.field("value", pa.binary(), nullable=True),
        pa.field("size", pa.int32(), nullable=False),
        pa.field("properties", pa.map_(pa.string(), pa.string()), nullable=True),
    ]
)

PART_FILE = "part-00000.parquet"
# Key erasure's redaction marker: a redacted entry keeps its position and times, loses its key and payload (size 0)
# and carries this one property, whose value names the erasure requests it answers ("3" or "3,7").
ERASED_PROPERTY = "housekeeping.erased"


def write_ledger(ledger_dir: Path, table: pa.Table) -> None:
    """Write a ledger's entries as a whole, so a reader (a consumer, a plan, the store scrub) sees the old entries or
    the new ones, never a half-written ledger or none:

    - a new ledger: into a sibling staging directory, then one rename of the directory;
    - a ledger holding exactly ``PART_FILE`` (the open ledger a writer appends to): the new file is written under a
      hidden name inside the directory, then renamed onto ``PART_FILE``. Replacing the directory instead would leave
      a moment with no ledger directory while the metadata still names it, which the store scrub would rightly call
      data loss;
    - anything else (other files in the directory): the directory is replaced whole, as for a new ledger.
    """
    table = table.cast(ENTRY_SCHEMA)
    if _single_part(ledger_dir):
        # A name pyarrow's dataset discovery and ``*.parquet`` globs skip (leading dot, no .parquet suffix).
        pending = ledger_dir / f".{PART_FILE}.tmp-{uuid.uuid4().hex}"
        try:
            pq.write_table(table, pending, compression="zstd")
            os.replace(pending, ledger_dir / PART_FILE)
        finally:
            remove_file(pending, within=ledger_dir)  # gone already when the rename happened
        return
    ledger_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = ledger_dir.parent / f".tmp-{ledger_dir.name}-{uuid.uuid4().hex}"
    # parents=True again: purge removes emptied topic directories, possibly between the two calls.
    staging.mkdir(parents=True)
    try:
        pq.write_table(table, staging / PART_FILE, compression="zstd")
        remove_tree(ledger_dir, within=ledger_dir.parent)
        os.replace(staging, ledger_dir)
    finally:
        with contextlib.suppress(OSError):
            remove_tree(staging, within=ledger_dir.parent)


def _single_part(ledger_dir: Path) -> bool:
    try:
        with os.scandir(ledger_dir) as entries:
            names = [e.name for e in entries if not e.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return False
    return names == [PART_FILE]


def files_sha256(ledger_dir: Path) -> str:
    """SHA-256 over a ledger directory's Parquet files in name order (key erasure binds the redacted ledger the
    gate passed to the bytes apply installs)."""
    digest = hashlib.sha256()
    for path in sorted(ledger_dir.glob("*.parquet")):
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def read_ledger(ledger_dir: Path) -> pa.Table:
    return pq.read_table(ledger_dir, schema=ENTRY_SCHEMA)


def check_ledger_files(topic: str, ledger_id: int, ledger_dir: Path) -> list[Path]:
    """The ledger's Parquet files, each checked to be readable Parquet with the entry schema's columns and
    types (the footer only: no entry is read). Bad input otherwise, naming the topic, ledger and file, so a
    damaged file stops a run before anything is planned instead of failing deep inside a Spark job."""
    from housekeeping.core.errors import InputError

    files = sorted(ledger_dir.glob("*.parquet")) if ledger_dir.is_dir() else []
    if not files:
        raise InputError(
            f"topic {topic} ledger {ledger_id}: entries are recorded as stored but {ledger_dir} has no Parquet file"
        )
    for path in files:
        try:
            schema = pq.read_schema(path)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(
                f"topic {topic} ledger {ledger_id}: {path} is not a readable Parquet file "
                f"(corrupt or truncated): {exc}"
            ) from exc
        wrong = [
            f"{field.name} ({'missing' if field.name not in schema.names else schema.field(field.name).type})"
            for field in ENTRY_SCHEMA
            if field.name not in schema.names or not schema.field(field.name).type.equals(field.type)
        ]
        if wrong:
            raise InputError(
                f"topic {topic} ledger {ledger_id}: {path} does not have the entry schema; wrong columns: "
                + ", ".join(wrong)
            )
    return files
