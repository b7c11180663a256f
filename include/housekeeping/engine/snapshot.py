"""Snapshot: one consistent read of the metadata, exported as Parquet files (one per table) for the Spark apps.

Files under ``<run_dir>/snapshot/`` (``housekeeping.engine.contract``: paths and columns; a mechanism's spec names the
tables beyond topics, ledgers, cursors, namespaces and holds that it reads, and only those are written):

- ``run.json``       run facts: runId, mechanism, asOfMs, scope, blast-radius limits (share of a namespace's
                     bytes; for GC, share of its topics), broker settings
- ``topics.parquet``  one row per in-scope topic with its *effective* policies (resolved here once)
- ``ledgers.parquet`` the in-scope topics' ledgers
- ``cursors.parquet`` the in-scope topics' cursors
- ``quota_states.parquet`` the in-scope topics' recorded backlog-quota states
- ``namespaces.parquet`` stored bytes and topic count of every namespace touched by the scope
- ``partitioned_topics.parquet`` partitioned-topic metadata of those namespaces, with how many partitions exist
- ``compacted_ledgers.parquet`` the in-scope topics' current compacted ledgers (topic compaction)

Every table with a topic column is clustered by topic into ``HOUSEKEEPING_SNAPSHOT_BUCKETS`` row groups
(``parquet_rows.BucketedParquetRows``): a planner's task reads whole topics with one row-group read of each table.

The planner and the gate both read these files, never the live database, so the plan and its check see
the same state; apply then compare-and-sets on the topic versions recorded here (the topics table's ``version``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection, func, select

from housekeeping.core.actor import current_actor
from housekeeping.core.errors import InputError
from housekeeping.core.policies import BrokerConfig
from housekeeping.core.scope import in_scope
from housekeeping.core.settings import Setting
from housekeeping.engine import contract
from housekeeping.engine.documents import RunInfo, write_document
from housekeeping.engine.faults import checkpoint
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.request import RunRequest
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot_tables import BUILDERS, Selection
from housekeeping.store import metadata_schema as t
from housekeeping.store.holds import load_holds
from housekeeping.store.store import Store, read_transaction

SNAPSHOT_BUCKETS = Setting(
    "HOUSEKEEPING_SNAPSHOT_BUCKETS",
    int,
    0,
    minimum=0,
    maximum=4096,
    help="row groups a snapshot table is clustered into by topic: one planner task each (a few per core); "
    "0: one per 50,000 topics in scope, at least 8",
)
# Topics per bucket when the setting is 0: a task's rows (and the writer's one bucket in memory) stay bounded as
# the store grows (benchmarks/README.md, "Scale").
TOPICS_PER_BUCKET = 50_000
MIN_BUCKETS = 8


def snapshot_buckets(topics: int) -> int:
    """The buckets of a snapshot of ``topics`` topics (``HOUSEKEEPING_SNAPSHOT_BUCKETS``)."""
    return int(SNAPSHOT_BUCKETS.read()) or max(MIN_BUCKETS, -(-topics // TOPICS_PER_BUCKET))


class PolicyOverlay(Protocol):
    """A what-if's overlay (``housekeeping.what_if.overlay.PolicyOverlay``): the policies as if it were applied."""

    def broker_config(self, stored: BrokerConfig) -> BrokerConfig: ...

    def topic_policies(self, topic: str, stored: dict[str, Any]) -> dict[str, Any]: ...

    def namespace_policies(self, namespace: str, stored: dict[str, Any]) -> dict[str, Any]: ...


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
    sweep's points) differ only by the policies resolved into them.

    The topics, ledgers and cursors are iterables each iteration of which reads the same rows in order: lists
    (:func:`read_store_state`) or, for one snapshot, queries read a batch at a time inside the snapshot's read
    transaction (:func:`streamed_store_state`: a million topics' rows are never in memory at once)."""

    broker: BrokerConfig
    namespaces: dict[str, dict[str, Any]]
    topic_rows: Iterable[Any]
    ledger_rows: Iterable[Any]
    cursor_rows: Iterable[Any]
    partitioned_rows: list[Any]
    compacted_rows: list[Any]
    holds: dict[str, Any]
    quota_rows: list[Any]
    erasure_rows: list[Any] = field(default_factory=list)  # open requests (pending, held or failed)
    pending_rows: list[Any] = field(default_factory=list)  # files waiting for purge
    # Ledgers (raw or compacted) whose files key erasure rewrote: (topic, ledger_id, files_generation).
    generation_rows: list[Any] = field(default_factory=list)
    # Ledgers whose entries are only in the object tier: (topic, ledger_id, offload_uuid).
    tier_rows: list[Any] = field(default_factory=list)
    # Every namespace's stored bytes (all its ledgers) and topic count.
    namespace_bytes: dict[str, int] = field(default_factory=dict)
    namespace_topics: dict[str, int] = field(default_factory=dict)


# Rows a streamed query fetches at a time.
STREAM_BATCH = 10_000


@dataclass(frozen=True)
class QueryRows:
    """A query's rows, read again at each iteration on one connection inside its read transaction (the same rows
    each time: snapshot isolation), ``STREAM_BATCH`` at a time (a server-side cursor on PostgreSQL)."""

    conn: Connection
    statement: Any

    def __iter__(self) -> Iterator[Any]:
        yield from self._result()

    def batches(self) -> Iterator[list[Any]]:
        """The rows a batch at a time, as fetched (``snapshot_tables.row_batches``)."""
        yield from self._result().partitions()

    def _result(self) -> Any:
        options = {"stream_results": True, "yield_per": STREAM_BATCH}
        return self.conn.execution_options(**options).execute(self.statement)


def read_store_state(store: Store) -> StoreState:
    """Every table's rows in memory (a sweep writes several snapshots of one read)."""
    broker = store.broker_config()
    with read_transaction(store.engine) as conn:
        return _store_state(broker, conn, lambda statement: list(conn.execute(statement)))


@contextmanager
def streamed_store_state(store: Store) -> Iterator[StoreState]:
    """The store's state for one snapshot written inside the read transaction: the topics, ledgers and cursors
    read as the tables are written."""
    broker = store.broker_config()
    with read_transaction(store.engine) as conn:
        yield _store_state(broker, conn, lambda statement: QueryRows(conn, statement))


def _store_state(broker: BrokerConfig, conn: Connection, rows: Callable[[Any], Iterable[Any]]) -> StoreState:
    """The state on ``conn``; ``rows`` reads the three tables that grow with the topics."""
    ledgers, topics = t.ledgers.c, t.topics.c
    namespace_sizes = select(topics.namespace, func.coalesce(func.sum(ledgers.size_bytes), 0)).select_from(
        t.ledgers.join(t.topics, ledgers.topic == topics.name)
    )
    return StoreState(
        broker,
        {r.name: json.loads(r.policies) for r in conn.execute(select(t.namespaces))},
        rows(select(t.topics).order_by(topics.name)),
        rows(select(t.ledgers).order_by(ledgers.topic, ledgers.ledger_id)),
        rows(select(t.cursors).order_by(t.cursors.c.topic, t.cursors.c.name)),
        list(conn.execute(select(t.partitioned_topics).order_by(t.partitioned_topics.c.name))),
        list(
            conn.execute(
                select(t.compacted_ledgers)
                .where(t.compacted_ledgers.c.status == "current")
                .order_by(t.compacted_ledgers.c.topic)
            )
        ),
        load_holds(conn),
        list(
            conn.execute(
                select(t.backlog_quota_states).order_by(
                    t.backlog_quota_states.c.topic, t.backlog_quota_states.c.quota_type
                )
            )
        ),
        list(
            conn.execute(
                select(t.erasure_requests)
                .where(t.erasure_requests.c.state.in_(("pending", "held", "failed")))
                .order_by(t.erasure_requests.c.id)
            )
        ),
        list(
            conn.execute(
                select(t.pending_deletions)
                .where(t.pending_deletions.c.status == "pending")
                .order_by(t.pending_deletions.c.id)
            )
        ),
        _generation_rows(conn),
        list(
            conn.execute(
                select(ledgers.topic, ledgers.ledger_id, ledgers.offload_uuid)
                .where(ledgers.local_deleted & ledgers.entries_stored)
                .order_by(ledgers.topic, ledgers.ledger_id)
            )
        ),
        {r[0]: int(r[1]) for r in conn.execute(namespace_sizes.group_by(topics.namespace))},
        {
            r[0]: int(r[1])
            for r in conn.execute(select(topics.namespace, func.count()).group_by(topics.namespace))
        },
    )


def _generation_rows(conn: Connection) -> list[Any]:
    """(topic, ledger_id, files_generation) of every raw ledger, then every current compacted ledger, whose files
    key erasure rewrote."""
    found = []
    for table, where in ((t.ledgers, None), (t.compacted_ledgers, t.compacted_ledgers.c.status == "current")):
        statement = select(table.c.topic, table.c.ledger_id, table.c.files_generation).where(
            table.c.files_generation > 0
        )
        if where is not None:
            statement = statement.where(where)
        found += list(conn.execute(statement.order_by(table.c.topic, table.c.ledger_id)))
    return found


def select_topics(store: Store, state: StoreState, request: RunRequest) -> frozenset[str]:
    """The topics of the request's scope; an empty store, a scope matching nothing, or an option naming a topic
    the store does not have or the scope leaves out is bad input (nothing is written)."""
    topics, in_scope_names = 0, set()
    for row in state.topic_rows:
        topics += 1
        if in_scope(row.name, request.scope):
            in_scope_names.add(row.name)
    if not topics:
        raise InputError(f"store {store.root} has no topics")
    selected = frozenset(in_scope_names)
    if not selected:
        raise InputError(f"scope {','.join(request.scope)!r} matches no topic in store {store.root}")
    checked = [
        (option, value) for option, value in request.options if option.check_topics is not None and value
    ]
    if checked:
        known = {row.name for row in state.topic_rows}
        for option, value in checked:
            option.check_topics(
                value, known, set(selected), f"store {store.root}, scope {list(request.scope)}"
            )
    return selected


def take_snapshot(
    store: Store,
    request: RunRequest,
    *,
    run_dir: Path | None = None,
    policy_overlay: PolicyOverlay | None = None,
    state: StoreState | None = None,
    tables: Sequence[str] | None = None,
) -> SnapshotInfo:
    """One consistent read of the store into a run directory. ``policy_overlay`` (a what-if) resolves the
    policies as if it had been applied; the store itself is only read. ``state``: an earlier read to write
    again (with another overlay) instead of reading the store. ``tables``: write only these (a sweep's later
    points differ from the first only in their topics); default, every table the mechanism reads."""
    mechanism = request.mechanism
    tables = tuple(tables) if tables is not None else mechanism.all_snapshot_tables
    run = RunDir(run_dir or store.run_dir(mechanism.name, request.run_id))
    if state is not None:
        selected = _write_tables(store, request, state, run, policy_overlay, tables)
    else:
        with streamed_store_state(store) as streamed:
            selected = _write_tables(store, request, streamed, run, policy_overlay, tables)
    if policy_overlay is None:
        mechanism.after_snapshot(store, run.path, request)
    checkpoint("snapshot_after_write")
    return SnapshotInfo(run.path, request.run_id, mechanism.name, request.as_of_ms, selected)


def _write_tables(
    store: Store,
    request: RunRequest,
    state: StoreState,
    run: RunDir,
    policy_overlay: PolicyOverlay | None,
    tables: Sequence[str],
) -> int:
    """The snapshot's tables and ``run.json`` from ``state``; the number of topics selected."""
    broker = state.broker if policy_overlay is None else policy_overlay.broker_config(state.broker)
    selection = Selection(
        state, broker, select_topics(store, state, request), policy_overlay, offloader=store.tier is not None
    )
    run.snapshot_dir.mkdir(parents=True, exist_ok=True)
    buckets = snapshot_buckets(len(selection.selected))
    for name in tables:
        spec = contract.SNAPSHOT_TABLES[name]
        write_parquet(
            run.snapshot_table(name),
            spec,
            BUILDERS[name](selection),
            buckets=buckets if "topic" in spec.names else None,
        )
    write_document(run.run_info, run_info(store, request, selection, tables, buckets))
    return len(selection.selected)


def run_info(
    store: Store, request: RunRequest, selection: Selection, tables: Sequence[str], buckets: int
) -> RunInfo:
    """``snapshot/run.json``: the run's facts."""
    state, selected = selection.state, selection.selected
    return RunInfo(
        run_id=request.run_id,
        mechanism=request.mechanism.name,
        as_of_ms=request.as_of_ms,
        scope=tuple(request.scope),
        max_deleted_share=request.max_deleted_share,
        # Every registered run option (gc: maxDeletedTopicShare; compaction: compactTopics, the topics the run's
        # params name for compaction whatever their backlog, as Pulsar's `topics compact`).
        options=request.run_info_options(),
        schedule_interval_ms=request.schedule_interval_ms,
        store=str(store.root),
        metadata=store.safe_url,
        broker=dict(selection.broker.settings),
        taken_at_wall_clock_ms=int(time.time() * 1000),  # audit only; no rule reads it
        # Who started the run (journaled by apply): the Airflow DAG run, or the CLI user.
        actor=request.actor or current_actor(),
        snapshot_tables=tuple(tables),
        snapshot_buckets=buckets,
        file_generations=tuple(
            (r.topic, r.ledger_id, r.files_generation) for r in state.generation_rows if r.topic in selected
        ),
        # The object tier offloads go to (its URL and endpoint: no credentials); None: no offloader.
        offload_tier=store.tier.url if store.tier is not None else None,
        offload_endpoint=store.tier.endpoint_url if store.tier is not None else None,
        tier_ledgers=tuple(
            (r.topic, r.ledger_id, r.offload_uuid) for r in state.tier_rows if r.topic in selected
        ),
        intent=request.intent,
        preview_reason=request.preview_reason,
    )
