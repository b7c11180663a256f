"""The store scrub's tables, defined once (``housekeeping.engine.contract.Table``): the two it adds to the snapshot
(what the metadata says should be stored, what the storage holds; Parquet, written by ``listing`` as the storage is
walked, with ``parquet_rows.ParquetRows``) and its plan table (the findings). Python writes the snapshot ones, the Spark apps
read them with these schemas; the planner writes the findings, the gate, apply and the report read them."""

from __future__ import annotations

from housekeeping.engine.contract import table

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

# The plan: one row per finding. ``kind``: orphan, not_freed, missing, mismatch, unreadable, unrecognised,
# purge_overdue; ``severity``: error (a person must look: exit 1, an alert) or notice; ``repair``: the action that
# repairs it (delete_orphan) or none.
FINDINGS = table(
    "findings",
    "kind string!, severity string!, location string!, path string!, topic string, ledgerId bigint, bytes bigint, "
    "ageMs bigint, repair string!, reason string!",
)
ERROR_KINDS = ("orphan", "not_freed", "missing", "mismatch", "unreadable", "unrecognised")
