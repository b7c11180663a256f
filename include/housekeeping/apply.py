"""The one apply engine: only a checked plan changes the store, metadata first, each topic in one transaction.

:class:`ApplyRun` is the preamble every apply shares, the Python apply here and compaction's Spark apply
(``spark_apps/compaction/apply.py``): the gate passed this plan byte for byte (digest), the run was planned on this
store, the plan holds only its mechanism's actions (the registry), the run is journaled as started once and the
topics it already applied are known (a retry skips them), and :meth:`ApplyRun.commit` runs one topic's change in
one metadata transaction that first re-reads the holds (a hold added after the snapshot wins) and journals the
outcome.

The Python apply (:func:`apply_plan`), per topic: when the plan changes the topic's ledger list, compare-and-set
the topic version recorded in the snapshot (a topic changed since is skipped and reported, never overwritten);
remove the planned ledgers from the ledger list and record each in the pending-deletion log with its purge time;
move the planned cursors, each compare-and-set on its own position (only forward, only while it is still between
the planned start and target: a consumer's newer ack is kept); record backlog-quota states (never over a later
measurement); delete inactive topics after re-checking them against the current metadata (Pulsar's
``delete(failIfHasSubscriptions, failIfHasBacklogs, closeIfClientsConnected=false)``), keeping every row in
``deleted_topics`` for restore. No file is touched: purge (``housekeeping.purge``) does that after the grace
period.

Pulsar updates the ledger list and then deletes BookKeeper ledgers asynchronously; a crash between leaves
orphans (PIP-186). Here the ledger-list change and the pending-deletion record commit together, so there is no
state in which a file is unknown to the metadata.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from sqlalchemy import and_, insert, not_, or_, select, update

from housekeeping import metadata_schema as t
from housekeeping.actor import current_actor
from housekeeping.clients import last_entry, stamp_last_active
from housekeeping.compacted_ledgers import COMPACTED_KIND
from housekeeping.contract import ACTIONS, RunDir, read_json, read_run_info, write_json
from housekeeping.errors import InputError
from housekeeping.faults import checkpoint
from housekeeping.gate import require_passed_gate
from housekeeping.holds import HELD_FORBIDDEN_ACTIONS, current_hold
from housekeeping.holds import describe as describe_hold
from housekeeping.journal import begin_run, finish_run, journal, plan_rows
from housekeeping.manifest import parse_position
from housekeeping.mechanism import MechanismSpec
from housekeeping.names import TopicName
from housekeeping.plan import read_table
from housekeeping.policies import BrokerConfig, resolve_policies
from housekeeping.registry import mechanism_spec
from housekeeping.store import Store, record_pending_deletion, write_transaction

LEDGER_ACTIONS = ("delete_ledger", "delete_topic", "rewrite_compacted")
# Applied after every topic of the plan (a partitioned topic's metadata goes after its partitions).
METADATA_ACTIONS = ("delete_partitioned_metadata",)


@dataclass
class TopicOutcome:
    """What one topic's transaction did: ``status`` applied, skipped_conflict or skipped_held, ``why`` when
    skipped, the journal row's ``action`` and ``detail`` (not journaled when ``journaled`` is false: a step that
    only prepares, as compaction's staging), and ``facts`` the caller adds up."""

    status: str
    why: str | None = None
    action: str = "apply"
    detail: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    journaled: bool = True

    @property
    def applied(self) -> bool:
        return self.status == "applied"


@dataclass
class ApplyRun:
    """One apply of a gate-checked plan (see the module docstring)."""

    store: Store
    run: RunDir
    info: dict[str, Any]
    spec: MechanismSpec
    run_id: str
    purge_grace_seconds: int
    actor: str
    done: set[str] = field(default_factory=set)

    @classmethod
    def open(
        cls,
        store: Store,
        run_dir: str | Path,
        *,
        purge_grace_seconds: int,
        detail: dict[str, Any] | None = None,
        actions: list[dict[str, Any]] | None = None,
    ) -> ApplyRun:
        """``actions``: the plan's actions table when the caller has read it already (read once: at 100,000
        topics a trim plan's rows are a few hundred MiB of Python objects)."""
        if purge_grace_seconds < 0:
            raise InputError(f"purge grace period {purge_grace_seconds} s must be >= 0")
        run = RunDir(run_dir)
        gate = require_passed_gate(run.path)
        info = read_run_info(run)
        if Path(info["store"]).resolve() != store.root:
            raise InputError(f"run {run} was planned on store {info['store']}, not on {store.root}")
        spec = mechanism_spec(info["mechanism"])
        # Journal key = run + the validated plan's digest: a retried apply of the same plan is a no-op, while a
        # re-snapshotted (different) plan of the same Airflow run is applied on its own merits.
        run_id = f"{info['runId']}@{gate['planDigest'][:16]}"
        actor = str(info.get("actor") or current_actor())
        applying = cls(store, run, info, spec, run_id, purge_grace_seconds, actor)
        if actions is not None:
            applying.__dict__["actions"] = actions  # the cached property, already read
        for action in applying.actions:
            if action["action"] not in spec.actions:
                raise InputError(
                    f"plan in {run} has a {action['action']} action, which {spec.name} never plans "
                    f"(its actions: {', '.join(spec.actions)})"
                )
        applying.done = begin_run(
            store,
            run_id=run_id,
            mechanism=spec.name,
            as_of_ms=applying.as_of_ms,
            actor=actor,
            detail=detail if detail is not None else {"actions": len(applying.actions)},
        )
        return applying

    @property
    def mechanism(self) -> str:
        return self.spec.name

    @property
    def as_of_ms(self) -> int:
        return int(self.info["asOfMs"])

    @property
    def purge_after_ms(self) -> int:
        return self.as_of_ms + self.purge_grace_seconds * 1000

    @cached_property
    def actions(self) -> list[dict[str, Any]]:
        return read_table(self.run.path, ACTIONS.name)

    @cached_property
    def snapshot_topics(self) -> dict[str, dict[str, Any]]:
        """The snapshot's topic rows (read once per apply, only when a topic deletion needs its policies)."""
        from housekeeping.contract import TOPICS, read_snapshot_table

        return {row["topic"]: row for row in read_snapshot_table(self.run, TOPICS)}

    @cached_property
    def broker(self) -> BrokerConfig:
        """The broker settings now (read once per apply; GC re-checks them before deleting)."""
        return self.store.broker_config()

    def journal(
        self, conn: Any, *, topic: str | None, action: str, status: str, detail: dict[str, Any]
    ) -> None:
        journal(
            conn,
            run_id=self.run_id,
            mechanism=self.mechanism,
            topic=topic,
            action=action,
            status=status,
            detail=detail,
            as_of_ms=self.as_of_ms,
            actor=self.actor,
        )

    def commit(
        self,
        topic: str,
        actions: list[dict[str, Any]],
        change: Callable[[Any], TopicOutcome],
        *,
        held_action: str = "apply",
    ) -> TopicOutcome:
        """One topic's change in one metadata transaction. When the actions delete or move anything, the holds are
        read again first: a hold that covers the topic now wins (``skipped_held``; the planner and the gate saw
        none). Otherwise ``change(conn)`` decides; its outcome is journaled in the same transaction."""
        with write_transaction(self.store.engine) as conn:
            guarded = any(a["action"] in HELD_FORBIDDEN_ACTIONS for a in actions)
            hold = current_hold(conn, topic) if guarded else None
            if hold is not None:
                why = describe_hold(hold)
                outcome = TopicOutcome(
                    "skipped_held", why, held_action, {"why": why, "planRows": plan_rows(actions)}
                )
            else:
                outcome = change(conn)
            if outcome.journaled:
                self.journal(
                    conn, topic=topic, action=outcome.action, status=outcome.status, detail=outcome.detail
                )
        return outcome

    def finish(self, result: dict[str, Any]) -> dict[str, Any]:
        """Journal the run as finished with its result, and write ``apply/result.json``."""
        finish_run(
            self.store,
            run_id=self.run_id,
            mechanism=self.mechanism,
            as_of_ms=self.as_of_ms,
            actor=self.actor,
            detail=result,
        )
        write_json(self.run.apply_result, result)
        return result


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

    def add(self, topic: str, facts: dict[str, Any]) -> None:
        self.applied_topics.append(topic)
        self.ledgers_deleted += facts["ledgers"]
        self.bytes_deleted += facts["bytes"]
        self.cursors_moved += facts["cursors"]
        self.cursors_already_further += facts["further"]
        self.cursors_skipped.update(facts["skippedCursors"])
        self.quota_states_recorded += facts["quotaStates"]
        self.last_active_refreshed += facts["lastActiveRefreshed"]
        if facts["topicDeleted"]:
            self.topics_deleted.append(topic)
        per_ns = self.per_namespace.setdefault(facts["namespace"], {"ledgers": 0, "bytes": 0, "topics": 0})
        per_ns["ledgers"] += facts["ledgers"]
        per_ns["bytes"] += facts["bytes"]
        per_ns["topics"] += int(facts["topicDeleted"])


def apply_plan(store: Store, run_dir: Path, *, purge_grace_seconds: int) -> ApplyResult:
    """The Python apply of a checked plan (every mechanism whose spec has no apply app)."""
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    metadata_actions: list[dict[str, Any]] = []
    run = RunDir(run_dir)
    actions = read_table(run.path, ACTIONS.name)
    for action in actions:
        if action["action"] in METADATA_ACTIONS:
            metadata_actions.append(action)
        else:
            by_topic[action["topic"]].append(action)
    context = ApplyRun.open(
        store,
        run_dir,
        purge_grace_seconds=purge_grace_seconds,
        detail={
            "topics": len(by_topic),
            "actions": len(actions),
        },
        actions=actions,
    )
    versions: dict[str, int] = context.info["topicVersions"]
    result = ApplyResult(context.run_id)
    for topic in sorted(by_topic):
        if topic in context.done:
            result.already_applied_topics.append(topic)
            continue
        if topic not in versions:
            raise InputError(f"plan in {run_dir} names topic {topic}, which is not in its snapshot")
        actions = by_topic[topic]
        outcome = context.commit(
            topic, actions, lambda conn, t=topic, a=actions: _apply_topic(conn, context, t, versions[t], a)
        )
        checkpoint("apply_after_topic_commit")
        if outcome.applied:
            result.add(topic, outcome.facts)
        else:
            result.skipped_topics[topic] = str(outcome.why)
    for action in metadata_actions:
        name = action["topic"]
        if name in context.done:
            result.already_applied_topics.append(name)
            continue
        outcome = context.commit(
            name,
            [action],
            lambda conn, n=name: _delete_partitioned_metadata(conn, context, n),
            held_action="delete_partitioned_metadata",
        )
        if outcome.applied:
            result.partitioned_metadata_deleted.append(name)
        else:
            result.skipped_topics[name] = str(outcome.why)
    context.finish(result.to_json())
    return result


def read_apply_result(run_dir: str | Path) -> dict[str, Any] | None:
    return read_json(RunDir(run_dir).apply_result)


def _apply_topic(
    conn: Any, context: ApplyRun, topic: str, expected_version: int, actions: list[dict[str, Any]]
) -> TopicOutcome:
    """One topic's actions, in the caller's transaction (``ApplyRun.commit``)."""
    changes_ledgers = any(a["action"] in LEDGER_ACTIONS for a in actions)
    delete_action = next((a for a in actions if a["action"] == "delete_topic"), None)
    busy = _topic_busy(conn, context, topic, delete_action) if delete_action else None
    if busy is not None:
        # Pulsar's TopicBusyException: the topic became active since the snapshot; leave it, report it.
        return TopicOutcome("skipped_conflict", busy, "delete_topic", {"why": busy})
    if changes_ledgers:
        bumped = conn.execute(
            update(t.topics)
            .where(and_(t.topics.c.name == topic, t.topics.c.version == expected_version))
            .values(version=t.topics.c.version + 1)
        ).rowcount
    else:
        # Cursor moves and quota flags do not change the ledger list: each cursor is compare-and-set on its own
        # position below, so a concurrent ack or ledger roll does not void the topic's plan.
        bumped = len(conn.execute(select(t.topics.c.name).where(t.topics.c.name == topic)).all())
    if bumped != 1:
        row = conn.execute(select(t.topics.c.version).where(t.topics.c.name == topic)).first()
        why = (
            f"topic changed since the snapshot (version {expected_version} -> {row.version})"
            if row
            else "topic no longer exists"
        )
        return TopicOutcome("skipped_conflict", why, "apply", {"why": why})
    namespace = conn.execute(select(t.topics.c.namespace).where(t.topics.c.name == topic)).scalar_one()
    ledgers_deleted = bytes_deleted = cursors_moved = further = quota_states = refreshed = 0
    skipped_cursors: dict[str, str] = {}
    deleted_ids: list[int] = []
    topic_deleted = False
    for action in actions:
        if action["action"] == "delete_ledger":
            ledger_id = int(action["ledgerId"])
            row = conn.execute(
                select(t.ledgers).where(and_(t.ledgers.c.topic == topic, t.ledgers.c.ledger_id == ledger_id))
            ).first()
            if row is None:
                # Cannot happen with a matching version; refuse rather than guess.
                raise InputError(f"topic {topic}: planned ledger {ledger_id} is not in the metadata")
            conn.execute(
                t.ledgers.delete().where(and_(t.ledgers.c.topic == topic, t.ledgers.c.ledger_id == ledger_id))
            )
            record_pending_deletion(
                conn,
                dict(row._mapping),
                run_id=context.run_id,
                as_of_ms=context.as_of_ms,
                purge_after_ms=context.purge_after_ms,
            )
            ledgers_deleted += 1
            bytes_deleted += row.size_bytes
            deleted_ids.append(ledger_id)
        elif action["action"] == "move_cursor":
            where = f"topic {topic} cursor {action['subscription']}"
            from_l, from_e = parse_position(action["from"], where)
            to_l, to_e = parse_position(action["to"], where)
            if (to_l, to_e) <= (from_l, from_e):
                raise InputError(f"{where}: refusing to move backward")
            outcome = _move_cursor(conn, topic, action["subscription"], (from_l, from_e), (to_l, to_e))
            if outcome == "moved":
                cursors_moved += 1
                # The topic had a backlog until this move, so it was active (a GC run would have stamped it);
                # record that, so inactivity is measured from here.
                stamp_last_active(conn, topic, context.as_of_ms)
            elif outcome == "further":
                further += 1
            else:
                skipped_cursors[f"{topic} {action['subscription']}"] = outcome
        elif action["action"] == "flag_backlog_quota":
            quota_states += _record_quota_state(conn, topic, action, context.as_of_ms, context.run_id)
        elif action["action"] == "refresh_last_active":
            refreshed += stamp_last_active(conn, topic, int(action["lastActiveMs"]))
        elif action["action"] == "delete_topic":
            deleted_ids, bytes_deleted = _delete_topic_rows(conn, context, topic)
            ledgers_deleted, topic_deleted = len(deleted_ids), True
        else:
            raise InputError(f"topic {topic}: action {action['action']!r} is not applied by the Python apply")
    checkpoint("apply_inside_topic_transaction")
    detail = {
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
    }
    facts = {
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
    return TopicOutcome("applied", None, "apply", detail, facts)


def _topic_busy(conn: Any, context: ApplyRun, topic: str, action: dict[str, Any]) -> str | None:
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


def _delete_topic_rows(conn: Any, context: ApplyRun, topic: str) -> tuple[list[int], int]:
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


def _delete_partitioned_metadata(conn: Any, context: ApplyRun, name: str) -> TopicOutcome:
    """Delete a partitioned topic's metadata when no partition is left now (in the caller's transaction)."""
    row = conn.execute(select(t.partitioned_topics).where(t.partitioned_topics.c.name == name)).first()
    left = _partitions_left(conn, name)
    why = None
    if row is None:
        why = "partitioned topic metadata no longer exists"
    elif left:
        why = f"partition(s) {left[:5]} still exist"
    elif not context.broker["brokerDeleteInactivePartitionedTopicMetadataEnabled"]:
        why = "brokerDeleteInactivePartitionedTopicMetadataEnabled is now false"
    if why is not None:
        return TopicOutcome("skipped_conflict", why, "delete_partitioned_metadata", {"why": why})
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
    return TopicOutcome("applied", None, "delete_partitioned_metadata", {"partitions": row.partitions})


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
