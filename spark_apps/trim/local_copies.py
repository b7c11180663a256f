"""Trim's offload-deletion lag (docs/semantics.md §9: ``isOffloadedNeedsDelete``): every
ledger of the list, wherever the cursors are, whose offload completed and whose local copy is still there, loses its
local copy once ``asOf - offloadedAt > lag`` (strict). The lag is the topic's resolved
``managedLedgerOffloadDeletionLagInMillis``: -1 never (PIP-350), unset everywhere never. Only where an offloader
applies (a tier is configured, not a system-service namespace), never for a ledger retention deletes in the same
plan (it leaves both tiers) and never on a held topic. An offload whose completion time is not known (a manifest
without ``offloadContext.timestamp``) keeps its local copy. Pure transforms."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from housekeeping.mechanisms.trim.actions import DELETE_LOCAL_COPY
from spark_apps.shared.io import action_rows


def local_copy_due(topics: DataFrame, ledgers: DataFrame, as_of_ms: int) -> DataFrame:
    """Offloaded ledgers whose local copy the lag lets go, with why."""
    policy = topics.select("topic", "offloader", "offloadDeletionLagMs", "heldBy")
    age = F.lit(as_of_ms) - F.col("offloadedAtMs")
    return (
        ledgers.where(F.col("offloadComplete") & ~F.col("localDeleted") & F.col("offloadedAtMs").isNotNull())
        .join(policy, "topic")
        .where(
            F.col("offloader")
            & F.col("heldBy").isNull()
            & (F.col("offloadDeletionLagMs") >= 0)
            & (age > F.col("offloadDeletionLagMs"))
        )
        .withColumn(
            "reason",
            F.format_string(
                "offloaded %d ms ago > offload deletion lag %d ms: the local copy goes, the tier's stays",
                age,
                F.col("offloadDeletionLagMs"),
            ),
        )
    )


def local_copy_deletions(
    topics: DataFrame, ledgers: DataFrame, decisions: DataFrame, as_of_ms: int
) -> DataFrame:
    """The contract's ``delete_local_copy`` actions: the due local copies of ledgers retention keeps."""
    retained = decisions.where(F.col("decision") == "delete").select("topic", "ledgerId")
    due = local_copy_due(topics, ledgers, as_of_ms).join(retained, ["topic", "ledgerId"], "left_anti")
    return action_rows(
        due,
        DELETE_LOCAL_COPY.name,
        topic=F.col("topic"),
        ledgerId=F.col("ledgerId"),
        bytes=F.col("size"),
        reason=F.col("reason"),
        offloadedAtMs=F.col("offloadedAtMs"),
    )
