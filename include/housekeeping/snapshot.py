"""Snapshot: one consistent read of the metadata, exported as JSON-lines files for the Spark apps.

Files under ``<run_dir>/snapshot/`` (``housekeeping.contract``: paths and columns; a mechanism's spec names the
tables beyond topics, ledgers, cursors, namespaces and holds that it reads, and only those are written):

- ``run.json``       run facts: runId, mechanism, asOfMs, scope, blast-radius limits (share of a namespace's
                     bytes; for GC, share of its topics), topic versions, broker settings
- ``topics.jsonl``   one row per in-scope topic with its *effective* policies (resolved here once)
- ``ledgers.jsonl``  the in-scope topics' ledgers
- ``cursors.jsonl``  the in-scope topics' cursors
- ``quota_states.jsonl`` the in-scope topics' recorded backlog-quota states
- ``namespaces.jsonl`` stored bytes and topic count of every namespace touched by the scope
- ``partitioned_topics.jsonl`` partitioned-topic metadata of those namespaces, with how many partitions exist
- ``compacted_ledgers.jsonl`` the in-scope topics' current compacted ledgers (topic compaction)

The planner and the gate both read these files, never the live database, so the plan and its check see
the same state; apply then compare-and-sets on the topic versions recorded here.
"""

from __future__ import annotations

import fnmatch
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from housekeeping import contract
from housekeeping import metadata_schema as t
from housekeeping.actor import current_actor
from housekeeping.errors import InputError
from housekeeping.faults import checkpoint
from housekeeping.holds import describe as describe_hold
from housekeeping.holds import hold_for, load_holds
from housekeeping.names import TopicName
from housekeeping.policies import BrokerConfig, RetentionPolicy, resolve_policies
from housekeeping.registry import mechanism_spec
from housekeeping.store import Store, read_transaction
from housekeeping.timeutil import format_ms

if TYPE_CHECKING:
    from housekeeping.policy_overlay import PolicyOverlay


def parse_scope(scope: str | Sequence[str] | None) -> list[str]:
    if scope is None:
        return []
    items = scope.split(",") if isinstance(scope, str) else list(scope)
    return [item.strip() for item in items if item and item.strip() and item.strip() != "*"]


def in_scope(topic: str, patterns: Sequence[str]) -> bool:
    """Patterns (shell globs): ``persistent://...`` matches topics, ``tenant/ns`` namespaces, ``tenant`` tenants."""
    if not patterns:
        return True
    parsed = TopicName.parse(topic)
    for pattern in patterns:
        if "://" in pattern:
            subject = topic
        elif "/" in pattern:
            subject = f"{parsed.tenant}/{parsed.namespace}"
        else:
            subject = parsed.tenant
        if fnmatch.fnmatchcase(subject, pattern):
            return True
    return False


@dataclass(frozen=True)
class SnapshotInfo:
    run_dir: Path
    run_id: str
    mechanism: str
    as_of_ms: int
    topic_count: int

    @property
    def path(self) -> Path:
        return self.run_dir / "snapshot"


@dataclass(frozen=True)
class StoreState:
    """One consistent read of the metadata a snapshot is made of. Several snapshots of one read (a policy
    sweep's points) differ only by the policies resolved into them."""

    broker: BrokerConfig
    namespaces: dict[str, dict[str, Any]]
    topic_rows: list[Any]
    ledger_rows: list[Any]
    cursor_rows: list[Any]
    partitioned_rows: list[Any]
    compacted_rows: list[Any]
    holds: dict[str, Any]
    quota_rows: list[Any]
    erasure_rows: list[Any] = field(default_factory=list)  # open requests (pending, held or failed)
    pending_rows: list[Any] = field(default_factory=list)  # files waiting for purge


def read_store_state(store: Store) -> StoreState:
    broker = store.broker_config()
    with read_transaction(store.engine) as conn:
        namespaces = {r.name: json.loads(r.policies) for r in conn.execute(select(t.namespaces))}
        topic_rows = list(conn.execute(select(t.topics).order_by(t.topics.c.name)))
        ledger_rows = list(conn.execute(select(t.ledgers).order_by(t.ledgers.c.topic, t.ledgers.c.ledger_id)))
        cursor_rows = list(conn.execute(select(t.cursors).order_by(t.cursors.c.topic, t.cursors.c.name)))
        partitioned_rows = list(
            conn.execute(select(t.partitioned_topics).order_by(t.partitioned_topics.c.name))
        )
        compacted_rows = list(
            conn.execute(
                select(t.compacted_ledgers)
                .where(t.compacted_ledgers.c.status == "current")
                .order_by(t.compacted_ledgers.c.topic)
            )
        )
        holds = load_holds(conn)
        quota_rows = list(
            conn.execute(
                select(t.backlog_quota_states).order_by(
                    t.backlog_quota_states.c.topic, t.backlog_quota_states.c.quota_type
                )
            )
        )
        erasure_rows = list(
            conn.execute(
                select(t.erasure_requests)
                .where(t.erasure_requests.c.state.in_(("pending", "held", "failed")))
                .order_by(t.erasure_requests.c.id)
            )
        )
        pending_rows = list(
            conn.execute(
                select(t.pending_deletions)
                .where(t.pending_deletions.c.status == "pending")
                .order_by(t.pending_deletions.c.id)
            )
        )
    return StoreState(
        broker,
        namespaces,
        topic_rows,
        ledger_rows,
        cursor_rows,
        partitioned_rows,
        compacted_rows,
        holds,
        quota_rows,
        erasure_rows,
        pending_rows,
    )


def take_snapshot(
    store: Store,
    *,
    mechanism: str,
    run_id: str,
    as_of_ms: int,
    scope: str | Sequence[str] | None = None,
    max_deleted_share: float = 0.9,
    max_deleted_topic_share: float = 0.5,
    compact_topics: Sequence[str] = (),
    schedule_interval_ms: int | None = None,
    run_dir: Path | None = None,
    actor: str | None = None,
    policy_overlay: PolicyOverlay | None = None,
    state: StoreState | None = None,
    tables: Sequence[str] | None = None,
) -> SnapshotInfo:
    """One consistent read of the store into a run directory. ``policy_overlay`` (a what-if) resolves the
    policies as if it had been applied; the store itself is only read. ``state``: an earlier read to write
    again (with another overlay) instead of reading the store. ``tables``: write only these (a sweep's later
    points differ from the first only in their topics); default, every table the mechanism reads."""
    tables = tuple(tables) if tables is not None else mechanism_spec(mechanism).all_snapshot_tables
    patterns = parse_scope(scope)
    for name in compact_topics:
        TopicName.parse(name)
    state = state or read_store_state(store)
    broker = state.broker if policy_overlay is None else policy_overlay.broker_config(state.broker)
    namespaces, topic_rows, ledger_rows = state.namespaces, state.topic_rows, state.ledger_rows
    cursor_rows, partitioned_rows, compacted_rows = (
        state.cursor_rows,
        state.partitioned_rows,
        state.compacted_rows,
    )
    holds, quota_rows = state.holds, state.quota_rows

    if not topic_rows:
        raise InputError(f"store {store.root} has no topics")
    selected = {row.name for row in topic_rows if in_scope(row.name, patterns)}
    if not selected:
        raise InputError(f"scope {','.join(patterns)!r} matches no topic in store {store.root}")
    known = {row.name for row in topic_rows}
    for name in compact_topics:
        if name not in known:
            raise InputError(f"topic {name} named for compaction does not exist in store {store.root}")
        if name not in selected:
            raise InputError(f"topic {name} named for compaction is outside the run's scope {patterns}")

    topics_out: list[dict[str, Any]] = []
    versions: dict[str, int] = {}
    for row in topic_rows:
        if row.name not in selected:
            continue
        parsed = TopicName.parse(row.name)
        topic_policies, namespace_policies = json.loads(row.policies), namespaces[row.namespace]
        if policy_overlay is not None:
            topic_policies = policy_overlay.topic_policies(row.name, topic_policies)
            namespace_policies = policy_overlay.namespace_policies(row.namespace, namespace_policies)
        effective = resolve_policies(row.name, topic_policies, row.namespace, namespace_policies, broker)
        versions[row.name] = row.version
        compacted = effective.compacted_retention or RetentionPolicy(-1, -1)
        hold = hold_for(row.name, holds)
        topics_out.append(
            {
                "topic": row.name,
                "namespace": row.namespace,
                "tenant": parsed.tenant,
                "isSystemTopic": parsed.is_system_topic,
                "version": row.version,
                "producers": row.producers,
                "consumers": row.consumers,
                "lastActiveMs": row.last_active_ms,
                "retentionTimeMs": effective.retention.time_ms,
                "retentionSizeBytes": effective.retention.size_bytes,
                "retentionSource": effective.retention_source,
                "retentionDescription": effective.retention.describe(),
                "messageTtlSeconds": effective.message_ttl_seconds,
                "messageTtlSource": effective.message_ttl_source,
                # Pulsar reads limitSize for destination_storage and limitTime for message_age.
                "sizeQuotaLimitBytes": effective.backlog_quotas["destination_storage"].limit_size,
                "sizeQuotaPolicy": effective.backlog_quotas["destination_storage"].policy,
                "timeQuotaLimitSeconds": effective.backlog_quotas["message_age"].limit_time,
                "timeQuotaPolicy": effective.backlog_quotas["message_age"].policy,
                # Inactive-topic GC (PersistentTopic#checkGC) and the partitioned topic a partition belongs to.
                "inactiveDeleteMode": effective.inactive_topic_policies.delete_mode,
                "maxInactiveSeconds": effective.inactive_topic_policies.max_inactive_seconds,
                "deleteWhileInactive": effective.inactive_topic_policies.delete_while_inactive,
                "inactivePolicySource": effective.inactive_topic_policies_source,
                "partitionedTopic": parsed.partitioned_parent,
                # Topic compaction: threshold (0 = off), compacted-ledger retention (-1 = keep, also when
                # unset as in Pulsar), tombstone grace.
                "compactionThresholdBytes": effective.compaction_threshold_bytes,
                "compactedRetentionTimeMs": compacted.time_ms,
                "compactedRetentionSizeBytes": compacted.size_bytes,
                "compactedRetentionDescription": (
                    compacted.describe()
                    if effective.compacted_retention is not None
                    else "not set (keep all)"
                ),
                "tombstoneGraceMs": effective.compacted_tombstone_grace_seconds * 1000,
                # `housekeeping hold`: every planner keeps a held topic whole (kind "held").
                "heldBy": None if hold is None else describe_hold(hold),
                "policies": json.dumps(effective.to_json(), sort_keys=True),
            }
        )

    touched_namespaces = {row.namespace for row in topic_rows if row.name in selected}
    topic_namespace = {row.name: row.namespace for row in topic_rows}
    namespace_bytes: dict[str, int] = dict.fromkeys(touched_namespaces, 0)
    namespace_topics: dict[str, int] = dict.fromkeys(touched_namespaces, 0)
    for row in topic_rows:
        if row.namespace in touched_namespaces:
            namespace_topics[row.namespace] += 1
    for row in ledger_rows:
        namespace = topic_namespace[row.topic]
        if namespace in touched_namespaces:
            namespace_bytes[namespace] += row.size_bytes

    run = contract.RunDir(run_dir or store.run_dir(mechanism, run_id))
    run.snapshot_dir.mkdir(parents=True, exist_ok=True)
    # Each table's rows, built only when the mechanism reads the table, and as they are written (generators).
    rows_of: dict[str, Any] = {"topics": lambda: topics_out}
    rows_of["ledgers"] = lambda: (
        {
            "topic": r.topic,
            "ledgerId": r.ledger_id,
            "entries": r.entries,
            "size": r.size_bytes,
            "closedAtMs": r.closed_at_ms,
            "minEntryTsMs": r.min_entry_ts_ms,
            "maxEntryTsMs": r.max_entry_ts_ms,
            "entriesStored": bool(r.entries_stored),
        }
        for r in ledger_rows
        if r.topic in selected
    )
    rows_of["cursors"] = lambda: (
        {
            "topic": r.topic,
            "name": r.name,
            "durable": bool(r.durable),
            "markDeleteLedger": r.mark_delete_ledger,
            "markDeleteEntry": r.mark_delete_entry,
            "lastActiveMs": r.last_active_ms,
            "consumers": r.consumers,
        }
        for r in cursor_rows
        if r.topic in selected
    )
    rows_of["quota_states"] = lambda: (
        {
            "topic": r.topic,
            "quotaType": r.quota_type,
            "policy": r.policy,
            "exceeded": bool(r.exceeded),
            "limitValue": r.limit_value,
            "measuredValue": r.measured_value,
            "exceededSinceMs": r.exceeded_since_ms,
            "asOfMs": r.as_of_ms,
        }
        for r in quota_rows
        if r.topic in selected
    )
    # Partitioned-topic metadata of the namespaces in scope, with how many of its partitions exist as topics
    # (in the whole store, not only in scope: the metadata may only go when no partition is left).
    existing_partitions: dict[str, int] = {}
    for row in topic_rows:
        parent = TopicName.parse(row.name).partitioned_parent
        if parent is not None:
            existing_partitions[parent] = existing_partitions.get(parent, 0) + 1
    rows_of["partitioned_topics"] = lambda: (
        {
            "partitionedTopic": r.name,
            "namespace": r.namespace,
            "partitions": r.partitions,
            "existingPartitions": existing_partitions.get(r.name, 0),
            "heldBy": None if (h := hold_for(r.name, holds)) is None else describe_hold(h),
        }
        for r in partitioned_rows
        if r.namespace in touched_namespaces
    )
    rows_of["compacted_ledgers"] = lambda: (
        {
            "topic": r.topic,
            "ledgerId": r.ledger_id,
            "horizonLedger": r.horizon_ledger,
            "horizonEntry": r.horizon_entry,
            "entries": r.entries,
            "size": r.size_bytes,
            "minEntryTsMs": r.min_entry_ts_ms,
            "maxEntryTsMs": r.max_entry_ts_ms,
            "tombstones": r.tombstones,
            "oldestTombstoneTsMs": r.oldest_tombstone_ts_ms,
            "compactedAsOfMs": r.compacted_as_of_ms,
        }
        for r in compacted_rows
        if r.topic in selected
    )
    # Key erasure: every open request (the planner decides which count at the as-of and which topics they name),
    # and the files waiting for purge of the topics in scope or of deleted topics in the namespaces in scope.
    rows_of["erasure_requests"] = lambda: (
        {
            "requestId": r.id,
            "keyDigest": r.key_sha256,
            "scope": r.scope,
            "target": r.target,
            "requestedAtMs": r.requested_at_ms,
        }
        for r in state.erasure_rows
    )
    rows_of["pending_files"] = lambda: (
        {
            "pendingId": r.id,
            "topic": r.topic,
            "ledgerId": r.ledger_id,
            "path": r.path,
            "kind": r.kind,
            "size": r.size_bytes,
            "purgeAfterMs": r.purge_after_ms,
            "erasedBy": r.erased_by,
        }
        for r in state.pending_rows
        if r.topic in selected
        or (
            r.topic not in topic_namespace
            and str(TopicName.parse(r.topic).namespace_name) in touched_namespaces
        )
    )
    # The raw holds, for the gate to re-derive on its own which planned actions they cover.
    rows_of["holds"] = lambda: [hold.to_json() for _, hold in sorted(holds.items())]
    rows_of["namespaces"] = lambda: [
        {"namespace": name, "storedBytes": namespace_bytes[name], "topicCount": namespace_topics[name]}
        for name in sorted(touched_namespaces)
    ]
    for name in tables:
        contract.write_jsonl(run.snapshot_table(name), contract.SNAPSHOT_TABLES[name], rows_of[name]())
    info = {
        "runId": run_id,
        "mechanism": mechanism,
        "asOfMs": as_of_ms,
        "asOf": format_ms(as_of_ms),
        "scope": patterns,
        "maxDeletedShare": max_deleted_share,
        "maxDeletedTopicShare": max_deleted_topic_share,
        # Topics the run's params name for compaction whatever their backlog (Pulsar's `topics compact`).
        "compactTopics": sorted(set(compact_topics)),
        # The DAG's data interval (time between scheduled runs), for compaction's apache/pulsar#11211 warning.
        "scheduleIntervalMs": schedule_interval_ms,
        "store": str(store.root),
        "metadata": store.safe_url,
        "topicVersions": versions,
        # The broker settings the cursor mechanisms read (all of them, so a plan can be re-derived).
        "broker": dict(broker.settings),
        "takenAtWallClockMs": int(time.time() * 1000),  # audit only; no rule reads it
        # Who started the run (journaled by apply): the Airflow DAG run, or the CLI user.
        "actor": actor or current_actor(),
        # The snapshot tables written (what the mechanism reads).
        "snapshotTables": list(tables),
        # Ledgers (raw or compacted) whose files key erasure rewrote: [topic, ledgerId, generation]; every other
        # ledger's files are at generation 0 (``store.ledger_rel_path``).
        "fileGenerations": [
            [r.topic, r.ledger_id, r.files_generation]
            for r in (*ledger_rows, *compacted_rows)
            if r.files_generation and r.topic in selected
        ],
    }
    contract.write_json(run.run_info, info)
    checkpoint("snapshot_after_write")
    return SnapshotInfo(run.path, run_id, mechanism, as_of_ms, len(topics_out))
