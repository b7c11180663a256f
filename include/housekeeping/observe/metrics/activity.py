"""What housekeeping did, from the journal and the pending-deletion log (written by apply in the same transaction
as the change): deletions, purges, restores, topics deleted, cursors moved, backlog evictions, the bytes its applied
actions free (counted by their kinds), and the newest finished run of each mechanism. Counters never go down (a
restore is its own counter) and survive restarts of the metrics server."""

from __future__ import annotations

import json
from typing import Any

from housekeeping.engine.actions import Changes
from housekeeping.mechanisms.registry import MECHANISMS, action_kinds
from housekeeping.observe.metrics.families import Families, Family, StoreView, namespace_of, seconds

MECHANISM_NAMESPACE = ("mechanism", "namespace")


def _run_mechanism(view: StoreView) -> dict[str, str]:
    return {row.run_id: row.mechanism for row in view.journal if row.mechanism in MECHANISMS}


def deletions(view: StoreView) -> list[Family]:
    """Ledgers deleted from the metadata, purged, restored and waiting for purge (the pending-deletion log)."""
    made = Families()
    deleted_bytes = made.family(
        "housekeeping_deleted_bytes",
        "Bytes of ledgers (and compacted ledgers) deleted from the metadata, restorable until purged.",
        MECHANISM_NAMESPACE,
        counter=True,
    )
    deleted_ledgers = made.family(
        "housekeeping_deleted_ledgers",
        "Ledgers deleted from the metadata.",
        MECHANISM_NAMESPACE,
        counter=True,
    )
    purged_bytes = made.family(
        "housekeeping_purged_bytes",
        "Bytes whose files purge removed (reclaimed).",
        MECHANISM_NAMESPACE,
        counter=True,
    )
    purged_ledgers = made.family(
        "housekeeping_purged_ledgers", "Ledgers whose files purge removed.", MECHANISM_NAMESPACE, counter=True
    )
    restored_bytes = made.family(
        "housekeeping_restored_bytes",
        "Bytes of deleted ledgers put back by restore.",
        MECHANISM_NAMESPACE,
        counter=True,
    )
    pending_bytes = made.family(
        "housekeeping_pending_purge_bytes",
        "Bytes deleted from the metadata whose files are still stored, waiting for purge.",
        ("namespace",),
    )
    pending_ledgers = made.family(
        "housekeeping_pending_purge_ledgers", "Deleted ledgers whose files wait for purge.", ("namespace",)
    )
    pending_age = made.family(
        "housekeeping_oldest_pending_deletion_age_seconds",
        "Age of the oldest deletion still waiting for purge (0: none).",
        ("namespace",),
    )
    for namespace in view.namespaces:
        for family in (pending_bytes, pending_ledgers, pending_age):
            family.set((namespace,), 0)
    run_mechanism = _run_mechanism(view)
    for row in view.pending:
        namespace = namespace_of(row.topic)
        labels = (run_mechanism.get(row.run_id, "other"), namespace)
        deleted_bytes.add(labels, row.size_bytes)
        deleted_ledgers.add(labels, 1)
        if row.status == "purged":
            purged_bytes.add(labels, row.size_bytes)
            purged_ledgers.add(labels, 1)
        elif row.status == "restored":
            restored_bytes.add(labels, row.size_bytes)
        elif row.status == "pending":
            pending_bytes.add((namespace,), row.size_bytes)
            pending_ledgers.add((namespace,), 1)
            age = seconds(max(0, view.as_of_ms - row.deleted_as_of_ms))
            pending_age.set((namespace,), max(pending_age.samples[(namespace,)], age))
    topics_deleted = made.family(
        "housekeeping_topics_deleted",
        "Topics deleted (inactive-topic GC).",
        MECHANISM_NAMESPACE,
        counter=True,
    )
    for row in view.deleted_topics:
        if row.kind == "topic":
            topics_deleted.add((run_mechanism.get(row.run_id, "other"), namespace_of(row.topic)), 1)
    return made


def applied(view: StoreView) -> list[Family]:
    """What applied actions did, from the journal's applied rows and the plan rows they came from: cursors moved,
    backlog evictions, the bytes the actions free by their kinds (``ActionKind.freed_bytes``, as the run's planned
    bytes and the approval count them), and the newest finished run per mechanism."""
    made = Families()
    cursors_moved = made.family(
        "housekeeping_cursors_moved", "Subscription cursors moved forward.", MECHANISM_NAMESPACE, counter=True
    )
    evictions = made.family(
        "pulsar_storage_backlog_quota_exceeded_evictions",
        "Backlog evictions applied (consumer_backlog_eviction), one per topic and quota type per run.",
        ("namespace", "quota_type"),
        counter=True,
    )
    freed = made.family(
        "housekeeping_freed_bytes",
        "Bytes the applied actions free, each counted by its kind: data deleted, payloads redacted, compacted "
        "ledgers shrunk (frees), local copies of offloaded data.",
        ("mechanism", "namespace", "frees"),
        counter=True,
    )
    last_success = made.family(
        "housekeeping_last_success_timestamp_seconds",
        "Logical time (as-of) of the newest run whose apply finished.",
        ("mechanism",),
    )
    kinds = action_kinds()
    for row in view.journal:
        if row.mechanism not in MECHANISMS:
            continue
        if row.status == "finished":
            newest = max(last_success.samples.get((row.mechanism,), 0.0), seconds(row.as_of_ms))
            last_success.set((row.mechanism,), newest)
        if row.status != "applied" or row.topic is None:
            continue
        detail = json.loads(row.detail)
        plan_rows: list[dict[str, Any]] = detail.get("planRows", [])
        namespace = namespace_of(row.topic)
        moved = int(detail.get("cursorsMoved") or 0)
        if moved:
            cursors_moved.add((row.mechanism, namespace), moved)
            # A cursor move made for a backlog quota (an eviction) names its quota type in the plan row.
            for quota_type in sorted(
                {r["quotaType"] for r in plan_rows if r.get("quotaType") and _moves(kinds, r)}
            ):
                evictions.add((namespace, quota_type), 1)
        for plan_row in plan_rows:
            kind = kinds.get(plan_row.get("action", ""))
            if kind is not None and kind.freed_bytes(plan_row):
                freed.add((row.mechanism, namespace, kind.frees.value), kind.freed_bytes(plan_row))
    return made


def _moves(kinds: dict[str, Any], plan_row: dict[str, Any]) -> bool:
    kind = kinds.get(plan_row.get("action", ""))
    return kind is not None and kind.changes is Changes.CURSORS
