"""Compacted ledgers in the metadata store: stage, switch, abandon; and the compacted view readers see.

The write protocol (the apply app of the compaction DAG drives it; each step is one metadata transaction):

1. ``stage``: record the new compacted ledger as ``staged`` (id allocated above every id the topic used) before
   any file exists. A staged ledger of an earlier run that never switched is abandoned here.
2. The entries are written as a whole into a temporary directory and renamed into the ledger directory (one
   rename: the directory is complete or absent).
3. ``switch``: compare-and-set on what the plan saw (the compacted ledger in force and the ``__compaction``
   cursor), then the staged ledger becomes ``current``, the previous one goes to the pending-deletion log
   (purged after the grace period), and the ``__compaction`` cursor moves to the horizon, so consumed-ledger
   trim may free the raw ledgers compaction has read.

A crash leaves the old compacted ledger in force until step 3 commits and the new one after: never a
half-written one (readers only follow ``current``). Every compacted file is known to the metadata at every
point: a staged row (steps 1-3), a current row, or a pending deletion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, insert, select, update

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.core.positions import format_position
from housekeeping.store import metadata_schema as t
from housekeeping.store.clients import next_ledger_id, stamp_last_active
from housekeeping.store.store import record_pending_deletion

COMPACTED_KIND = "compacted_ledger"


@dataclass(frozen=True)
class PlannedLedger:
    """What a rewrite_compacted action will install (from the checked plan)."""

    topic: str
    replaces: int | None  # the compacted ledger in force at the snapshot
    cursor_from: tuple[int, int] | None  # the __compaction cursor at the snapshot (None: absent)
    horizon: tuple[int, int]
    entries: int
    size_bytes: int
    min_entry_ts_ms: int | None
    max_entry_ts_ms: int | None
    tombstones: int
    oldest_tombstone_ts_ms: int | None


def _to_pending(conn: Any, row: Any, *, run_id: str, as_of_ms: int, purge_after_ms: int) -> None:
    record_pending_deletion(
        conn,
        dict(row._mapping),
        run_id=run_id,
        as_of_ms=as_of_ms,
        purge_after_ms=purge_after_ms,
        kind=COMPACTED_KIND,
    )
    conn.execute(
        t.compacted_ledgers.delete().where(
            and_(t.compacted_ledgers.c.topic == row.topic, t.compacted_ledgers.c.ledger_id == row.ledger_id)
        )
    )


def stage(
    conn: Any, planned: PlannedLedger, *, run_id: str, as_of_ms: int, purge_after_ms: int
) -> int | None:
    """Record (or find, on a rerun of the same run) the staged ledger; returns its id, None if the topic is gone.
    Staged ledgers of other runs for the topic are abandoned into the pending-deletion log."""
    c = t.compacted_ledgers.c
    if conn.execute(select(t.topics.c.name).where(t.topics.c.name == planned.topic)).first() is None:
        return None
    staged = conn.execute(
        select(t.compacted_ledgers).where(and_(c.topic == planned.topic, c.status == "staged"))
    ).all()
    mine = None
    for row in staged:
        if row.run_id == run_id:
            mine = row.ledger_id
        else:
            _to_pending(
                conn,
                row,
                run_id=run_id,
                as_of_ms=as_of_ms,
                purge_after_ms=purge_after_ms,
            )
    if mine is not None:
        return mine
    ledger_id = next_ledger_id(conn, planned.topic)
    conn.execute(
        insert(t.compacted_ledgers).values(
            topic=planned.topic,
            ledger_id=ledger_id,
            status="staged",
            horizon_ledger=planned.horizon[0],
            horizon_entry=planned.horizon[1],
            entries=planned.entries,
            size_bytes=planned.size_bytes,
            min_entry_ts_ms=planned.min_entry_ts_ms,
            max_entry_ts_ms=planned.max_entry_ts_ms,
            tombstones=planned.tombstones,
            oldest_tombstone_ts_ms=planned.oldest_tombstone_ts_ms,
            run_id=run_id,
            compacted_as_of_ms=as_of_ms,
        )
    )
    return ledger_id


def switch(
    conn: Any,
    planned: PlannedLedger,
    ledger_id: int,
    *,
    run_id: str,
    as_of_ms: int,
    purge_after_ms: int,
) -> str | None:
    """Make the staged ledger current (None) or say why not; on a conflict the staged ledger is abandoned."""
    c = t.compacted_ledgers.c
    staged = conn.execute(
        select(t.compacted_ledgers).where(
            and_(c.topic == planned.topic, c.ledger_id == ledger_id, c.status == "staged", c.run_id == run_id)
        )
    ).first()
    if staged is None:
        return f"staged compacted ledger {ledger_id} is no longer staged for this run"
    current = conn.execute(
        select(t.compacted_ledgers).where(and_(c.topic == planned.topic, c.status == "current"))
    ).first()
    cursor = conn.execute(
        select(t.cursors).where(
            and_(t.cursors.c.topic == planned.topic, t.cursors.c.name == COMPACTION_SUBSCRIPTION)
        )
    ).first()
    cursor_at = None if cursor is None else (cursor.mark_delete_ledger, cursor.mark_delete_entry)
    why = None
    if (current.ledger_id if current else None) != planned.replaces:
        why = (
            f"the compacted ledger in force changed since the snapshot ({planned.replaces} -> "
            f"{current.ledger_id if current else None})"
        )
    elif cursor_at != planned.cursor_from:
        why = (
            f"the {COMPACTION_SUBSCRIPTION} cursor moved since the snapshot "
            f"({_fmt(planned.cursor_from)} -> {_fmt(cursor_at)})"
        )
    if why is not None:
        _to_pending(conn, staged, run_id=run_id, as_of_ms=as_of_ms, purge_after_ms=purge_after_ms)
        return why
    if current is not None:
        _to_pending(
            conn,
            current,
            run_id=run_id,
            as_of_ms=as_of_ms,
            purge_after_ms=purge_after_ms,
        )
    conn.execute(
        update(t.compacted_ledgers)
        .where(and_(c.topic == planned.topic, c.ledger_id == ledger_id))
        .values(status="current")
    )
    if cursor is None:
        conn.execute(
            insert(t.cursors).values(
                topic=planned.topic,
                name=COMPACTION_SUBSCRIPTION,
                durable=True,
                mark_delete_ledger=planned.horizon[0],
                mark_delete_entry=planned.horizon[1],
                last_active_ms=as_of_ms,
                consumers=0,
            )
        )
    elif planned.horizon > cursor_at:
        conn.execute(
            update(t.cursors)
            .where(and_(t.cursors.c.topic == planned.topic, t.cursors.c.name == COMPACTION_SUBSCRIPTION))
            .values(
                mark_delete_ledger=planned.horizon[0],
                mark_delete_entry=planned.horizon[1],
                last_active_ms=as_of_ms,
            )
        )
    # Compaction read the topic's backlog: it was active (as a subscription acknowledging would be).
    stamp_last_active(conn, planned.topic, as_of_ms)
    return None


def _fmt(position: tuple[int, int] | None) -> str:
    return "absent" if position is None else format_position(position)


def current_compacted(conn: Any, topic: str) -> Any:
    return conn.execute(
        select(t.compacted_ledgers).where(
            and_(t.compacted_ledgers.c.topic == topic, t.compacted_ledgers.c.status == "current")
        )
    ).first()
