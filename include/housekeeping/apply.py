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

    A topic deleted by inactive-topic GC is re-checked against the *current* metadata first, as Pulsar's
    ``delete(failIfHasSubscriptions, failIfHasBacklogs, closeIfClientsConnected=false)`` does: a producer or
    consumer connected, a subscription (no-subscriptions mode) or a backlog (caught-up mode) that appeared,
    a lastActive that moved, changed policies or a ledger roll since the snapshot -> skipped and reported.
    Otherwise, in the same transaction: its cursors, quota states, ledgers (into the pending-deletion log)
    and the topic row with its policies go, and a ``deleted_topics`` record keeps every row for restore.

purge
    ... also marks a deleted topic purged once its ledgers' files are gone; empty topic directories go too.

restore
    Puts pending-deleted ledgers back into a topic's ledger list while their files still exist, or a whole
    deleted topic (rows, cursors, ledgers; its partitioned metadata if that went with it) before its purge.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from sqlalchemy import and_, insert, not_, or_, select, update

from housekeeping import metadata_schema as t
from housekeeping.actor import current_actor
from housekeeping.clients import last_entry, stamp_last_active
from housekeeping.compaction import COMPACTED_KIND
from housekeeping.errors import InputError
from housekeeping.faults import checkpoint
from housekeeping.gate import require_passed_gate
from housekeeping.holds import HELD_FORBIDDEN_ACTIONS, current_hold
from housekeeping.holds import describe as describe_hold
from housekeeping.manifest import parse_position
from housekeeping.names import TopicName
from housekeeping.plan import read_table
from housekeeping.policies import BrokerConfig, resolve_policies
from housekeeping.snapshot import read_jsonl, read_run_info
from housekeeping.store import Store, read_transaction, record_pending_deletion, write_transaction
from housekeeping.timeutil import format_ms

LEDGER_ACTIONS = ("delete_ledger", "delete_topic", "rewrite_compacted")
# Applied after every topic of the plan (a partitioned topic's metadata goes after its partitions).
METADATA_ACTIONS = ("delete_partitioned_metadata",)
PLAN_ROW_KEYS = ("action", "ledgerId", "subscription", "from", "to", "bytes", "reason")


def plan_rows(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan rows a journal entry came from (its ``why``), without the mechanism-specific extras."""
    return [{k: a.get(k) for k in PLAN_ROW_KEYS if a.get(k) is not None} for a in actions]


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
    actor: str | None = None,
) -> None:
    """One journal row, in the caller's transaction. ``actor``: who (default: this process's user)."""
    conn.execute(
        insert(t.journal).values(
            actor=actor or current_actor(),
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


def begin_run(
    store: Store, *, run_id: str, mechanism: str, as_of_ms: int, actor: str, detail: dict[str, Any]
) -> set[str]:
    """Journal the run as started (once: a retry finds it) and return the topics it already applied, which a
    retried apply skips."""
    with write_transaction(store.engine) as conn:
        done = {
            row.topic
            for row in conn.execute(
                select(t.journal.c.topic).where(
                    and_(t.journal.c.run_id == run_id, t.journal.c.status == "applied")
                )
            )
        }
        started = conn.execute(
            select(t.journal.c.id).where(and_(t.journal.c.run_id == run_id, t.journal.c.status == "started"))
        ).first()
        if started is None:
            _journal_run(conn, "started", run_id, mechanism, as_of_ms, actor, detail)
    return done


def _journal_run(
    conn: Any, status: str, run_id: str, mechanism: str, as_of_ms: int, actor: str, detail: dict
) -> None:
    """A run-level journal row (no topic): the run's ``started`` or ``finished`` entry."""
    journal(
        conn,
        run_id=run_id,
        mechanism=mechanism,
        topic=None,
        action="apply",
        status=status,
        detail=detail,
        as_of_ms=as_of_ms,
        actor=actor,
    )


def finish_run(
    store: Store, *, run_id: str, mechanism: str, as_of_ms: int, actor: str, detail: dict[str, Any]
) -> None:
    """Journal the run as finished, with its result (the pair of ``begin_run``)."""
    with write_transaction(store.engine) as conn:
        _journal_run(conn, "finished", run_id, mechanism, as_of_ms, actor, detail)


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
    topics_deleted: list[str] = field(default_factory=list)
    last_active_refreshed: int = 0
    partitioned_metadata_deleted: list[str] = field(default_factory=list)
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
            "topicsDeleted": self.topics_deleted,
            "lastActiveRefreshed": self.last_active_refreshed,
            "partitionedMetadataDeleted": self.partitioned_metadata_deleted,
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
    metadata_actions: list[dict[str, Any]] = []
    for action in read_table(run_dir, "actions"):
        if action["action"] in METADATA_ACTIONS:
            metadata_actions.append(action)
        else:
            by_topic[action["topic"]].append(action)
    actor = str(info.get("actor") or current_actor())
    context = _ApplyContext(store, run_dir, run_id, mechanism, as_of_ms, purge_grace_seconds, actor)

    result = ApplyResult(run_id)
    done = begin_run(
        store,
        run_id=run_id,
        mechanism=mechanism,
        as_of_ms=as_of_ms,
        actor=actor,
        detail={
            "topics": len(by_topic),
            "actions": sum(map(len, by_topic.values())) + len(metadata_actions),
        },
    )

    for topic in sorted(by_topic):
        if topic in done:
            result.already_applied_topics.append(topic)
            continue
        if topic not in versions:
            raise InputError(f"plan in {run_dir} names topic {topic}, which is not in its snapshot")
        outcome = _apply_topic(context, topic, versions[topic], by_topic[topic])
        checkpoint("apply_after_topic_commit")
        if outcome["status"] == "applied":
            result.applied_topics.append(topic)
            result.ledgers_deleted += outcome["ledgers"]
            result.bytes_deleted += outcome["bytes"]
            result.cursors_moved += outcome["cursors"]
            result.cursors_already_further += outcome["further"]
            result.cursors_skipped.update(outcome["skippedCursors"])
            result.quota_states_recorded += outcome["quotaStates"]
            result.last_active_refreshed += outcome["lastActiveRefreshed"]
            if outcome["topicDeleted"]:
                result.topics_deleted.append(topic)
            per_ns = result.per_namespace.setdefault(
                outcome["namespace"], {"ledgers": 0, "bytes": 0, "topics": 0}
            )
            per_ns["ledgers"] += outcome["ledgers"]
            per_ns["bytes"] += outcome["bytes"]
            per_ns["topics"] += int(outcome["topicDeleted"])
        else:
            result.skipped_topics[topic] = outcome["why"]

    for action in metadata_actions:
        name = action["topic"]
        if name in done:
            result.already_applied_topics.append(name)
            continue
        why = _delete_partitioned_metadata(context, name)
        if why is None:
            result.partitioned_metadata_deleted.append(name)
        else:
            result.skipped_topics[name] = why

    finish_run(
        store, run_id=run_id, mechanism=mechanism, as_of_ms=as_of_ms, actor=actor, detail=result.to_json()
    )
    return result


@dataclass
class _ApplyContext:
    store: Store
    run_dir: Path
    run_id: str
    mechanism: str
    as_of_ms: int
    purge_grace_seconds: int
    actor: str

    @property
    def purge_after_ms(self) -> int:
        return self.as_of_ms + self.purge_grace_seconds * 1000

    @cached_property
    def snapshot_topics(self) -> dict[str, dict[str, Any]]:
        """The snapshot's topic rows (read once per apply, only when a topic deletion needs its policies)."""
        return {row["topic"]: row for row in read_jsonl(Path(self.run_dir) / "snapshot" / "topics.jsonl")}

    @cached_property
    def broker(self) -> BrokerConfig:
        """The broker settings now (read once per apply; GC re-checks them before deleting)."""
        return self.store.broker_config()


def _apply_topic(
    context: _ApplyContext, topic: str, expected_version: int, actions: list[dict[str, Any]]
) -> dict[str, Any]:
    store, run_id, mechanism, as_of_ms = context.store, context.run_id, context.mechanism, context.as_of_ms
    changes_ledgers = any(a["action"] in LEDGER_ACTIONS for a in actions)
    delete_action = next((a for a in actions if a["action"] == "delete_topic"), None)
    with write_transaction(store.engine) as conn:
        hold = (
            current_hold(conn, topic) if any(a["action"] in HELD_FORBIDDEN_ACTIONS for a in actions) else None
        )
        if hold is not None:
            # Held since the snapshot (the planner and the gate saw no hold): the hold wins, nothing happens.
            why = describe_hold(hold)
            journal(
                conn,
                run_id=run_id,
                mechanism=mechanism,
                topic=topic,
                action="apply",
                status="skipped_held",
                detail={"why": why, "planRows": plan_rows(actions)},
                as_of_ms=as_of_ms,
                actor=context.actor,
            )
            return {"status": "skipped", "why": why}
        busy = _topic_busy(conn, context, topic, delete_action) if delete_action else None
        if busy is not None:
            # Pulsar's TopicBusyException: the topic became active since the snapshot; leave it, report it.
            journal(
                conn,
                run_id=run_id,
                mechanism=mechanism,
                topic=topic,
                action="delete_topic",
                status="skipped_conflict",
                detail={"why": busy},
                as_of_ms=as_of_ms,
                actor=context.actor,
            )
            return {"status": "skipped", "why": busy}
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
                actor=context.actor,
            )
            return {"status": "skipped", "why": why}
        namespace = conn.execute(select(t.topics.c.namespace).where(t.topics.c.name == topic)).scalar_one()
        ledgers_deleted = bytes_deleted = cursors_moved = further = quota_states = refreshed = 0
        skipped_cursors: dict[str, str] = {}
        deleted_ids: list[int] = []
        topic_deleted = False
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
                record_pending_deletion(
                    conn,
                    dict(row._mapping),
                    run_id=run_id,
                    as_of_ms=as_of_ms,
                    purge_after_ms=context.purge_after_ms,
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
                    # The topic had a backlog until this move, so it was active (a GC run would have
                    # stamped it); record that, so inactivity is measured from here.
                    stamp_last_active(conn, topic, as_of_ms)
                elif outcome == "further":
                    further += 1
                else:
                    skipped_cursors[f"{topic} {action['subscription']}"] = outcome
            elif action["action"] == "flag_backlog_quota":
                quota_states += _record_quota_state(conn, topic, action, as_of_ms, run_id)
            elif action["action"] == "refresh_last_active":
                refreshed += stamp_last_active(conn, topic, int(action["lastActiveMs"]))
            elif action["action"] == "delete_topic":
                deleted_ids, bytes_deleted = _delete_topic_rows(conn, context, topic)
                ledgers_deleted, topic_deleted = len(deleted_ids), True
            else:
                raise InputError(f"topic {topic}: action {action['action']!r} is not applied by {mechanism}")
        checkpoint("apply_inside_topic_transaction")
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
                "lastActiveRefreshed": refreshed,
                "topicDeleted": topic_deleted,
                "fromVersion": expected_version,
                **({"reason": delete_action["reason"]} if delete_action else {}),
                "planRows": plan_rows(actions),
            },
            as_of_ms=as_of_ms,
            actor=context.actor,
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
        "lastActiveRefreshed": refreshed,
        "topicDeleted": topic_deleted,
    }


def _topic_busy(conn: Any, context: _ApplyContext, topic: str, action: dict[str, Any]) -> str | None:
    """Why the topic may not be deleted now (None: it may). Reads the current metadata, not the snapshot."""
    row = conn.execute(select(t.topics).where(t.topics.c.name == topic)).first()
    if row is None:
        return None  # reported as "topic no longer exists" by the version check
    if row.producers or row.consumers:
        return f"topic became active: {row.producers} producer(s), {row.consumers} consumer(s) connected"
    if row.last_active_ms != action.get("lastActiveMs"):
        return (
            f"topic became active: lastActive moved from {action.get('lastActiveMs')} to {row.last_active_ms}"
        )
    namespace_policies = conn.execute(
        select(t.namespaces.c.policies).where(t.namespaces.c.name == row.namespace)
    ).scalar_one()
    broker = context.broker
    if not broker["brokerDeleteInactiveTopicsEnabled"]:
        return "brokerDeleteInactiveTopicsEnabled is now false"
    effective = resolve_policies(
        topic,
        json.loads(row.policies),
        row.namespace,
        json.loads(namespace_policies),
        broker,
    )
    if json.dumps(effective.to_json(), sort_keys=True) != context.snapshot_topics[topic]["policies"]:
        return "the topic's effective policies changed since the snapshot"
    mode = effective.inactive_topic_policies.delete_mode
    cursors = list(
        conn.execute(
            select(t.cursors.c.name, t.cursors.c.mark_delete_ledger, t.cursors.c.mark_delete_entry).where(
                t.cursors.c.topic == topic
            )
        )
    )
    if mode == "delete_when_no_subscriptions" and cursors:
        return f"topic became active: subscription(s) {sorted(c.name for c in cursors)[:5]} exist"
    if mode == "delete_when_subscriptions_caught_up":
        last = last_entry(conn, topic)
        behind = [
            c.name for c in cursors if last is not None and (c.mark_delete_ledger, c.mark_delete_entry) < last
        ]
        if behind:
            return f"topic became active: subscription(s) {sorted(behind)[:5]} have a backlog"
    return None


def _rows(conn: Any, table: Any, topic_column: Any, topic: str) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in conn.execute(select(table).where(topic_column == topic))]


def _delete_topic_rows(conn: Any, context: _ApplyContext, topic: str) -> tuple[list[int], int]:
    """Remove the topic's metadata in the caller's transaction; every ledger goes to the pending-deletion log
    and every row is saved in ``deleted_topics`` for restore. No file is touched (purge does that)."""
    topic_row = dict(conn.execute(select(t.topics).where(t.topics.c.name == topic)).one()._mapping)
    cursor_rows = _rows(conn, t.cursors, t.cursors.c.topic, topic)
    quota_rows = _rows(conn, t.backlog_quota_states, t.backlog_quota_states.c.topic, topic)
    ledger_rows = sorted(_rows(conn, t.ledgers, t.ledgers.c.topic, topic), key=lambda r: r["ledger_id"])
    # The topic's compacted ledgers (current, or staged by a compaction that never switched) go the same way.
    compacted_rows = _rows(conn, t.compacted_ledgers, t.compacted_ledgers.c.topic, topic)
    for rows, kind in ((ledger_rows, "ledger"), (compacted_rows, COMPACTED_KIND)):
        for row in rows:
            record_pending_deletion(
                conn,
                row,
                run_id=context.run_id,
                as_of_ms=context.as_of_ms,
                purge_after_ms=context.purge_after_ms,
                kind=kind,
            )
    # Children first (foreign keys).
    conn.execute(t.compacted_ledgers.delete().where(t.compacted_ledgers.c.topic == topic))
    conn.execute(t.backlog_quota_states.delete().where(t.backlog_quota_states.c.topic == topic))
    conn.execute(t.cursors.delete().where(t.cursors.c.topic == topic))
    conn.execute(t.ledgers.delete().where(t.ledgers.c.topic == topic))
    conn.execute(t.topics.delete().where(t.topics.c.name == topic))
    conn.execute(
        insert(t.deleted_topics).values(
            topic=topic,
            kind="topic",
            saved_rows=json.dumps(
                {
                    "topic": topic_row,
                    "cursors": cursor_rows,
                    "quotaStates": quota_rows,
                    "ledgerIds": [r["ledger_id"] for r in ledger_rows],
                    "compactedLedgerIds": [r["ledger_id"] for r in compacted_rows],
                },
                sort_keys=True,
            ),
            run_id=context.run_id,
            deleted_as_of_ms=context.as_of_ms,
            purge_after_ms=context.purge_after_ms,
            status="pending",
        )
    )
    deleted = ledger_rows + compacted_rows
    return [r["ledger_id"] for r in deleted], sum(r["size_bytes"] for r in deleted)


def _partitions_left(conn: Any, name: str) -> list[str]:
    namespace = str(TopicName.parse(name).namespace_name)
    return [
        r.name
        for r in conn.execute(select(t.topics.c.name).where(t.topics.c.namespace == namespace))
        if TopicName.parse(r.name).partitioned_parent == name
    ]


def _delete_partitioned_metadata(context: _ApplyContext, name: str) -> str | None:
    """Delete a partitioned topic's metadata when no partition is left now (else why not)."""
    with write_transaction(context.store.engine) as conn:
        row = conn.execute(select(t.partitioned_topics).where(t.partitioned_topics.c.name == name)).first()
        left = _partitions_left(conn, name)
        why = None
        if row is None:
            why = "partitioned topic metadata no longer exists"
        elif left:
            why = f"partition(s) {left[:5]} still exist"
        elif not context.broker["brokerDeleteInactivePartitionedTopicMetadataEnabled"]:
            why = "brokerDeleteInactivePartitionedTopicMetadataEnabled is now false"
        elif (hold := current_hold(conn, name)) is not None:
            why = describe_hold(hold)
        if why is None:
            conn.execute(t.partitioned_topics.delete().where(t.partitioned_topics.c.name == name))
            conn.execute(
                insert(t.deleted_topics).values(
                    topic=name,
                    kind="partitioned_metadata",
                    saved_rows=json.dumps({"partitionedTopic": dict(row._mapping)}, sort_keys=True),
                    run_id=context.run_id,
                    deleted_as_of_ms=context.as_of_ms,
                    purge_after_ms=context.purge_after_ms,
                    status="pending",
                )
            )
        journal(
            conn,
            run_id=context.run_id,
            mechanism=context.mechanism,
            topic=name,
            action="delete_partitioned_metadata",
            status="applied" if why is None else "skipped_conflict",
            detail={"why": why} if why else {"partitions": row.partitions},
            as_of_ms=context.as_of_ms,
            actor=context.actor,
        )
    return why


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
    topics_purged: list[str] = field(default_factory=list)
    # Due, but a hold covers the topic: kept pending (restorable) until the hold is removed.
    held: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "held": self.held,
            "purged": [f"{t}:{ledger}" for t, ledger in self.purged],
            "topicsPurged": self.topics_purged,
            "bytesPurged": self.bytes_purged,
            "waiting": self.waiting,
            "nextPurgeAfterMs": self.next_purge_after_ms,
            "refused": self.refused,
        }


def purge(store: Store, *, as_of_ms: int, run_id: str, actor: str | None = None) -> PurgeResult:
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
            # A ledger back in a topic's ledger list (restored), or a compacted ledger in use again: live data.
            live_table = t.compacted_ledgers if row.kind == COMPACTED_KIND else t.ledgers
            live = conn.execute(
                select(live_table.c.ledger_id).where(
                    and_(live_table.c.topic == row.topic, live_table.c.ledger_id == row.ledger_id)
                )
            ).first()
            if live is not None:
                result.refused.append(f"{row.topic}:{row.ledger_id}")
                continue
            if current_hold(conn, row.topic) is not None:
                result.held.append(f"{row.topic}:{row.ledger_id}")
                continue
        store.remove_ledger_dir(row.path)
        store.prune_empty_parents(row.path)
        checkpoint("purge_after_file_removed")
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
    if result.purged or result.refused or result.topics_purged or result.held:
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


def restore(
    store: Store, topic: str, *, ledger_id: int | None = None, as_of_ms: int, run_id: str
) -> list[int]:
    """Put a topic's pending-deleted ledgers (or one of them) back. Cursors fast-forwarded past them stay.
    A topic deleted as a whole (inactive-topic GC) comes back whole: see :func:`restore_topic`."""
    with write_transaction(store.engine) as conn:
        exists = conn.execute(select(t.topics.c.name).where(t.topics.c.name == topic)).first() is not None
    if not exists:
        if ledger_id is not None:
            raise InputError(f"topic {topic} does not exist in store {store.root}; restore it whole first")
        return restore_topic(store, topic, as_of_ms=as_of_ms, run_id=run_id)
    with write_transaction(store.engine) as conn:
        if conn.execute(select(t.topics.c.name).where(t.topics.c.name == topic)).first() is None:
            raise InputError(f"topic {topic} does not exist in store {store.root}")
        # Ledgers of an earlier topic of the same name that GC deleted belong to that topic, not this one.
        predecessor_runs = select(t.deleted_topics.c.run_id).where(t.deleted_topics.c.topic == topic)
        query = select(t.pending_deletions).where(
            and_(
                t.pending_deletions.c.topic == topic,
                t.pending_deletions.c.status == "pending",
                t.pending_deletions.c.kind == "ledger",  # a replaced compacted ledger is not put back
                t.pending_deletions.c.run_id.not_in(predecessor_runs),
            )
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


def restore_topic(store: Store, name: str, *, as_of_ms: int, run_id: str) -> list[int]:
    """Bring back a topic (or partitioned-topic metadata) deleted by GC, while it is within its grace period:
    the topic row with its policies, its cursors and quota states, its ledgers (files must still exist), and
    its partitioned metadata if that was deleted with it. Returns the restored ledger ids."""
    with write_transaction(store.engine) as conn:
        record = conn.execute(
            select(t.deleted_topics)
            .where(t.deleted_topics.c.topic == name)
            .order_by(t.deleted_topics.c.id.desc())
            .limit(1)
        ).first()
        if record is None:
            raise InputError(f"topic {name} does not exist in store {store.root} and was never deleted by GC")
        if record.status != "pending":
            raise InputError(
                f"topic {name} was deleted by run {record.run_id} and is {record.status} "
                f"(as of {format_ms(record.finished_as_of_ms)}); it cannot be restored"
            )
        saved = json.loads(record.saved_rows)
        restored: list[int] = []
        if record.kind == "partitioned_metadata":
            _restore_partitioned_metadata(conn, record, saved, as_of_ms)
        else:
            topic_row = dict(saved["topic"])
            namespace = topic_row["namespace"]
            if (
                conn.execute(select(t.namespaces.c.name).where(t.namespaces.c.name == namespace)).first()
                is None
            ):
                raise InputError(f"topic {name}: namespace {namespace} no longer exists; cannot restore")
            pending = list(
                conn.execute(
                    select(t.pending_deletions).where(
                        and_(
                            t.pending_deletions.c.topic == name,
                            t.pending_deletions.c.run_id == record.run_id,
                            t.pending_deletions.c.status == "pending",
                        )
                    )
                )
            )
            wanted = len(saved["ledgerIds"]) + len(saved.get("compactedLedgerIds", []))
            if len(pending) != wanted:
                raise InputError(
                    f"topic {name}: {wanted - len(pending)} of its ledgers were purged already; cannot restore"
                )
            for row in pending:
                if json.loads(row.ledger_row).get("entries_stored") and not (store.root / row.path).is_dir():
                    raise InputError(
                        f"topic {name} ledger {row.ledger_id}: files at {row.path} are gone; cannot restore"
                    )
            parent = TopicName.parse(name).partitioned_parent
            if parent is not None:
                metadata = conn.execute(
                    select(t.deleted_topics).where(
                        and_(
                            t.deleted_topics.c.topic == parent,
                            t.deleted_topics.c.run_id == record.run_id,
                            t.deleted_topics.c.status == "pending",
                        )
                    )
                ).first()
                if metadata is not None:
                    _restore_partitioned_metadata(conn, metadata, json.loads(metadata.saved_rows), as_of_ms)
            topic_row["version"] = int(topic_row["version"]) + 1  # versions only move forward
            conn.execute(insert(t.topics).values(**topic_row))
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
        )
    return sorted(restored)


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
