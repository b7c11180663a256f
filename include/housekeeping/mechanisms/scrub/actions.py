"""``delete_orphan``: the store scrub's repair. An item of the storage that no metadata row, no pending deletion and
no in-flight run names, older than the minimum age, goes to the pending-deletion log (kind ``orphan``) with the
grace period; purge removes it later, after checking again that nothing names it (BookKeeper's
``verifyMetadataOnGC``). Never deleted in the run that found it; ``housekeeping restore`` keeps it where it is.
Applied by the mechanism's own apply (``housekeeping.mechanisms.scrub.apply``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from housekeeping.engine.actions import ActionKind, Changes, Frees


class DeleteOrphan(ActionKind):
    def freed_bytes(self, row: Mapping[str, Any]) -> int:
        return int(row.get("bytes") or 0)


# A hold on the topic its directory names keeps it (a hold forbids every deletion).
DELETE_ORPHAN = DeleteOrphan(
    "delete_orphan",
    "an item no metadata row names, older than the minimum age, queued for purge after the grace period",
    Changes.FILES,
    Frees.DATA,
)
