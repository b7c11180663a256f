"""The store's metrics, for a Prometheus to scrape (``housekeeping metrics`` / ``housekeeping serve-metrics``).

Read from the store alone (metadata, journal, pending-deletion log and the run directories' plans and verdicts);
no Spark. Names follow Pulsar's broker metrics where Pulsar has the measure (``pulsar_storage_size``,
``pulsar_storage_backlog_size``, ``pulsar_storage_backlog_age_seconds``, quota limits and evictions,
``pulsar_subscription_back_log``); the rest are ``housekeeping_*``. docs/metrics.md lists every name and label.

Like Pulsar's ``exposeTopicLevelMetricsInPrometheus``, the storage and backlog series are per namespace by default
and per topic (and subscription) with ``per_topic``; ``sum by (namespace)`` gives the namespace figure either way.

Time: every age is measured at ``as_of_ms``, which the caller gives (``--as-of``) or takes from the clock at the
scrape. A metric is an observation, not a decision: nothing here decides what to delete, and with ``--as-of`` the
same store answers the same text. Evidence from plans (deletion lag) only counts plans made at or before as-of.

The exposition text is written by ``prometheus_client`` (a collector that reads the store at each scrape).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from sqlalchemy import select

from housekeeping import metadata_schema as t
from housekeeping.contract import ACTIONS, RunDir, read_json, read_jsonl, read_run_info
from housekeeping.holds import hold_for, load_holds
from housekeeping.names import COMPACTION_SUBSCRIPTION, TopicName
from housekeeping.policies import resolve_policies
from housekeeping.registry import MECHANISMS
from housekeeping.settings import lag_objective, parse_lag_objectives
from housekeeping.snapshot import in_scope
from housekeeping.store import RUNS_DIR, Store, read_transaction
from housekeeping.topic_ledgers import Ledger, TopicLedgers

# The plan actions that delete stored data now (a ledger, or a whole topic's ledgers): a plan that lists one is
# the store's own evidence that the data is deletable under the policies in force at the plan's as-of.
DELETING_ACTIONS = ("delete_ledger", "delete_topic")


@dataclass
class Family:
    """One metric family's samples before they become prometheus_client objects."""

    name: str
    help: str
    labels: tuple[str, ...]
    counter: bool = False
    samples: dict[tuple[str, ...], float] = field(default_factory=dict)

    def add(self, labels: tuple[str, ...], value: float) -> None:
        self.samples[labels] = self.samples.get(labels, 0) + value

    def set(self, labels: tuple[str, ...], value: float) -> None:
        self.samples[labels] = value

    def to_metric(self) -> Metric:
        if self.counter:
            metric: Metric = CounterMetricFamily(self.name, self.help, labels=self.labels)
        else:
            metric = GaugeMetricFamily(self.name, self.help, labels=self.labels)
        for labels, value in sorted(self.samples.items()):
            metric.add_metric(list(labels), value)
        return metric


@lru_cache(maxsize=65536)
def namespace_of(topic: str) -> str:
    """``tenant/namespace`` of a topic name (rows of deleted topics have no topics row to join)."""
    return str(TopicName.parse(topic).namespace_name)


def _seconds(ms: int) -> float:
    return ms / 1000


def store_metrics(
    store: Store, *, as_of_ms: int, per_topic: bool = False, objectives: Mapping[str, int] | None = None
) -> list[Family]:
    """Every family, read from the store at ``as_of_ms``. ``objectives``: the deletion-lag objectives
    (``HOUSEKEEPING_DELETION_LAG_OBJECTIVES``; default, the settings' default)."""
    objectives = objectives if objectives is not None else parse_lag_objectives(None)
    with read_transaction(store.engine) as conn:
        namespaces = {r.name: json.loads(r.policies) for r in conn.execute(select(t.namespaces))}
        topics = list(conn.execute(select(t.topics).order_by(t.topics.c.name)))
        ledgers = list(conn.execute(select(t.ledgers).order_by(t.ledgers.c.topic, t.ledgers.c.ledger_id)))
        cursors = list(conn.execute(select(t.cursors).order_by(t.cursors.c.topic, t.cursors.c.name)))
        pending = list(conn.execute(select(t.pending_deletions)))
        deleted_topics = list(conn.execute(select(t.deleted_topics)))
        journal_rows = list(
            conn.execute(
                select(
                    t.journal.c.run_id,
                    t.journal.c.mechanism,
                    t.journal.c.topic,
                    t.journal.c.status,
                    t.journal.c.detail,
                    t.journal.c.as_of_ms,
                ).where(t.journal.c.status.in_(("applied", "finished", "started")))
            )
        )
        holds = load_holds(conn)
    broker = store.broker_config()

    families: list[Family] = []
    scope = ("namespace", "topic") if per_topic else ("namespace",)

    def key(topic: str) -> tuple[str, ...]:
        return (namespace_of(topic), topic) if per_topic else (namespace_of(topic),)

    def family(name: str, help: str, labels: tuple[str, ...], *, counter: bool = False) -> Family:
        made = Family(name, help, labels, counter)
        families.append(made)
        return made

    # ------------------------------------------------------------------ storage and backlog (Pulsar's names)
    storage_size = family("pulsar_storage_size", "Bytes of the ledgers in the topics' ledger lists.", scope)
    storage_ledgers = family("housekeeping_storage_ledgers", "Ledgers in the topics' ledger lists.", scope)
    storage_entries = family("housekeeping_storage_entries", "Entries in the topics' ledgers.", scope)
    topic_count = family("housekeeping_topics", "Topics in the store.", ("namespace",))
    backlog_size = family(
        "pulsar_storage_backlog_size",
        "Estimated backlog bytes of the slowest durable subscription (Pulsar getEstimatedBacklogSize).",
        scope,
    )
    backlog_age = family(
        "pulsar_storage_backlog_age_seconds",
        "Age of the oldest unacknowledged entry of the slowest durable subscription, by the close time of the "
        "ledger holding it (Pulsar's estimate); the open ledger: its oldest entry. Per namespace: the maximum.",
        scope,
    )
    quota_limit = family(
        "pulsar_storage_backlog_quota_limit",
        "destination_storage backlog quota limit in bytes (-1: none). Per namespace: the strictest in force.",
        scope,
    )
    quota_limit_time = family(
        "pulsar_storage_backlog_quota_limit_time",
        "message_age backlog quota limit in seconds (-1: none). Per namespace: the strictest in force.",
        scope,
    )
    sub_labels = ("namespace", "topic", "subscription")
    sub_backlog = family(
        "pulsar_subscription_back_log", "Entries after the subscription's mark-delete position.", sub_labels
    )
    sub_backlog_size = family(
        "housekeeping_subscription_backlog_size",
        "Estimated bytes after the subscription's mark-delete position (Pulsar's estimate).",
        sub_labels,
    )
    sub_backlog_age = family(
        "housekeeping_subscription_backlog_age_seconds",
        "Age of the subscription's oldest unacknowledged entry (as pulsar_storage_backlog_age_seconds).",
        sub_labels,
    )

    by_topic: dict[str, list[Ledger]] = defaultdict(list)
    stored_ids: dict[str, dict[int, int]] = defaultdict(dict)  # topic -> ledger id -> bytes
    min_ts: dict[tuple[str, int], int | None] = {}
    for row in ledgers:
        by_topic[row.topic].append(Ledger(row.ledger_id, row.entries, row.size_bytes, row.closed_at_ms))
        stored_ids[row.topic][row.ledger_id] = row.size_bytes
        min_ts[(row.topic, row.ledger_id)] = row.min_entry_ts_ms
    cursors_of: dict[str, list[Any]] = defaultdict(list)
    for row in cursors:
        cursors_of[row.topic].append(row)

    def age_at(topic: str, topic_ledgers: TopicLedgers, position: tuple[int, int]) -> float:
        first = topic_ledgers.first_unacked_ledger(position)
        if first is None:
            return 0.0
        since = first.closed_at_ms if first.closed_at_ms is not None else min_ts[(topic, first.ledger_id)]
        return max(0.0, _seconds(as_of_ms - since)) if since is not None else 0.0

    strictest: dict[tuple[str, ...], dict[str, int]] = {}
    for topic_row in topics:
        topic, namespace = topic_row.name, topic_row.namespace
        labels = key(topic)
        topic_count.add((namespace,), 1)
        topic_ledgers = TopicLedgers(by_topic.get(topic, []))
        storage_size.add(labels, topic_ledgers.total_size)
        storage_ledgers.add(labels, len(topic_ledgers.ledgers))
        storage_entries.add(labels, topic_ledgers.total_entries)
        durable = {
            c.name: (c.mark_delete_ledger, c.mark_delete_entry)
            for c in cursors_of.get(topic, [])
            if c.durable
        }
        if durable:
            slowest = min(durable.values())
            backlog_size.add(labels, topic_ledgers.estimated_backlog_bytes(slowest))
            age = age_at(topic, topic_ledgers, slowest)
            backlog_age.set(labels, max(backlog_age.samples.get(labels, 0.0), age))
        else:
            backlog_size.add(labels, 0)
            backlog_age.set(labels, backlog_age.samples.get(labels, 0.0))
        effective = resolve_policies(
            topic, json.loads(topic_row.policies), namespace, namespaces[namespace], broker
        )
        limits = strictest.setdefault(labels, {"size": -1, "time": -1})
        for kind, value in (
            ("size", effective.backlog_quotas["destination_storage"].limit_size),
            ("time", effective.backlog_quotas["message_age"].limit_time),
        ):
            if value >= 0 and (limits[kind] < 0 or value < limits[kind]):
                limits[kind] = value
        if per_topic:
            for name, position in sorted(durable.items()):
                if name == COMPACTION_SUBSCRIPTION:
                    continue  # the compactor's own cursor is not a consumer's backlog
                sub = (namespace, topic, name)
                sub_backlog.set(sub, topic_ledgers.backlog_entries(position))
                sub_backlog_size.set(sub, topic_ledgers.estimated_backlog_bytes(position))
                sub_backlog_age.set(sub, age_at(topic, topic_ledgers, position))
    for labels, limits in strictest.items():
        quota_limit.set(labels, limits["size"])
        quota_limit_time.set(labels, limits["time"])

    # ------------------------------------------------------------------ what housekeeping did (counters)
    run_mechanism = {row.run_id: row.mechanism for row in journal_rows if row.mechanism in MECHANISMS}
    mech_ns = ("mechanism", "namespace")
    deleted_bytes = family(
        "housekeeping_deleted_bytes",
        "Bytes of ledgers (and compacted ledgers) deleted from the metadata, restorable until purged.",
        mech_ns,
        counter=True,
    )
    deleted_ledgers = family(
        "housekeeping_deleted_ledgers", "Ledgers deleted from the metadata.", mech_ns, counter=True
    )
    purged_bytes = family(
        "housekeeping_purged_bytes", "Bytes whose files purge removed (reclaimed).", mech_ns, counter=True
    )
    purged_ledgers = family(
        "housekeeping_purged_ledgers", "Ledgers whose files purge removed.", mech_ns, counter=True
    )
    restored_bytes = family(
        "housekeeping_restored_bytes", "Bytes of deleted ledgers put back by restore.", mech_ns, counter=True
    )
    pending_bytes = family(
        "housekeeping_pending_purge_bytes",
        "Bytes deleted from the metadata whose files are still stored, waiting for purge.",
        ("namespace",),
    )
    pending_ledgers = family(
        "housekeeping_pending_purge_ledgers", "Deleted ledgers whose files wait for purge.", ("namespace",)
    )
    pending_age = family(
        "housekeeping_oldest_pending_deletion_age_seconds",
        "Age of the oldest deletion still waiting for purge (0: none).",
        ("namespace",),
    )
    for namespace in namespaces:
        pending_bytes.set((namespace,), 0)
        pending_ledgers.set((namespace,), 0)
        pending_age.set((namespace,), 0)
    for row in pending:
        namespace = namespace_of(row.topic)
        mechanism = run_mechanism.get(row.run_id, "other")
        deleted_bytes.add((mechanism, namespace), row.size_bytes)
        deleted_ledgers.add((mechanism, namespace), 1)
        if row.status == "purged":
            purged_bytes.add((mechanism, namespace), row.size_bytes)
            purged_ledgers.add((mechanism, namespace), 1)
        elif row.status == "restored":
            restored_bytes.add((mechanism, namespace), row.size_bytes)
        elif row.status == "pending":
            pending_bytes.add((namespace,), row.size_bytes)
            pending_ledgers.add((namespace,), 1)
            age = _seconds(max(0, as_of_ms - row.deleted_as_of_ms))
            pending_age.set((namespace,), max(pending_age.samples[(namespace,)], age))

    topics_deleted = family(
        "housekeeping_topics_deleted", "Topics deleted (inactive-topic GC).", mech_ns, counter=True
    )
    for row in deleted_topics:
        if row.kind == "topic":
            topics_deleted.add((run_mechanism.get(row.run_id, "other"), namespace_of(row.topic)), 1)

    cursors_moved = family(
        "housekeeping_cursors_moved", "Subscription cursors moved forward.", mech_ns, counter=True
    )
    evictions = family(
        "pulsar_storage_backlog_quota_exceeded_evictions",
        "Backlog evictions applied (consumer_backlog_eviction), one per topic and quota type per run.",
        ("namespace", "quota_type"),
        counter=True,
    )
    last_success = family(
        "housekeeping_last_success_timestamp_seconds",
        "Logical time (as-of) of the newest run whose apply finished.",
        ("mechanism",),
    )
    for row in journal_rows:
        if row.mechanism not in MECHANISMS:
            continue
        if row.status == "finished":
            last_success.set(
                (row.mechanism,),
                max(last_success.samples.get((row.mechanism,), 0.0), _seconds(row.as_of_ms)),
            )
        if row.status != "applied" or row.topic is None:
            continue
        detail = json.loads(row.detail)
        moved = int(detail.get("cursorsMoved") or 0)
        if moved:
            cursors_moved.add((row.mechanism, namespace_of(row.topic)), moved)
        # A cursor move made for a backlog quota (an eviction) names its quota type in the plan row.
        evicted = {
            r["quotaType"]
            for r in detail.get("planRows", [])
            if r.get("action") == "move_cursor" and r.get("quotaType")
        }
        if moved:
            for quota_type in sorted(evicted):
                evictions.add((namespace_of(row.topic), quota_type), 1)

    # ------------------------------------------------------------------ runs: verdicts and deletion lag
    runs = _runs(store, as_of_ms)
    last_gate = family(
        "housekeeping_last_gate_passed",
        "1 when the newest run's plan passed the gate, 0 when the gate rejected it.",
        ("mechanism",),
    )
    last_plan = family(
        "housekeeping_last_plan_timestamp_seconds", "Logical time (as-of) of the newest plan.", ("mechanism",)
    )
    newest: dict[str, PlanRun] = {}
    for run in runs:
        newest.setdefault(run.mechanism, run)
    for mechanism, run in sorted(newest.items()):
        last_plan.set((mechanism,), _seconds(run.as_of_ms))
        gate = read_json(run.run.gate_result)
        if gate is not None:
            last_gate.set((mechanism,), 1.0 if gate["success"] else 0.0)

    lag = deletion_lag(runs, stored_ids, pending, holds, as_of_ms=as_of_ms, namespaces=namespaces)
    lag_seconds = family(
        "housekeeping_deletion_lag_seconds",
        "How long the oldest data that is deletable under the policies in force has been stored since it became "
        "deletable (0: none waits). docs/metrics.md: how 'became deletable' is established.",
        ("namespace",),
    )
    deletable_bytes = family(
        "housekeeping_deletable_bytes",
        "Bytes deletable under the policies in force and still stored.",
        ("namespace",),
    )
    lag_objective_seconds = family(
        "housekeeping_deletion_lag_objective_seconds",
        "The namespace's deletion-lag objective (HOUSEKEEPING_DELETION_LAG_OBJECTIVES).",
        ("namespace",),
    )
    for namespace, (seconds, size) in sorted(lag.items()):
        lag_seconds.set((namespace,), seconds)
        deletable_bytes.set((namespace,), size)
        objective = lag_objective(namespace, objectives)
        if objective is not None:
            lag_objective_seconds.set((namespace,), objective)

    as_of = family(
        "housekeeping_metrics_as_of_timestamp_seconds", "The time these metrics are measured at.", ()
    )
    as_of.set((), _seconds(as_of_ms))
    return families


@dataclass(frozen=True)
class PlanRun:
    run: RunDir
    mechanism: str
    as_of_ms: int
    scope: tuple[str, ...]


def read_deletion_lag(store: Store, as_of_ms: int) -> dict[str, tuple[float, int]]:
    """:func:`deletion_lag` of every namespace of the store at ``as_of_ms`` (the storage report's SLO check)."""
    with read_transaction(store.engine) as conn:
        namespaces = [r.name for r in conn.execute(select(t.namespaces.c.name))]
        stored_ids: dict[str, dict[int, int]] = defaultdict(dict)
        for row in conn.execute(select(t.ledgers.c.topic, t.ledgers.c.ledger_id, t.ledgers.c.size_bytes)):
            stored_ids[row.topic][row.ledger_id] = row.size_bytes
        pending = list(
            conn.execute(select(t.pending_deletions).where(t.pending_deletions.c.status == "pending"))
        )
        holds = load_holds(conn)
    return deletion_lag(
        _runs(store, as_of_ms), stored_ids, pending, holds, as_of_ms=as_of_ms, namespaces=namespaces
    )


def _runs(store: Store, as_of_ms: int) -> list[PlanRun]:
    """Runs of the registry's mechanisms whose plan completed (its summary is written last), made at or before
    ``as_of_ms``, newest first."""
    found = []
    for run_json in (store.root / RUNS_DIR).glob("*/*/snapshot/run.json"):
        run = RunDir(run_json.parent.parent)
        try:
            info = read_run_info(run)
        except Exception:  # a run directory being written, or not ours: no evidence
            continue
        if (
            info.get("mechanism") not in MECHANISMS
            or info["asOfMs"] > as_of_ms
            or not run.plan_summary.is_file()
        ):
            continue
        plan_run = PlanRun(run, info["mechanism"], info["asOfMs"], tuple(info.get("scope") or ()))
        # takenAtWallClockMs only orders reruns of one as-of (audit time, no decision reads it).
        found.append(((info["asOfMs"], info.get("takenAtWallClockMs") or 0, str(run.path)), plan_run))
    return [run for _, run in sorted(found, key=lambda f: f[0], reverse=True)]


def _planned_deletions(run: PlanRun, stored_ids: dict[str, dict[int, int]]) -> set[tuple[str, int]]:
    """The (topic, ledger) pairs the run's plan deletes that are still in the ledger list."""
    listed: set[tuple[str, int]] = set()
    table = run.run.plan_table(ACTIONS)
    for part in sorted(table.glob("part-*")) if table.is_dir() else ():
        for row in read_jsonl(part):
            topic = row.get("topic")
            if row.get("action") == "delete_ledger" and int(row["ledgerId"]) in stored_ids.get(topic, {}):
                listed.add((topic, int(row["ledgerId"])))
            elif row.get("action") == "delete_topic":
                listed.update((topic, ledger) for ledger in stored_ids.get(topic, {}))
    return listed


def deletion_lag(
    runs: list[PlanRun],
    stored_ids: dict[str, dict[int, int]],
    pending: list[Any],
    holds: dict[str, Any],
    *,
    as_of_ms: int,
    namespaces: Iterable[str],
) -> dict[str, tuple[float, int]]:
    """Per namespace: (seconds the oldest deletable, still-stored data has waited since it became deletable,
    bytes deletable and still stored).

    - A ledger the newest plan covering its topic deletes (``delete_ledger``, or every ledger of a topic
      ``delete_topic`` deletes) and that is still in the ledger list: deletable under the policies in force (that
      plan's); since the as-of of the oldest plan in the unbroken line of plans of that mechanism covering the
      topic that delete it. A covering plan that does not delete it ends the line (it was not deletable then).
    - A deleted ledger's files past their grace period and not purged: since the grace period ended.

    Data a hold covers is not deletable. A plan only counts once complete (its summary written)."""
    since: dict[tuple[str, int], int] = {}
    for mechanism in dict.fromkeys(run.mechanism for run in runs):
        newer: list[PlanRun] = []  # this mechanism's runs already walked (newer than ``run``)
        line_open: set[tuple[str, int]] = set()
        for run in (r for r in runs if r.mechanism == mechanism):
            listed = _planned_deletions(run, stored_ids)
            for candidate in list(line_open):
                if candidate in listed:
                    since[candidate] = run.as_of_ms
                elif in_scope(candidate[0], run.scope):
                    line_open.discard(candidate)
            for candidate in listed - since.keys():
                topic = candidate[0]
                if hold_for(topic, holds) is not None:
                    continue
                if any(in_scope(topic, n.scope) for n in newer):
                    continue  # a newer plan covering the topic keeps it: not deletable now
                since[candidate] = run.as_of_ms
                line_open.add(candidate)
            newer.append(run)
            if not line_open and any(not n.scope for n in newer):
                break  # every topic has its newest plan among these, and every line has ended

    moments: dict[str, list[int]] = {ns: [] for ns in namespaces}
    size: dict[str, int] = dict.fromkeys(moments, 0)
    for (topic, ledger), moment in since.items():
        namespace = namespace_of(topic)
        moments.setdefault(namespace, []).append(moment)
        size[namespace] = size.get(namespace, 0) + stored_ids[topic][ledger]
    for row in pending:
        if row.status != "pending" or row.purge_after_ms > as_of_ms or hold_for(row.topic, holds) is not None:
            continue
        namespace = namespace_of(row.topic)
        moments.setdefault(namespace, []).append(row.purge_after_ms)
        size[namespace] = size.get(namespace, 0) + row.size_bytes
    return {
        ns: (_seconds(max(0, as_of_ms - min(found))) if found else 0.0, size.get(ns, 0))
        for ns, found in moments.items()
    }


class StoreCollector(Collector):
    """Reads the store at every scrape (``as_of_ms`` None: the scrape's clock time)."""

    def __init__(
        self, store: Store, *, as_of_ms: int | None, per_topic: bool, objectives: Mapping[str, int] | None
    ) -> None:
        self.store, self.as_of_ms, self.per_topic, self.objectives = store, as_of_ms, per_topic, objectives

    def describe(self) -> list[Metric]:
        return []  # no collection at registration: the first scrape reads the store

    def collect(self) -> Iterator[Metric]:
        as_of_ms = self.as_of_ms if self.as_of_ms is not None else int(time.time() * 1000)
        for made in store_metrics(
            self.store, as_of_ms=as_of_ms, per_topic=self.per_topic, objectives=self.objectives
        ):
            yield made.to_metric()


def registry_for(
    store: Store, *, as_of_ms: int | None, per_topic: bool, objectives: Mapping[str, int] | None = None
) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store, as_of_ms=as_of_ms, per_topic=per_topic, objectives=objectives))
    return registry


def exposition(
    store: Store,
    *,
    as_of_ms: int | None,
    per_topic: bool = False,
    objectives: Mapping[str, int] | None = None,
) -> bytes:
    """The Prometheus text exposition format of the store's metrics."""
    from prometheus_client import generate_latest

    return generate_latest(registry_for(store, as_of_ms=as_of_ms, per_topic=per_topic, objectives=objectives))


def serve(
    store: Store,
    *,
    host: str,
    port: int,
    as_of_ms: int | None,
    per_topic: bool = False,
    objectives: Mapping[str, int] | None = None,
) -> None:
    """Serve ``/metrics`` until interrupted (prometheus_client's HTTP server; the store is read per scrape)."""
    import sys

    from prometheus_client import start_http_server

    registry = registry_for(store, as_of_ms=as_of_ms, per_topic=per_topic, objectives=objectives)
    # Read once before listening: a store that cannot be read fails here, not on the first scrape.
    store_metrics(
        store, as_of_ms=as_of_ms or int(time.time() * 1000), per_topic=per_topic, objectives=objectives
    )
    server, thread = start_http_server(port, addr=host, registry=registry)
    print(f"housekeeping: serving metrics of {store.root} on http://{host}:{port}/metrics", file=sys.stderr)
    try:
        thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
