"""Key erasure's action kinds: ``redact_ledger`` and ``redact_compacted`` (a raw or compacted ledger's files
rewritten with the requested keys' entries redacted, every position kept; the payloads are the bytes freed) and
``expedite_purge`` (files already waiting for purge that hold a requested key: purged after the erasure grace,
never restored). Applied by key erasure's own apply (``housekeeping.mechanisms.erasure.apply``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from housekeeping.engine.actions import ActionKind, Changes, Effect, Frees, PlanView, namespace_of


class Redact(ActionKind):
    def effect(self, row: Mapping[str, Any], view: PlanView) -> Effect:
        freed = self.freed_bytes(row)
        return Effect(
            namespace_of(row["topic"]),
            (self.name, row["topic"], row.get("ledgerId")),
            entries=int(row.get("entriesRedacted") or 0),
            bytes=freed,
            freed=freed,
        )


REDACT_LEDGER = Redact(
    "redact_ledger",
    "a ledger's files rewritten as a new generation with the requested keys' entries redacted",
    Changes.FILES,
    Frees.PAYLOAD,
)
REDACT_COMPACTED = Redact(
    "redact_compacted",
    "a compacted ledger's files rewritten as a new generation with the requested keys' entries redacted",
    Changes.FILES,
    Frees.PAYLOAD,
)
EXPEDITE_PURGE = ActionKind(
    "expedite_purge",
    "files waiting for purge that hold a requested key: purged after the erasure grace, never restored",
    Changes.FILES,
)
# The rewrite kinds, by the ledger table they rewrite (raw: ledgers, compacted: compacted_ledgers).
REDACTIONS = {REDACT_LEDGER.name: "raw", REDACT_COMPACTED.name: "compacted"}
