"""Restore: put pending-deleted ledgers back into a topic's ledger list while their files still exist (an offloaded
ledger's local files and its tier object), an offloaded ledger's deleted local copy back in force, or a whole topic
deleted by inactive-topic GC (rows, cursors, quota states, ledgers; its partitioned metadata if that went with it)
before its purge."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import and_, insert, select, update

from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName
from housekeeping.core.timeutil import format_ms
from housekeeping.store import metadata_schema as t
from housekeeping.store.compacted_ledgers import COMPACTED_KIND
from housekeeping.store.journal import journal
from housekeeping.store.store import LOCAL_COPY_KIND, ORPHAN_KIND, Store, write_transaction


def restore(
    store: Store,
    topic: str,
    *,
    ledger_id: int | None = None,
    as_of_ms: int,
    run_id: str,
    actor: str | None = None,
) -> list[int]:
    """Put a topic's pending-deleted ledgers (or one of them) back. Cursors fast-forwarded past them stay.
    A topic deleted as a whole (inactive-topic GC) comes back whole: see :func:`restore_topic`. Orphans the store
    scrub queued under the topic's directory are kept first (:func:`restore_orphans`). ``actor``: who restores
    (the journal's; default this process's user), the CLI's user or the console's Airflow user."""
    orphans = restore_orphans(
        store, topic, ledger_id=ledger_id, as_of_ms=as_of_ms, run_id=run_id, actor=actor
    )
    if orphans:
        try:
            return sorted({*orphans, *_restore_ledgers(store, topic, ledger_id, as_of_ms, run_id, actor)})
        except InputError:
            return orphans  # nothing else of the topic waits for purge
    return _restore_ledgers(store, topic, ledger_id, as_of_ms, run_id, actor)


def deleted_by(run: str, deleting_run_id: str) -> bool:
    """Whether a pending deletion's ``run_id`` is ``run``'s: the run's own id, or its journal key (apply's
    ``<run id>@<plan digest>``)."""
    return deleting_run_id == run or deleting_run_id.startswith(f"{run}@")


def restore_run(
    store: Store, run: str, *, as_of_ms: int, run_id: str, actor: str | None = None
) -> dict[str, Any]:
    """Put back every deletion of one run still waiting for purge: each topic it deleted whole (inactive-topic GC)
    comes back whole, each ledger (and local copy) it deleted goes back into its topic. Topic by topic, each its own
    transaction as one restore is: ``{"restored": {topic: [ledger ids]}, "failed": {topic: why}}``; a run with
    nothing pending is bad input naming it (nothing changed)."""
    p, d = t.pending_deletions.c, t.deleted_topics.c
    with write_transaction(store.engine) as conn:
        whole = sorted(
            {
                r.topic
                for r in conn.execute(select(d.topic, d.run_id).where(d.status == "pending"))
                if deleted_by(run, r.run_id)
            }
        )
        ledgers: dict[str, list[int]] = {}
        for row in conn.execute(
            select(p.topic, p.ledger_id, p.run_id, p.kind, p.erased_by)
            .where(and_(p.status == "pending", p.kind.in_(("ledger", LOCAL_COPY_KIND, ORPHAN_KIND))))
            .order_by(p.topic, p.ledger_id)
        ):
            if deleted_by(run, row.run_id) and row.topic not in whole and not row.erased_by:
                ledgers.setdefault(row.topic, []).append(row.ledger_id)
    if not whole and not ledgers:
        raise InputError(f"nothing to restore for run {run!r}: none of its deletions waits for purge")
    restored: dict[str, list[int]] = {}
    failed: dict[str, str] = {}
    for topic in whole:
        try:
            restored[topic] = restore_topic(store, topic, as_of_ms=as_of_ms, run_id=run_id, actor=actor)
        except InputError as refused:
            failed[topic] = str(refused)
    for topic, ids in ledgers.items():
        done: list[int] = []
        for ledger_id in sorted(set(ids)):
            try:
                done += restore(
                    store, topic, ledger_id=ledger_id, as_of_ms=as_of_ms, run_id=run_id, actor=actor
                )
            except InputError as refused:
                failed[f"{topic}:{ledger_id}"] = str(refused)
        if done:
            restored[topic] = sorted(set(done))
    return {"restored": dict(sorted(restored.items())), "failed": dict(sorted(failed.items()))}


def restore_orphans(
    store: Store,
    topic: str,
    *,
    ledger_id: int | None = None,
    as_of_ms: int,
    run_id: str,
    actor: str | None = None,
) -> list[int]:
    """Keep the items the store scrub queued under ``topic`` (or its ledger ``ledger_id``): their pending deletions
    become ``restored`` and their files, never moved, stay where they are; a later scrub counts a restored orphan as
    kept, not as an orphan. The ledger ids they were named by (empty: none was queued)."""
    p = t.pending_deletions.c
    with write_transaction(store.engine) as conn:
        query = select(t.pending_deletions).where(
            and_(p.topic == topic, p.status == "pending", p.kind == ORPHAN_KIND)
        )
        if ledger_id is not None:
            query = query.where(p.ledger_id == ledger_id)
        rows = list(conn.execute(query.order_by(p.id)))
        if not rows:
            return []
        for row in rows:
            conn.execute(
                update(t.pending_deletions)
                .where(p.id == row.id)
                .values(status="restored", finished_as_of_ms=as_of_ms)
            )
        journal(
            conn,
            run_id=run_id,
            mechanism="restore",
            topic=topic,
            action="restore_orphans",
            status="restored",
            detail={
                "orphans": [row.path or row.tier_key for row in rows],
                "pendingIds": [row.id for row in rows],
            },
            as_of_ms=as_of_ms,
            actor=actor,
        )
    return sorted({row.ledger_id for row in rows})


def _restore_ledgers(
    store: Store, topic: str, ledger_id: int | None, as_of_ms: int, run_id: str, actor: str | None
) -> list[int]:
    with write_transaction(store.engine) as conn:
        exists = conn.execute(select(t.topics.c.name).where(t.topics.c.name == topic)).first() is not None
    if not exists:
        if ledger_id is not None:
            raise InputError(f"topic {topic} does not exist in store {store.root}; restore it whole first")
        return restore_topic(store, topic, as_of_ms=as_of_ms, run_id=run_id, actor=actor)
    with write_transaction(store.engine) as conn:
        # Locked as every client path locks it: an apply re-checking the topic sees the ledgers back, or waits.
        current = conn.execute(
            select(t.topics.c.name, t.topics.c.incarnation).where(t.topics.c.name == topic).with_for_update()
        ).first()
        if current is None:
            raise InputError(f"topic {topic} does not exist in store {store.root}")
        p = t.pending_deletions.c
        # Ledgers of an earlier topic of the same name (deleted by GC or by hand, then created again) belong to that
        # topic, not this one: the deletion that removed it, and the incarnation each ledger was logged under.
        predecessor_runs = select(t.deleted_topics.c.run_id).where(t.deleted_topics.c.topic == topic)
        query = select(t.pending_deletions).where(
            and_(
                p.topic == topic,
                p.status == "pending",
                # A replaced compacted ledger or an abandoned offload attempt's object is not put back.
                p.kind.in_(("ledger", LOCAL_COPY_KIND)),
                p.run_id.not_in(predecessor_runs),
            )
        )
        if ledger_id is not None:
            query = query.where(p.ledger_id == ledger_id)
        found = list(conn.execute(query.order_by(p.ledger_id)))
        rows = [r for r in found if r.topic_incarnation is None or r.topic_incarnation == current.incarnation]
        what = f"ledger {ledger_id} of topic {topic}" if ledger_id is not None else f"topic {topic}"
        if found and not rows:
            raise InputError(
                f"nothing to restore for {what}: its pending ledgers ({', '.join(str(r.ledger_id) for r in found)}) "
                "belonged to an earlier topic of this name, deleted and created again since; they never go into "
                "this one (nothing was changed)"
            )
        if not rows:
            raise InputError(
                f"nothing to restore for {what}: no pending deletion (purged already, or never deleted)"
            )
        _refuse_erased(rows, topic)
        restored: list[int] = []
        # Ledgers back into the list first: a local copy deleted before its ledger is put back onto the row.
        for row in sorted(rows, key=lambda r: (r.kind != "ledger", r.ledger_id)):
            _check_files(store, row, topic)
            if row.kind == LOCAL_COPY_KIND:
                _restore_local_copy(conn, row, topic)
            else:
                conn.execute(insert(t.ledgers).values(**json.loads(row.ledger_row)))
            conn.execute(
                update(t.pending_deletions)
                .where(t.pending_deletions.c.id == row.id)
                .values(status="restored", finished_as_of_ms=as_of_ms)
            )
            restored.append(row.ledger_id)
        conn.execute(update(t.topics).where(t.topics.c.name == topic).values(version=t.topics.c.version + 1))
        journal(
            conn,
            run_id=run_id,
            mechanism="restore",
            topic=topic,
            action="restore_ledgers",
            status="restored",
            detail={"ledgers": restored},
            as_of_ms=as_of_ms,
            actor=actor,
        )
    return restored


def restore_topic(
    store: Store, name: str, *, as_of_ms: int, run_id: str, actor: str | None = None
) -> list[int]:
    """Bring back a topic (or partitioned-topic metadata) deleted by GC, while it is within its grace period:
    the topic row with its policies, its cursors and quota states, its ledgers (files must still exist), and
    its partitioned metadata if that was deleted with it. Returns the restored ledger ids."""
    with write_transaction(store.engine) as conn:
        record = _deleted_record(conn, store, name)
        saved = json.loads(record.saved_rows)
        restored: list[int] = []
        if record.kind == "partitioned_metadata":
            _restore_partitioned_metadata(conn, record, saved, as_of_ms)
        else:
            restored = _restore_deleted_topic(conn, store, record, saved, as_of_ms)
        conn.execute(
            update(t.deleted_topics)
            .where(t.deleted_topics.c.id == record.id)
            .values(status="restored", finished_as_of_ms=as_of_ms)
        )
        journal(
            conn,
            run_id=run_id,
            mechanism="restore",
            topic=name,
            action=f"restore_{record.kind}",
            status="restored",
            detail={"deletedBy": record.run_id, "ledgers": sorted(restored)},
            as_of_ms=as_of_ms,
            actor=actor,
        )
    return sorted(restored)


def _deleted_record(conn: Any, store: Store, name: str) -> Any:
    """The newest ``deleted_topics`` record of ``name``, still restorable."""
    record = conn.execute(
        select(t.deleted_topics)
        .where(t.deleted_topics.c.topic == name)
        .order_by(t.deleted_topics.c.id.desc())
        .limit(1)
    ).first()
    if record is None:
        raise InputError(
            f"topic {name} does not exist in store {store.root} and was never deleted (by GC or `topics delete`)"
        )
    if record.status != "pending":
        raise InputError(
            f"topic {name} was deleted by run {record.run_id} and is {record.status} "
            f"(as of {format_ms(record.finished_as_of_ms)}); it cannot be restored"
        )
    return record


def _restorable_ledgers(conn: Any, store: Store, name: str, record: Any, saved: dict[str, Any]) -> list[Any]:
    """The deleted topic's ledgers in the pending-deletion log: every one of them, none erased, files present."""
    p = t.pending_deletions.c
    pending = list(
        conn.execute(
            select(t.pending_deletions).where(
                and_(p.topic == name, p.run_id == record.run_id, p.status == "pending")
            )
        )
    )
    wanted = len(saved["ledgerIds"]) + len(saved.get("compactedLedgerIds", []))
    if len(pending) != wanted:
        raise InputError(
            f"topic {name}: {wanted - len(pending)} of its ledgers were purged already; cannot restore"
        )
    _refuse_erased(pending, name)
    for row in pending:
        _check_files(store, row, name)
    return pending


def _check_files(store: Store, row: Any, topic: str) -> None:
    """A pending deletion comes back only with every copy it names still there: its local files, its tier object."""
    if json.loads(row.ledger_row).get("entries_stored") and row.path and not (store.root / row.path).is_dir():
        raise InputError(
            f"topic {topic} ledger {row.ledger_id}: files at {row.path} are gone; cannot restore"
        )
    if row.tier_key:
        tier = store.require_tier(f"topic {topic} ledger {row.ledger_id} is in the object tier")
        if tier.info(row.tier_key) is None:
            raise InputError(
                f"topic {topic} ledger {row.ledger_id}: its object {row.tier_key} is gone from {tier.where}; cannot "
                "restore"
            )


def _restore_local_copy(conn: Any, row: Any, topic: str) -> None:
    """An offloaded ledger's local copy back in force (the ledger is listed; its copy was deleted for the lag)."""
    where = and_(
        t.ledgers.c.topic == topic, t.ledgers.c.ledger_id == row.ledger_id, t.ledgers.c.local_deleted
    )
    if conn.execute(update(t.ledgers).where(where).values(local_deleted=False)).rowcount != 1:
        raise InputError(
            f"topic {topic} ledger {row.ledger_id}: its local copy cannot come back, the ledger is no longer listed "
            "with its local copy deleted"
        )


def _restore_deleted_topic(
    conn: Any, store: Store, record: Any, saved: dict[str, Any], as_of_ms: int
) -> list[int]:
    """The topic's rows, ledgers, cursors and quota states back, with its partitioned metadata if that went with
    it; returns the restored ledger ids."""
    name = record.topic
    topic_row = dict(saved["topic"])
    namespace = topic_row["namespace"]
    if conn.execute(select(t.namespaces.c.name).where(t.namespaces.c.name == namespace)).first() is None:
        raise InputError(f"topic {name}: namespace {namespace} no longer exists; cannot restore")
    pending = _restorable_ledgers(conn, store, name, record, saved)
    parent = TopicName.parse(name).partitioned_parent
    if parent is not None:
        d = t.deleted_topics.c
        metadata = conn.execute(
            select(t.deleted_topics).where(
                and_(d.topic == parent, d.run_id == record.run_id, d.status == "pending")
            )
        ).first()
        if metadata is not None:
            _restore_partitioned_metadata(conn, metadata, json.loads(metadata.saved_rows), as_of_ms)
    topic_row["version"] = int(topic_row["version"]) + 1  # versions only move forward
    conn.execute(insert(t.topics).values(**topic_row))
    restored = []
    for row in pending:
        table = t.compacted_ledgers if row.kind == COMPACTED_KIND else t.ledgers
        conn.execute(insert(table).values(**json.loads(row.ledger_row)))
        conn.execute(
            update(t.pending_deletions)
            .where(t.pending_deletions.c.id == row.id)
            .values(status="restored", finished_as_of_ms=as_of_ms)
        )
        restored.append(row.ledger_id)
    if saved["cursors"]:
        conn.execute(insert(t.cursors), saved["cursors"])
    if saved["quotaStates"]:
        conn.execute(insert(t.backlog_quota_states), saved["quotaStates"])
    return restored


def _refuse_erased(rows: list[Any], topic: str) -> None:
    """Files a key erasure covers never come back: the erased key would return with them."""
    erased = [row for row in rows if row.erased_by]
    if erased:
        row = erased[0]
        raise InputError(
            f"topic {topic} ledger {row.ledger_id}: files at {row.path} hold a key that key-erasure run "
            f"{row.erased_by} erased; they are never restored (nothing was changed)"
        )


def _restore_partitioned_metadata(conn: Any, record: Any, saved: dict[str, Any], as_of_ms: int) -> None:
    row = saved["partitionedTopic"]
    if conn.execute(
        select(t.partitioned_topics.c.name).where(t.partitioned_topics.c.name == row["name"])
    ).first():
        raise InputError(f"partitioned topic {row['name']} exists again; cannot restore the deleted metadata")
    conn.execute(insert(t.partitioned_topics).values(**row))
    conn.execute(
        update(t.deleted_topics)
        .where(t.deleted_topics.c.id == record.id)
        .values(status="restored", finished_as_of_ms=as_of_ms)
    )
