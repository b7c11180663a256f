"""The one path that changes a store for a plan: apply, purge, restore.

apply
    Runs only a plan the gate passed unchanged (digest check). Per topic, in ONE metadata transaction:
    when the plan changes the topic's ledger list, compare-and-set the topic version recorded in the
    snapshot (a topic changed since is skipped and reported, never overwritten); remove the planned
    ledgers from the ledger list, record each in the pending-deletion log with its purge time; move the
    planned cursors, each compare-and-set on its own position (only forward, only while it is still
    between the planned start and target: a consumer's newer ack is kept); record backlog-quota states
    (never over a later measurement); journal the topic as applied. No file is touched. Rerunning the
    same run is a no-op: topics the journal shows applied for this run count as already done.

    Pulsar updates the ledger list and then deletes BookKeeper ledgers asynchronously; a crash between
    leaves orphans (PIP-186). Here the ledger-list change and the pending-deletion record commit together,
    so there is no state in which a file is unknown to the metadata.

purge
    Deletes the files of pending deletions whose purge time (deletion as-of + grace period, both logical
    time) has passed, through ``Store.remove_ledger_dir``; file first, then the record is marked purged,
    so a crash in between is completed by the next purge (deleting a missing directory is a no-op).

restore
    Puts pending-deleted ledgers back into a topic's ledger list while their files still exist.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import and_, insert, not_, or_, select, update

from housekeeping import metadata_schema as t
from housekeeping.errors import InputError
from housekeeping.gate import require_passed_gate
from housekeeping.manifest import parse_position
from housekeeping.plan import read_table
from housekeeping.snapshot import read_run_info
from housekeeping.store import Store, read_transaction, write_transaction

LEDGER_ACTIONS = ("delete_ledger", "delete_topic", "rewrite_compacted")


def _wall_ms() -> int:
    return int(time.time() * 1000)  # audit column only; never used in a decision


def journal(
    conn: Any,
    *,
    run_id: str,
    mechanism: str,
    topic: str | None,
    action: str,
    status: str,
    detail: dict[str, Any],
    as_of_ms: int,
) -> None:
    conn.execute(
        insert(t.journal).values(
            run_id=run_id,
            mechanism=mechanism,
            topic=topic,
            action=action,
            status=status,
            detail=json.dumps(detail, sort_keys=True, default=str),
            as_of_ms=as_of_ms,
            recorded_at_ms=_wall_ms(),
        )
    )


@dataclass
class ApplyResult:
    run_id: str
    applied_topics: list[str] = field(default_factory=list)
    already_applied_topics: list[str] = field(default_factory=list)
    skipped_topics: dict[str, str] = field(default_factory=dict)  # topic -> why
    ledgers_deleted: int = 0
    bytes_deleted: int = 0
    cursors_moved: int = 0
    # A consumer acknowledged at or past the planned target since the snapshot: its newer ack is kept.
    cursors_already_further: int = 0
    # The cursor is now *behind* the planned start (reset by an operator since the snapshot): not moved.
    cursors_skipped: dict[str, str] = field(default_factory=dict)
    quota_states_recorded: int = 0
    per_namespace: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "appliedTopics": self.applied_topics,
            "alreadyAppliedTopics": self.already_applied_topics,
            "skippedTopics": self.skipped_topics,
            "ledgersDeleted": self.ledgers_deleted,
            "bytesDeleted": self.bytes_deleted,
            "cursorsMoved": self.cursors_moved,
            "cursorsAlreadyFurther": self.cursors_already_further,
            "cursorsSkipped": self.cursors_skipped,
            "quotaStatesRecorded": self.quota_states_recorded,
            "perNamespace": self.per_namespace,
        }


def apply_plan(store: Store, run_dir: Path, *, purge_grace_seconds: int) -> ApplyResult:
    if purge_grace_seconds < 0:
        raise InputError(f"purge grace period {purge_grace_seconds} s must be >= 0")
    gate = require_passed_gate(run_dir)
    info = read_run_info(run_dir)
    mechanism, as_of_ms = info["mechanism"], int(info["asOfMs"])
    # Journal key = run + the validated plan's digest: a retried apply of the same plan is a no-op, while a
    # re-snapshotted (different) plan of the same Airflow run is applied on its own merits.
    run_id = f"{info['runId']}@{gate['planDigest'][:16]}"
    versions: dict[str, int] = info["topicVersions"]
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for action in read_table(run_dir, "actions"):
        by_topic[action["topic"]].append(action)

    result = ApplyResult(run_id)
    with write_transaction(store.engine) as conn:
        done = {
            row.topic
            for row in conn.execute(
                select(t.journal.c.topic).where(
                    and_(t.journal.c.run_id == run_id, t.journal.c.status == "applied")
                )
            )
        }
        if not conn.execute(
            select(t.journal.c.id).where(and_(t.journal.c.run_id == run_id, t.journal.c.status == "started"))
        ).first():
            journal(
                conn,
                run_id=run_id,
                mechanism=mechanism,
                topic=None,
                action="apply",
                status="started",
                detail={"topics": len(by_topic), "actions": sum(map(len, by_topic.values()))},
                as_of_ms=as_of_ms,
            )

    for topic in sorted(by_topic):
        if topic in done:
            result.already_applied_topics.append(topic)
            continue
        if topic not in versions:
            raise InputError(f"plan in {run_dir} names topic {topic}, which is not in its snapshot")
        outcome = _apply_topic(
            store, run_id, mechanism, as_of_ms, topic, versions[topic], by_topic[topic], purge_grace_seconds
        )
        if outcome["status"] == "applied":
            result.applied_topics.append(topic)
            result.ledgers_deleted += outcome["ledgers"]
            result.bytes_deleted += outcome["bytes"]
            result.cursors_moved += outcome["cursors"]
            result.cursors_already_further += outcome["further"]
            result.cursors_skipped.update(outcome["skippedCursors"])
            result.quota_states_recorded += outcome["quotaStates"]
            per_ns = result.per_namespace.setdefault(outcome["namespace"], {"ledgers": 0, "bytes": 0})
            per_ns["ledgers"] += outcome["ledgers"]
            per_ns["bytes"] += outcome["bytes"]
        else:
            result.skipped_topics[topic] = outcome["why"]

    with write_transaction(store.engine) as conn:
        journal(
            conn,
            run_id=run_id,
            mechanism=mechanism,
            topic=None,
            action="apply",
            status="finished",
            detail=result.to_json(),
            as_of_ms=as_of_ms,
        )
    return result


def _apply_topic(
    store: Store,
    run_id: str,
    mechanism: str,
    as_of_ms: int,
    topic: str,
    expected_version: int,
    actions: list[dict[str, Any]],
    purge_grace_seconds: int,
) -> dict[str, Any]:
    changes_ledgers = any(a["action"] in LEDGER_ACTIONS for a in actions)
    with write_transaction(store.engine) as conn:
        if changes_ledgers:
            bumped = conn.execute(
                update(t.topics)
                .where(and_(t.topics.c.name == topic, t.topics.c.version == expected_version))
                .values(version=t.topics.c.version + 1)
            ).rowcount
        else:
            # Cursor moves and quota flags do not change the ledger list: each cursor is compare-and-set on
            # its own position below, so a concurrent ack or ledger roll does not void the topic's plan.
            bumped = len(conn.execute(select(t.topics.c.name).where(t.topics.c.name == topic)).all())
        if bumped != 1:
            row = conn.execute(select(t.topics.c.version).where(t.topics.c.name == topic)).first()
            why = (
                f"topic changed since the snapshot (version {expected_version} -> {row.version})"
                if row
                else "topic no longer exists"
            )
            journal(
                conn,
                run_id=run_id,
                mechanism=mechanism,
                topic=topic,
                action="apply",
                status="skipped_conflict",
                detail={"why": why},
                as_of_ms=as_of_ms,
            )
            return {"status": "skipped", "why": why}
        namespace = conn.execute(select(t.topics.c.namespace).where(t.topics.c.name == topic)).scalar_one()
        ledgers_deleted = bytes_deleted = cursors_moved = further = quota_states = 0
        skipped_cursors: dict[str, str] = {}
        deleted_ids: list[int] = []
        for action in actions:
            if action["action"] == "delete_ledger":
                ledger_id = int(action["ledgerId"])
                row = conn.execute(
                    select(t.ledgers).where(
                        and_(t.ledgers.c.topic == topic, t.ledgers.c.ledger_id == ledger_id)
                    )
                ).first()
                if row is None:
                    # Cannot happen with a matching version; refuse rather than guess.
                    raise InputError(f"topic {topic}: planned ledger {ledger_id} is not in the metadata")
                conn.execute(
                    t.ledgers.delete().where(
                        and_(t.ledgers.c.topic == topic, t.ledgers.c.ledger_id == ledger_id)
                    )
                )
                conn.execute(
                    insert(t.pending_deletions).values(
                        topic=topic,
                        ledger_id=ledger_id,
                        path=store.ledger_rel_path(topic, ledger_id),
                        ledger_row=json.dumps(dict(row._mapping), sort_keys=True),
                        size_bytes=row.size_bytes,
                        run_id=run_id,
                        deleted_as_of_ms=as_of_ms,
                        purge_after_ms=as_of_ms + purge_grace_seconds * 1000,
                        status="pending",
                    )
                )
                ledgers_deleted += 1
                bytes_deleted += row.size_bytes
                deleted_ids.append(ledger_id)
            elif action["action"] == "move_cursor":
                from_l, from_e = parse_position(
                    action["from"], f"topic {topic} cursor {action['subscription']}"
                )
                to_l, to_e = parse_position(action["to"], f"topic {topic} cursor {action['subscription']}")
                if (to_l, to_e) <= (from_l, from_e):
                    raise InputError(
                        f"topic {topic} cursor {action['subscription']}: refusing to move backward"
                    )
                outcome = _move_cursor(conn, topic, action["subscription"], (from_l, from_e), (to_l, to_e))
                if outcome == "moved":
                    cursors_moved += 1
                elif outcome == "further":
                    further += 1
                else:
                    skipped_cursors[f"{topic} {action['subscription']}"] = outcome
            elif action["action"] == "flag_backlog_quota":
                quota_states += _record_quota_state(conn, topic, action, as_of_ms, run_id)
            else:
                raise InputError(f"topic {topic}: action {action['action']!r} is not applied by {mechanism}")
        journal(
            conn,
            run_id=run_id,
            mechanism=mechanism,
            topic=topic,
            action="apply",
            status="applied",
            detail={
                "ledgers": deleted_ids,
                "bytes": bytes_deleted,
                "cursorsMoved": cursors_moved,
                "cursorsAlreadyFurther": further,
                "cursorsSkipped": skipped_cursors,
                "quotaStates": quota_states,
                "fromVersion": expected_version,
            },
            as_of_ms=as_of_ms,
        )
    return {
        "status": "applied",
        "namespace": namespace,
        "ledgers": ledgers_deleted,
        "bytes": bytes_deleted,
        "cursors": cursors_moved,
        "further": further,
        "skippedCursors": skipped_cursors,
        "quotaStates": quota_states,
    }


def _position_before(ledger_col: Any, entry_col: Any, position: tuple[int, int]) -> Any:
    """SQL: (ledger_col, entry_col) < position, portable (no row-value comparison)."""
    return or_(ledger_col < position[0], and_(ledger_col == position[0], entry_col < position[1]))


def _move_cursor(conn: Any, topic: str, name: str, start: tuple[int, int], target: tuple[int, int]) -> str:
    """Move a mark-delete forward to ``target`` when it is at or after ``start`` and before ``target``.

    A consumer that acknowledged to or past ``target`` since the snapshot keeps its newer position
    ("further"); a cursor now before ``start`` was reset since the snapshot and is left alone."""
    c = t.cursors.c
    moved = conn.execute(
        update(t.cursors)
        .where(
            and_(
                c.topic == topic,
                c.name == name,
                not_(_position_before(c.mark_delete_ledger, c.mark_delete_entry, start)),
                _position_before(c.mark_delete_ledger, c.mark_delete_entry, target),
            )
        )
        .values(mark_delete_ledger=target[0], mark_delete_entry=target[1])
    ).rowcount
    if moved == 1:
        return "moved"
    row = conn.execute(
        select(c.mark_delete_ledger, c.mark_delete_entry).where(and_(c.topic == topic, c.name == name))
    ).first()
    if row is None:
        return "cursor no longer exists"
    if (row.mark_delete_ledger, row.mark_delete_entry) >= target:
        return "further"
    return (
        f"cursor is at {row.mark_delete_ledger}:{row.mark_delete_entry}, before the planned start "
        f"{start[0]}:{start[1]} (reset since the snapshot)"
    )


def _record_quota_state(conn: Any, topic: str, action: dict[str, Any], as_of_ms: int, run_id: str) -> int:
    """Upsert the topic's backlog-quota state, never over a state measured at a later logical time (a
    backfill of an older date must not undo a newer measurement)."""
    q = t.backlog_quota_states.c
    key = and_(q.topic == topic, q.quota_type == action["quotaType"])
    exceeded = bool(action["exceeded"])
    values = {
        "policy": action["policy"],
        "exceeded": exceeded,
        "limit_value": int(action["limitValue"]),
        "measured_value": action.get("measuredValue"),
        "exceeded_since_ms": action.get("exceededSinceMs") if exceeded else None,
        "cleared_at_ms": None if exceeded else as_of_ms,
        "as_of_ms": as_of_ms,
        "run_id": run_id,
    }
    current = conn.execute(select(q.as_of_ms).where(key)).first()
    if current is None:
        conn.execute(
            insert(t.backlog_quota_states).values(topic=topic, quota_type=action["quotaType"], **values)
        )
        return 1
    if current.as_of_ms > as_of_ms:
        return 0
    return conn.execute(update(t.backlog_quota_states).where(key).values(**values)).rowcount


@dataclass
class PurgeResult:
    purged: list[tuple[str, int]] = field(default_factory=list)
    bytes_purged: int = 0
    waiting: int = 0
    next_purge_after_ms: int | None = None
    refused: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "purged": [f"{t}:{ledger}" for t, ledger in self.purged],
            "bytesPurged": self.bytes_purged,
            "waiting": self.waiting,
            "nextPurgeAfterMs": self.next_purge_after_ms,
            "refused": self.refused,
        }


def purge(store: Store, *, as_of_ms: int, run_id: str) -> PurgeResult:
    result = PurgeResult()
    with read_transaction(store.engine) as conn:
        rows = list(
            conn.execute(
                select(t.pending_deletions)
                .where(t.pending_deletions.c.status == "pending")
                .order_by(t.pending_deletions.c.id)
            )
        )
    for row in rows:
        if row.purge_after_ms > as_of_ms:
            result.waiting += 1
            if result.next_purge_after_ms is None or row.purge_after_ms < result.next_purge_after_ms:
                result.next_purge_after_ms = row.purge_after_ms
            continue
        with write_transaction(store.engine) as conn:
            live = conn.execute(
                select(t.ledgers.c.ledger_id).where(
                    and_(t.ledgers.c.topic == row.topic, t.ledgers.c.ledger_id == row.ledger_id)
                )
            ).first()
            if live is not None:
                # The ledger is in a topic's ledger list again (restored): its files are live data.
                result.refused.append(f"{row.topic}:{row.ledger_id}")
                continue
        store.remove_ledger_dir(row.path)
        with write_transaction(store.engine) as conn:
            conn.execute(
                update(t.pending_deletions)
                .where(and_(t.pending_deletions.c.id == row.id, t.pending_deletions.c.status == "pending"))
                .values(status="purged", finished_as_of_ms=as_of_ms)
            )
        result.purged.append((row.topic, row.ledger_id))
        result.bytes_purged += row.size_bytes
    if result.purged or result.refused:
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
            )
    return result


def restore(
    store: Store, topic: str, *, ledger_id: int | None = None, as_of_ms: int, run_id: str
) -> list[int]:
    """Put a topic's pending-deleted ledgers (or one of them) back. Cursors fast-forwarded past them stay."""
    with write_transaction(store.engine) as conn:
        if conn.execute(select(t.topics.c.name).where(t.topics.c.name == topic)).first() is None:
            raise InputError(f"topic {topic} does not exist in store {store.root}")
        query = select(t.pending_deletions).where(
            and_(t.pending_deletions.c.topic == topic, t.pending_deletions.c.status == "pending")
        )
        if ledger_id is not None:
            query = query.where(t.pending_deletions.c.ledger_id == ledger_id)
        rows = list(conn.execute(query.order_by(t.pending_deletions.c.ledger_id)))
        if not rows:
            what = f"ledger {ledger_id} of topic {topic}" if ledger_id is not None else f"topic {topic}"
            raise InputError(
                f"nothing to restore for {what}: no pending deletion (purged already, or never deleted)"
            )
        restored: list[int] = []
        for row in rows:
            ledger_row = json.loads(row.ledger_row)
            if ledger_row.get("entries_stored") and not (store.root / row.path).is_dir():
                raise InputError(
                    f"topic {topic} ledger {row.ledger_id}: files at {row.path} are gone; cannot restore"
                )
            conn.execute(insert(t.ledgers).values(**ledger_row))
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
        )
    return restored
