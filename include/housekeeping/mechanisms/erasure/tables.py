"""Key erasure's plan tables. Columns are defined here once; the planner writes them and the gate, apply and the
report read them (``housekeeping.engine.contract.Table``)."""

from __future__ import annotations

from housekeeping.engine.contract import table

# Key erasure: per request and topic what was found and decided; per rewritten ledger its staged files and counts;
# per redacted entry (positions only: no key, no payload) which request it answers. ``ledgerId`` is the ledger
# whose files are rewritten, ``entryLedgerId:entryId`` the entry's position (a compacted ledger holds entries of
# many raw ledgers at their original positions).
ERASURE_DECISIONS = table(
    "decisions",
    "requestId bigint!, keyDigest string!, scope string!, target string!, topic string, namespace string, "
    "decision string!, kind string!, reason string, ledgers bigint, entries bigint, bytes bigint, "
    "pendingFiles bigint",
)
ERASURE_LEDGERS = table(
    "erasure/ledgers",
    "topic string!, ledgerId bigint!, source string!, fromGeneration bigint!, toGeneration bigint!, "
    "entries bigint!, sizeBefore bigint!, sizeAfter bigint!, entriesRedacted bigint!, bytesRedacted bigint!, "
    "tombstonesRedacted bigint!, requestIds array<bigint>!, staged string!, stagedSha256 string",
)
ERASURE_ENTRIES = table(
    "erasure/entries",
    "topic string, ledgerId bigint, source string, entryLedgerId bigint, entryId bigint, requestId bigint, size int",
    "parquet",
)
