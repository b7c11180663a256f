"""Compaction's plan tables: one decision per topic, the entries of each new compacted ledger and
the keys that leave the compacted view. Columns are defined here once; the planner writes them and the gate, apply and the
report read them (``housekeeping.engine.contract.Table``)."""

from __future__ import annotations

from housekeeping.engine.contract import table

COMPACTION_DECISIONS = table(
    "decisions",
    "topic string, namespace string, decision string!, kind string!, reason string, warning string, "
    "bytes bigint!, ledgers bigint!, backlogBytes bigint!, compactionThresholdBytes bigint, "
    "prevCompactedLedgerId bigint, prevCompactedBytes bigint, readFromLedger bigint, readFromEntry bigint, horizonLedger bigint, "
    "horizonEntry bigint, cursorLedger bigint, cursorEntry bigint, rawLedgerIds array<bigint>!, "
    "compactedRetentionTimeMs bigint, compactedRetentionSizeBytes bigint, compactedRetentionDescription string, "
    "tombstoneGraceMs bigint, retentionTimeMs bigint",
)
# The entries of each new compacted ledger (without payloads) and the keys that leave the compacted view. Keys are
# named by their SHA-256 (``keyDigest``, null: keyless): no run artefact holds a message key, so key erasure has
# only the ledgers to rewrite.
COMPACTION_KEPT = table(
    "compaction/kept",
    "topic string, ledgerId bigint, entryId bigint, keyDigest string, entryTs bigint, size int, source string",
    "parquet",
)
COMPACTION_DROPPED_KEYS = table(
    "compaction/dropped_keys",
    "topic string, keyDigest string, ledgerId bigint, entryId bigint, entryTs bigint, size int, reason string",
    "parquet",
)
