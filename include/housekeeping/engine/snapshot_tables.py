"""The snapshot's tables, one builder each: what a table's rows are, read from one :class:`Selection` (a store
state, the topics a run selected and the policies in force). ``housekeeping.engine.snapshot`` writes the tables a
mechanism reads; the columns are the contract's (``housekeeping.engine.contract.SNAPSHOT_TABLES``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from housekeeping.core.names import TopicName, is_system_service_namespace, is_system_topic_name
from housekeeping.core.policies import BrokerConfig, EffectivePolicies, RetentionPolicy, resolve_policies
from housekeeping.store.holds import describe as describe_hold
from housekeeping.store.holds import hold_for

Row = dict[str, Any]


@dataclass(frozen=True)
class Selection:
    """One store state as a run sees it: ``state`` (``housekeeping.engine.snapshot.StoreState``), the topics in the
    run's scope, the broker settings in force and, for a what-if, the policy overlay resolved into them."""

    state: Any
    broker: BrokerConfig
    selected: frozenset[str]
    policy_overlay: Any = (
        None  # housekeeping.what_if.overlay.PolicyOverlay (topic_policies, namespace_policies)
    )
    offloader: bool = False  # an object tier is configured (HOUSEKEEPING_OFFLOAD_URL)

    @cached_property
    def touched_namespaces(self) -> frozenset[str]:
        return frozenset(row.namespace for row in self.state.topic_rows if row.name in self.selected)

    def _levels(self, row: Any) -> tuple[dict[str, Any], str, dict[str, Any]]:
        """The topic's own policies and its namespace's (a what-if's overlay applied)."""
        topic_policies, namespace_policies = json.loads(row.policies), self.state.namespaces[row.namespace]
        if self.policy_overlay is not None:
            topic_policies = self.policy_overlay.topic_policies(row.name, topic_policies)
            namespace_policies = self.policy_overlay.namespace_policies(row.namespace, namespace_policies)
        return topic_policies, row.namespace, namespace_policies

    def policy_columns(self, row: Any) -> Row:
        """The topics table's policy and offload columns of ``row``'s topic. A topic that sets no policy of its own
        resolves as every other such topic of its namespace whose name says the same about system topics (the
        name enters the rules only there and in a topic-level source): those columns are computed once for all of
        them (resolving and encoding 100,000 topics' policies one by one was a third of the snapshot's time)."""
        topic_policies, namespace, namespace_policies = self._levels(row)
        if topic_policies:
            return self._resolved_columns(row.name, topic_policies, namespace, namespace_policies)
        key = (namespace, is_system_topic_name(row.name))
        columns = self._shared_policy_columns.get(key)
        if columns is None:
            columns = self._resolved_columns(row.name, topic_policies, namespace, namespace_policies)
            self._shared_policy_columns[key] = columns
        return columns

    @cached_property
    def _shared_policy_columns(self) -> dict[tuple[str, bool], Row]:
        return {}

    def _resolved_columns(
        self, name: str, topic_policies: dict[str, Any], namespace: str, namespace_policies: dict[str, Any]
    ) -> Row:
        effective = resolve_policies(name, topic_policies, namespace, namespace_policies, self.broker)
        return {**_policy_columns(effective), **_offload_columns(effective, namespace, self.offloader)}

    def held_by(self, name: str) -> str | None:
        if not self.state.holds:
            return None
        hold = hold_for(name, self.state.holds)
        return None if hold is None else describe_hold(hold)


def _offload_columns(effective: EffectivePolicies, namespace: str, offloader: bool) -> Row:
    """The offload policy in force. System-service namespaces get Pulsar's NullLedgerOffloader (PR #15008): no
    offload and no offload-deletion lag there, whatever the policies say."""
    policy = effective.offload
    assert policy is not None
    return {
        "offloader": offloader and not is_system_service_namespace(namespace),
        "offloadThresholdBytes": policy.threshold_bytes,
        "offloadThresholdSeconds": policy.threshold_seconds,
        "offloadDeletionLagMs": policy.deletion_lag_ms,
        "offloadPolicyDescription": policy.describe(),
    }


def _policy_columns(effective: EffectivePolicies) -> Row:
    """A topic's effective policies as the topics table's columns."""
    compacted = effective.compacted_retention or RetentionPolicy(-1, -1)
    return {
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
        # Inactive-topic GC (PersistentTopic#checkGC).
        "inactiveDeleteMode": effective.inactive_topic_policies.delete_mode,
        "maxInactiveSeconds": effective.inactive_topic_policies.max_inactive_seconds,
        "deleteWhileInactive": effective.inactive_topic_policies.delete_while_inactive,
        "inactivePolicySource": effective.inactive_topic_policies_source,
        # Topic compaction: threshold (0 = off), compacted-ledger retention (-1 = keep, also when unset as in
        # Pulsar), tombstone grace.
        "compactionThresholdBytes": effective.compaction_threshold_bytes,
        "compactedRetentionTimeMs": compacted.time_ms,
        "compactedRetentionSizeBytes": compacted.size_bytes,
        "compactedRetentionDescription": (
            compacted.describe() if effective.compacted_retention is not None else "not set (keep all)"
        ),
        "tombstoneGraceMs": effective.compacted_tombstone_grace_seconds * 1000,
        "policies": effective.document(),
    }


def topics(sel: Selection) -> Iterator[Any]:
    """One row per topic in scope with its *effective* policies (resolved here once) and its hold, a batch of store
    rows at a time (an Arrow table each): the policy columns topics share (``Selection.policy_columns``) are
    converted once per batch, not per topic."""
    import pyarrow as pa

    from housekeeping.engine.contract import TOPICS

    schema = TOPICS.arrow_schema()
    for batch in row_batches(sel.state.topic_rows):
        rows = [row for row in batch if row.name in sel.selected]
        if not rows:
            continue
        parsed = [TopicName.parse(row.name) for row in rows]
        columns: dict[str, Any] = {
            "topic": [row.name for row in rows],
            "namespace": [row.namespace for row in rows],
            "tenant": [name.tenant for name in parsed],
            "isSystemTopic": [name.is_system_topic for name in parsed],
            "version": [row.version for row in rows],
            "incarnation": [row.incarnation for row in rows],
            "producers": [row.producers for row in rows],
            "consumers": [row.consumers for row in rows],
            "lastActiveMs": [row.last_active_ms for row in rows],
            "partitionedTopic": [name.partitioned_parent for name in parsed],
            # `housekeeping hold`: every planner keeps a held topic whole (kind "held").
            "heldBy": [sel.held_by(row.name) for row in rows],
        }
        shared: dict[int, int] = {}  # id of a policy-columns dict -> its row in ``distinct``
        distinct: list[Row] = []
        taken = []
        for row in rows:
            policy = sel.policy_columns(row)
            index = shared.get(id(policy))
            if index is None:
                index = shared[id(policy)] = len(distinct)
                distinct.append(policy)
            taken.append(index)
        policy_schema = pa.schema([field for field in schema if field.name not in columns])
        for policy in distinct:
            if set(policy) != set(policy_schema.names):
                raise ValueError(
                    f"table topics: policy columns {sorted(policy)} (columns: {sorted(policy_schema.names)})"
                )
        policies = pa.Table.from_pylist(distinct, schema=policy_schema).take(pa.array(taken, pa.int64()))
        arrays = [
            pa.array(columns[field.name], field.type)
            if field.name in columns
            else policies.column(field.name)
            for field in schema
        ]
        yield pa.Table.from_arrays(arrays, schema=schema)


# Rows of a store table read into one batch of a columnar table (a list state is cut into batches of this size; a
# streamed query's batches are its own).
BATCH_ROWS = 10_000


def row_batches(rows: Iterable[Any]) -> Iterator[list[Any]]:
    """The rows of a store table (each a row of a select of its columns, with ``_fields``) a batch at a time:
    ``rows.batches()`` when it reads them so (``snapshot.QueryRows``), else cut into ``BATCH_ROWS``."""
    batches = getattr(rows, "batches", None)
    if batches is not None:
        yield from batches()
        return
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH_ROWS:
            yield batch
            batch = []
    if batch:
        yield batch


def _columnar(sel: Selection, rows: Iterable[Any], table: str, columns: Mapping[str, Any]) -> Iterator[Any]:
    """A snapshot table built a batch at a time (the big tables: a Python row per ledger costs more than the
    rule that reads it): ``columns`` gives each of the table's columns as the store column it is, or as a function
    of the batch's store columns by name; rows of topics out of scope are left out."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from housekeeping.engine.contract import SNAPSHOT_TABLES

    schema = SNAPSHOT_TABLES[table].arrow_schema()
    for batch in row_batches(rows):
        stored = dict(zip(batch[0]._fields, zip(*batch, strict=True), strict=True))
        arrays = [
            pa.array(stored[source] if isinstance(source, str) else source(stored), field.type)
            for field, source in ((field, columns[field.name]) for field in schema)
        ]
        # Whole topics per batch: scope is decided once per distinct name.
        topics = pc.dictionary_encode(arrays[0])
        selected = pa.array([name in sel.selected for name in topics.dictionary.to_pylist()], pa.bool_())
        yield pa.Table.from_arrays(arrays, schema=schema).filter(pc.take(selected, topics.indices))


def _is_set(values: tuple) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_valid(pa.array(values, pa.string()))


# The ledgers and cursors tables' columns: the store column each is, or how it is computed.
_LEDGER_COLUMNS = {
    "topic": "topic",
    "ledgerId": "ledger_id",
    "entries": "entries",
    "size": "size_bytes",
    "closedAtMs": "closed_at_ms",
    "minEntryTsMs": "min_entry_ts_ms",
    "maxEntryTsMs": "max_entry_ts_ms",
    "entriesStored": "entries_stored",
    "offloadAttempted": lambda stored: _is_set(stored["offload_uuid"]),
    "offloadComplete": "offload_complete",
    "offloadedAtMs": "offloaded_at_ms",
    "localDeleted": "local_deleted",
}
_CURSOR_COLUMNS = {
    "topic": "topic",
    "name": "name",
    "durable": "durable",
    "markDeleteLedger": "mark_delete_ledger",
    "markDeleteEntry": "mark_delete_entry",
    "lastActiveMs": "last_active_ms",
    "consumers": "consumers",
}


def ledgers(sel: Selection) -> Iterator[Any]:
    return _columnar(sel, sel.state.ledger_rows, "ledgers", _LEDGER_COLUMNS)


def cursors(sel: Selection) -> Iterator[Any]:
    return _columnar(sel, sel.state.cursor_rows, "cursors", _CURSOR_COLUMNS)


def quota_states(sel: Selection) -> Iterator[Row]:
    for r in sel.state.quota_rows:
        if r.topic in sel.selected:
            yield {
                "topic": r.topic,
                "quotaType": r.quota_type,
                "policy": r.policy,
                "exceeded": bool(r.exceeded),
                "limitValue": r.limit_value,
                "measuredValue": r.measured_value,
                "exceededSinceMs": r.exceeded_since_ms,
                "asOfMs": r.as_of_ms,
            }


def partitioned_topics(sel: Selection) -> Iterator[Row]:
    """Partitioned-topic metadata of the namespaces in scope, with how many of its partitions exist as topics (in
    the whole store, not only in scope: the metadata may only go when no partition is left)."""
    existing: dict[str, int] = {}
    for row in sel.state.topic_rows:
        parent = TopicName.parse(row.name).partitioned_parent
        if parent is not None:
            existing[parent] = existing.get(parent, 0) + 1
    for r in sel.state.partitioned_rows:
        if r.namespace in sel.touched_namespaces:
            yield {
                "partitionedTopic": r.name,
                "namespace": r.namespace,
                "partitions": r.partitions,
                "existingPartitions": existing.get(r.name, 0),
                "heldBy": sel.held_by(r.name),
            }


def compacted_ledgers(sel: Selection) -> Iterator[Row]:
    for r in sel.state.compacted_rows:
        if r.topic in sel.selected:
            yield {
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


def erasure_requests(sel: Selection) -> Iterator[Row]:
    """Every open request (the planner decides which count at the as-of and which topics they name)."""
    for r in sel.state.erasure_rows:
        yield {
            "requestId": r.id,
            "keyDigest": r.key_sha256,
            "scope": r.scope,
            "target": r.target,
            "requestedAtMs": r.requested_at_ms,
        }


def pending_files(sel: Selection) -> Iterator[Row]:
    """The files waiting for purge of the topics in scope, or of deleted topics of the namespaces in scope."""
    waiting = {r.topic for r in sel.state.pending_rows}
    existing = {row.name for row in sel.state.topic_rows if row.name in waiting} if waiting else set()
    for r in sel.state.pending_rows:
        deleted_in_scope = (
            r.topic not in existing and str(TopicName.parse(r.topic).namespace_name) in sel.touched_namespaces
        )
        if r.topic in sel.selected or deleted_in_scope:
            yield {
                "pendingId": r.id,
                "topic": r.topic,
                "ledgerId": r.ledger_id,
                "path": r.path,
                "kind": r.kind,
                "size": r.size_bytes,
                "purgeAfterMs": r.purge_after_ms,
                "erasedBy": r.erased_by,
            }


def holds(sel: Selection) -> Iterable[Row]:
    """The raw holds, for the gate to re-derive on its own which planned actions they cover."""
    return [hold.to_json() for _, hold in sorted(sel.state.holds.items())]


def namespaces(sel: Selection) -> Iterable[Row]:
    """Stored bytes and topic count of every namespace the scope touches (the blast radius's denominators)."""
    stored, count = sel.state.namespace_bytes, sel.state.namespace_topics
    return [
        {"namespace": name, "storedBytes": stored.get(name, 0), "topicCount": count.get(name, 0)}
        for name in sorted(sel.touched_namespaces)
    ]


# Each builder yields rows (mappings) or, for the tables that grow with the ledgers, Arrow tables of rows
# (``contract.write_parquet`` takes either).
BUILDERS: Mapping[str, Callable[[Selection], Iterable[Any]]] = {
    "topics": topics,
    "ledgers": ledgers,
    "cursors": cursors,
    "namespaces": namespaces,
    "quota_states": quota_states,
    "partitioned_topics": partitioned_topics,
    "compacted_ledgers": compacted_ledgers,
    "holds": holds,
    "erasure_requests": erasure_requests,
    "pending_files": pending_files,
}
