"""``rewrite_compacted``: compaction's action. A topic's compacted ledger is replaced by a new one holding the
latest entry per key up to the horizon (minus what the compacted-ledger retention drops), and the ``__compaction``
cursor moves to the horizon. Applied by compaction's own Spark apply (``spark_apps/compaction/apply.py``), never by
the shared one. It frees the bytes by which the new compacted ledger is smaller than the one it replaces
(``bytesReplaced``; the raw ledgers it read are freed by trim once the cursor has moved past them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from housekeeping.engine.actions import ActionKind, Changes, Effect, Frees, PlanView, namespace_of


class RewriteCompacted(ActionKind):
    def freed_bytes(self, row: Mapping[str, Any]) -> int:
        return max(0, int(row.get("bytesReplaced") or 0) - int(row.get("bytes") or 0))

    def effect(self, row: Mapping[str, Any], view: PlanView) -> Effect:
        """One topic; the entries that leave its compacted view (read, not kept); the bytes it frees."""
        read = int(row.get("entriesRead") or 0)
        freed = self.freed_bytes(row)
        return Effect(
            namespace_of(row["topic"]),
            (self.name, row["topic"]),
            topics=1,
            entries=max(0, read - int(row.get("entriesKept") or 0)),
            bytes=freed,
            freed=freed,
        )


REWRITE_COMPACTED = RewriteCompacted(
    "rewrite_compacted",
    "a topic's compacted ledger replaced by a new one up to the horizon; the __compaction cursor moved there",
    Changes.FILES,
    Frees.REPLACED,
)
