"""Purge: delete the files of pending deletions whose grace period (logical time) has passed.

Each ledger goes through ``Store.remove_ledger_dir``; the file first, then the record is marked purged, so a crash
in between is completed by the next purge (deleting a missing directory is a no-op). A ledger back in a topic's
list (restored) or a compacted ledger in use again is refused; a hold covering the topic keeps it pending. A topic
deleted by inactive-topic GC becomes ``purged`` (no restore) once its ledgers' files are gone; emptied topic
directories go too. A file or object that cannot be deleted (the tier down or refusing) stays pending and is
retried by the next purge; the purge goes on with the others, then fails loudly (``PurgeFailed``, exit 1, a failed
DAG task) instead of reporting success (Pulsar's silent offloaded-ledger delete failures, apache/pulsar#14693).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select, union_all, update

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.faults import checkpoint
from housekeeping.engine.live import PoliciesNow
from housekeeping.store import metadata_schema as t
from housekeeping.store.compacted_ledgers import COMPACTED_KIND
from housekeeping.store.holds import current_hold
from housekeeping.store.journal import journal
from housekeeping.store.store import (
    LOCAL_COPY_KIND,
    ORPHAN_KIND,
    TIER_OBJECT_KIND,
    Store,
    orphan_named,
    read_transaction,
    write_transaction,
)
from housekeeping.store.tier import TierError, parse_object_key


class PurgeFailed(TierError):
    """Some due pending deletions could not be deleted: they stay pending (the others were purged)."""


@dataclass
class PurgeResult:
    purged: list[tuple[str, int]] = field(default_factory=list)
    bytes_purged: int = 0
    waiting: int = 0
    next_purge_after_ms: int | None = None
    refused: list[str] = field(default_factory=list)
    topics_purged: list[str] = field(default_factory=list)
    # Due, but a hold covers the topic: kept pending (restorable) until the hold is removed.
    held: list[str] = field(default_factory=list)
    # Due, but a file or object could not be deleted (the tier down or refusing): kept pending, retried next time.
    failed: dict[str, str] = field(default_factory=dict)
    # Due, but the retention in force now keeps the ledger (raised since it was deleted): kept pending (restorable)
    # until that retention lets it go.
    retained: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "held": self.held,
            "purged": [f"{t}:{ledger}" for t, ledger in self.purged],
            "topicsPurged": self.topics_purged,
            "bytesPurged": self.bytes_purged,
            "waiting": self.waiting,
            "nextPurgeAfterMs": self.next_purge_after_ms,
            "refused": self.refused,
            "failed": self.failed,
            "retained": self.retained,
        }

    def raise_on_failures(self) -> None:
        """After the result is recorded: fail when a due deletion could not be done (it stays pending)."""
        if self.failed:
            first = next(iter(self.failed.items()))
            raise PurgeFailed(
                f"{len(self.failed)} pending deletion(s) could not be purged; they stay pending and the next purge "
                f"retries them; first: {first[0]}: {first[1]}"
            )


def due_for_purge(store: Store, as_of_ms: int) -> dict[str, Any]:
    """What a purge at ``as_of_ms`` would remove, before it removes anything: every pending deletion whose grace
    period has passed (``due``: topic, ledger id, kind, bytes, due time), less those a hold keeps (``held``). A
    restored ledger or one in use again is refused by the purge itself, not listed here."""
    due: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    with read_transaction(store.engine) as conn:
        rows = conn.execute(
            select(t.pending_deletions)
            .where(
                and_(
                    t.pending_deletions.c.status == "pending",
                    t.pending_deletions.c.purge_after_ms <= as_of_ms,
                )
            )
            .order_by(t.pending_deletions.c.topic, t.pending_deletions.c.ledger_id, t.pending_deletions.c.id)
        ).all()
        for row in rows:
            item = {
                "topic": row.topic,
                "ledgerId": row.ledger_id,
                "kind": row.kind,
                "bytes": row.size_bytes,
                "dueAt": format_ms(row.purge_after_ms),
            }
            (held if current_hold(conn, row.topic) is not None else due).append(item)
    return {
        "asOf": format_ms(as_of_ms),
        "due": due,
        "held": held,
        "files": len(due),
        "bytes": sum(item["bytes"] for item in due),
        "topics": len({item["topic"] for item in due}),
    }


def record_purge_due(
    store: Store, document: dict[str, Any], *, run_id: str, as_of_ms: int, actor: str | None
) -> None:
    """Journal, topic by topic, what the purge of run ``run_id`` is about to remove (before it removes it)."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for item in document["due"]:
        by_topic.setdefault(item["topic"], []).append(item)
    if not by_topic:
        return
    with write_transaction(store.engine) as conn:
        for topic, items in by_topic.items():
            journal(
                conn,
                run_id=run_id,
                mechanism="purge",
                topic=topic,
                action="purge_due",
                status="due",
                detail={
                    "ledgers": [
                        {k: item[k] for k in ("ledgerId", "kind", "bytes", "dueAt")} for item in items
                    ],
                    "bytes": sum(item["bytes"] for item in items),
                },
                as_of_ms=as_of_ms,
                actor=actor,
            )


# Due pending deletions read per page of ids: a purge after a large trim has a pending row per deleted ledger, each
# with its ledger row's JSON, which are not held at once (their ids are, 8 bytes each).
PURGE_PAGE_ROWS = 1000


def purge(store: Store, *, as_of_ms: int, run_id: str, actor: str | None = None) -> PurgeResult:
    """Every deletion pending when the purge starts whose grace period has passed at ``as_of_ms``, in the order
    they were recorded; those still in their grace period counted (``waiting``, ``next_purge_after_ms``)."""
    result = PurgeResult()
    pending = t.pending_deletions
    with read_transaction(store.engine) as conn:
        due = array(
            "q",
            conn.execute(
                select(pending.c.id)
                .where(and_(pending.c.status == "pending", pending.c.purge_after_ms <= as_of_ms))
                .order_by(pending.c.id)
            ).scalars(),
        )
        waiting, next_after = conn.execute(
            select(func.count(), func.min(pending.c.purge_after_ms)).where(
                and_(pending.c.status == "pending", pending.c.purge_after_ms > as_of_ms)
            )
        ).one()
    result.waiting, result.next_purge_after_ms = int(waiting), next_after
    policies = PoliciesNow(store.broker_config())
    for row in _rows_of(store, due):
        with read_transaction(store.engine) as conn:
            refusal = _live(conn, row)
            if refusal is None and current_hold(conn, row.topic) is not None:
                result.held.append(f"{row.topic}:{row.ledger_id}")
                continue
            kept = None if refusal is not None else _retained(conn, row, policies, as_of_ms)
            if kept is not None:
                result.retained[f"{row.topic}:{row.ledger_id}"] = kept
                continue
        if refusal is not None:
            result.refused.append(f"{row.topic}:{row.ledger_id}")
            continue
        failure = _remove_files(store, row)
        if failure is not None:
            # Stays pending: the next purge tries again (a tier that said yes and kept the object, or was down).
            result.failed[f"{row.topic}:{row.ledger_id}"] = failure
            continue
        with write_transaction(store.engine) as conn:
            conn.execute(
                update(t.pending_deletions)
                .where(and_(t.pending_deletions.c.id == row.id, t.pending_deletions.c.status == "pending"))
                .values(status="purged", finished_as_of_ms=as_of_ms)
            )
        result.purged.append((row.topic, row.ledger_id))
        result.bytes_purged += row.size_bytes
        checkpoint("purge_between_files")
    result.topics_purged = _finish_deleted_topics(store, as_of_ms)
    if (
        result.purged
        or result.refused
        or result.topics_purged
        or result.held
        or result.failed
        or result.retained
    ):
        with write_transaction(store.engine) as conn:
            journal(
                conn,
                run_id=run_id,
                mechanism="purge",
                topic=None,
                action="purge",
                status="finished",
                detail=result.to_json(),
                as_of_ms=as_of_ms,
                actor=actor,
            )
    return result


def _rows_of(store: Store, ids: Sequence[int]) -> Iterator[Any]:
    """The pending deletions of ``ids`` still pending, in that order, a page at a time (each page read in a
    transaction of its own, closed before its rows are purged)."""
    pending = t.pending_deletions
    for start in range(0, len(ids), PURGE_PAGE_ROWS):
        with read_transaction(store.engine) as conn:
            page = conn.execute(
                select(pending)
                .where(
                    and_(
                        pending.c.id.in_(list(ids[start : start + PURGE_PAGE_ROWS])),
                        pending.c.status == "pending",
                    )
                )
                .order_by(pending.c.id)
            ).all()
        yield from page


def _live(conn: Any, row: Any) -> str | None:
    """Why a pending deletion's files are live data again (None: they are not): a ledger back in a topic's ledger
    list (restored) or a compacted ledger in use again; a ledger whose files key erasure rewrote is live at its new
    generation, not at this one; an offloaded ledger's local copy put back; an attempt's object its ledger names
    again."""
    ledgers = t.ledgers
    if row.kind == ORPHAN_KIND:
        return _orphan_named(conn, row)
    if row.kind == TIER_OBJECT_KIND:
        attempt = (parse_object_key(row.tier_key or "") or (None, None, None))[2]
        named = _still_named(conn, ledgers, row, ledgers.c.offload_uuid == attempt)
        return "its ledger names this offload attempt" if named else None
    if row.kind == LOCAL_COPY_KIND:
        kept = _still_named(conn, ledgers, row, ~ledgers.c.local_deleted)
        return "its local copy is in use again" if kept else None
    live_table = t.compacted_ledgers if row.kind == COMPACTED_KIND else ledgers
    generation = json.loads(row.ledger_row).get("files_generation") or 0
    live = _still_named(conn, live_table, row, live_table.c.files_generation == generation)
    return "the ledger is listed again" if live else None


def _retained(conn: Any, row: Any, policies: PoliciesNow, as_of_ms: int) -> str | None:
    """Why the retention in force now keeps a ledger trim deleted from a topic still there (None: it does not). A
    retention raised after the deletion keeps what it keeps until it lets it go: purge leaves the ledger pending,
    and ``restore`` can put it back (docs/semantics.md §11). Trim's rule, read against the topic now with its
    pending ledgers in their place: a ledger goes when it closed more than the retention time ago (strict), or when
    what would remain after it is still at or over the retention size. A whole topic deleted (GC, by hand) and the
    files an erasure replaced are not the retention's to keep."""
    if row.kind != "ledger" or row.erased_by is not None:
        return None
    topic = conn.execute(_TOPIC_NOW, {"purge_topic": row.topic}).first()
    if topic is None or (row.topic_incarnation is not None and row.topic_incarnation != topic.incarnation):
        return None
    namespace_policies = conn.execute(_NAMESPACE_NOW, {"purge_namespace": topic.namespace}).scalar_one()
    document = policies.document(row.topic, topic.policies, topic.namespace, namespace_policies)
    retention = json.loads(document)["retention"]
    time_ms = -1 if retention["time_minutes"] < 0 else retention["time_minutes"] * 60_000
    size_bytes = -1 if retention["size_mb"] < 0 else retention["size_mb"] * 1024 * 1024
    closed = json.loads(row.ledger_row).get("closed_at_ms")
    if time_ms >= 0 and closed is not None and as_of_ms - closed > time_ms:
        return None
    if size_bytes >= 0:
        sizes = [
            (r.ledger_id, r.size_bytes)
            for r in conn.execute(
                _TOPIC_LEDGER_SIZES, {"purge_topic": row.topic, "purge_incarnation": topic.incarnation}
            )
        ]
        total = sum(size for _, size in sizes)
        walked = sum(size for ledger_id, size in sizes if ledger_id <= row.ledger_id)
        if total - walked >= size_bytes:
            return None
    return f"the retention in force keeps it ({retention['time_minutes']} min, {retention['size_mb']} MB)"


# Compiled once: purge re-checks each due ledger's topic.
_TOPIC_NOW = select(t.topics.c.namespace, t.topics.c.policies, t.topics.c.incarnation).where(
    t.topics.c.name == bindparam("purge_topic")
)
_NAMESPACE_NOW = select(t.namespaces.c.policies).where(t.namespaces.c.name == bindparam("purge_namespace"))
# The topic's ledgers listed now and those trim deleted from it still waiting for purge, as one list by id (each
# ledger once: a pending one is not listed).
_TOPIC_LEDGER_SIZES = union_all(
    select(t.ledgers.c.ledger_id, t.ledgers.c.size_bytes).where(
        t.ledgers.c.topic == bindparam("purge_topic")
    ),
    select(t.pending_deletions.c.ledger_id, t.pending_deletions.c.size_bytes).where(
        and_(
            t.pending_deletions.c.topic == bindparam("purge_topic"),
            t.pending_deletions.c.status == "pending",
            t.pending_deletions.c.kind == "ledger",
            or_(
                t.pending_deletions.c.topic_incarnation.is_(None),
                t.pending_deletions.c.topic_incarnation == bindparam("purge_incarnation"),
            ),
        )
    ),
)


def _orphan_named(conn: Any, row: Any) -> str | None:
    """An orphan the scrub queued is checked once more before its files go (BookKeeper's ``verifyMetadataOnGC``):
    anything that names it now keeps it."""
    return orphan_named(
        conn, row.topic, row.ledger_id, path=row.path or None, tier_key=row.tier_key, other_than=row.id
    )


def _still_named(conn: Any, table: Any, row: Any, condition: Any) -> bool:
    """A row of ``table`` for the pending deletion's topic and ledger that meets ``condition``."""
    where = and_(table.c.topic == row.topic, table.c.ledger_id == row.ledger_id, condition)
    return conn.execute(select(table.c.ledger_id).where(where)).first() is not None


def _remove_files(store: Store, row: Any) -> str | None:
    """Delete the row's local directory, then its tier object; why it could not (None: both gone). The local files
    go first: a tier failure leaves the row pending and the next purge finds the directory already gone."""
    if row.path:
        store.remove_ledger_dir(row.path)
        store.prune_empty_parents(row.path)
        checkpoint("purge_after_file_removed")
    if row.tier_key:
        if store.tier is None:
            return f"object {row.tier_key} is in the object tier, which is not configured (HOUSEKEEPING_OFFLOAD_URL)"
        try:
            store.tier.delete(row.tier_key)
        except TierError as exc:
            return str(exc)
        checkpoint("purge_after_object_removed")
    return None


def _finish_deleted_topics(store: Store, as_of_ms: int) -> list[str]:
    """Deleted topics past their grace period whose ledgers are all purged become ``purged`` (no restore)."""
    finished: list[str] = []
    with write_transaction(store.engine) as conn:
        due = conn.execute(
            select(t.deleted_topics).where(
                and_(t.deleted_topics.c.status == "pending", t.deleted_topics.c.purge_after_ms <= as_of_ms)
            )
        ).all()
        for row in due:
            waiting = conn.execute(
                select(t.pending_deletions.c.id).where(
                    and_(
                        t.pending_deletions.c.topic == row.topic,
                        t.pending_deletions.c.run_id == row.run_id,
                        t.pending_deletions.c.status == "pending",
                    )
                )
            ).first()
            if waiting is not None:
                continue
            conn.execute(
                update(t.deleted_topics)
                .where(t.deleted_topics.c.id == row.id)
                .values(status="purged", finished_as_of_ms=as_of_ms)
            )
            finished.append(row.topic)
    return finished
