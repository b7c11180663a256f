"""Storage and backlog, by Pulsar's names where Pulsar has the measure: bytes, ledgers and entries in the ledger
lists, the slowest durable subscription's backlog and its age, the backlog quota limits in force, and per
subscription (``--per-topic``) its backlog."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.core.policies import resolve_policies
from housekeeping.core.topic_ledgers import Ledger, TopicLedgers
from housekeeping.observe.metrics.families import Families, Family, StoreView, seconds


class _Ages:
    """The age of a subscription's oldest unacknowledged entry, by the close time of the ledger holding it
    (Pulsar's estimate); in the open ledger, its oldest entry's time."""

    def __init__(self, view: StoreView) -> None:
        self.as_of_ms = view.as_of_ms
        self.min_ts = {(row.topic, row.ledger_id): row.min_entry_ts_ms for row in view.ledgers}

    def at(self, topic: str, ledgers: TopicLedgers, position: tuple[int, int]) -> float:
        first = ledgers.first_unacked_ledger(position)
        if first is None:
            return 0.0
        since = (
            first.closed_at_ms if first.closed_at_ms is not None else self.min_ts[(topic, first.ledger_id)]
        )
        return max(0.0, seconds(self.as_of_ms - since)) if since is not None else 0.0


def _subscription_families(made: Families) -> tuple[Family, Family, Family]:
    labels = ("namespace", "topic", "subscription")
    return (
        made.family(
            "pulsar_subscription_back_log", "Entries after the subscription's mark-delete position.", labels
        ),
        made.family(
            "housekeeping_subscription_backlog_size",
            "Estimated bytes after the subscription's mark-delete position (Pulsar's estimate).",
            labels,
        ),
        made.family(
            "housekeeping_subscription_backlog_age_seconds",
            "Age of the subscription's oldest unacknowledged entry (as pulsar_storage_backlog_age_seconds).",
            labels,
        ),
    )


def _quota_limits(view: StoreView, topic_row: Any, limits: dict[str, int]) -> None:
    """The strictest of the topic's backlog quota limits in force into ``limits`` (-1: none)."""
    broker = view.broker
    effective = resolve_policies(
        topic_row.name,
        json.loads(topic_row.policies),
        topic_row.namespace,
        view.namespaces[topic_row.namespace],
        broker,
    )
    for kind, value in (
        ("size", effective.backlog_quotas["destination_storage"].limit_size),
        ("time", effective.backlog_quotas["message_age"].limit_time),
    ):
        if value >= 0 and (limits[kind] < 0 or value < limits[kind]):
            limits[kind] = value


def storage(view: StoreView) -> list[Family]:
    made = Families()
    scope = view.scope
    size = made.family("pulsar_storage_size", "Bytes of the ledgers in the topics' ledger lists.", scope)
    ledgers = made.family("housekeeping_storage_ledgers", "Ledgers in the topics' ledger lists.", scope)
    entries = made.family("housekeeping_storage_entries", "Entries in the topics' ledgers.", scope)
    topics = made.family("housekeeping_topics", "Topics in the store.", ("namespace",))
    backlog = made.family(
        "pulsar_storage_backlog_size",
        "Estimated backlog bytes of the slowest durable subscription (Pulsar getEstimatedBacklogSize).",
        scope,
    )
    backlog_age = made.family(
        "pulsar_storage_backlog_age_seconds",
        "Age of the oldest unacknowledged entry of the slowest durable subscription, by the close time of the "
        "ledger holding it (Pulsar's estimate); the open ledger: its oldest entry. Per namespace: the maximum.",
        scope,
    )
    quota_limit = made.family(
        "pulsar_storage_backlog_quota_limit",
        "destination_storage backlog quota limit in bytes (-1: none). Per namespace: the strictest in force.",
        scope,
    )
    quota_limit_time = made.family(
        "pulsar_storage_backlog_quota_limit_time",
        "message_age backlog quota limit in seconds (-1: none). Per namespace: the strictest in force.",
        scope,
    )
    offloaded = made.family(
        "pulsar_storage_offloaded_size",
        "Bytes of the ledgers whose offload to the object tier completed, whether or not their local copy is "
        "deleted (Pulsar ManagedLedgerImpl#getOffloadedSize).",
        scope,
    )
    by_tier = made.family(
        "housekeeping_storage_tier_size",
        "Bytes of the ledger lists by where a copy is: tier=local (a local copy) or tier=offloaded (a completed "
        "offload in the object tier); an offloaded ledger whose local copy is not yet deleted counts in both.",
        (*scope, "tier"),
    )
    subscriptions = _subscription_families(made)

    by_topic: dict[str, list[Ledger]] = defaultdict(list)
    for row in view.ledgers:
        by_topic[row.topic].append(Ledger(row.ledger_id, row.entries, row.size_bytes, row.closed_at_ms))
    _tier_sizes(view, offloaded, by_tier)
    cursors_of: dict[str, list[Any]] = defaultdict(list)
    for row in view.cursors:
        cursors_of[row.topic].append(row)
    ages = _Ages(view)
    strictest: dict[tuple[str, ...], dict[str, int]] = {}
    for topic_row in view.topics:
        topic, labels = topic_row.name, view.key(topic_row.name)
        topics.add((topic_row.namespace,), 1)
        topic_ledgers = TopicLedgers(by_topic.get(topic, []))
        size.add(labels, topic_ledgers.total_size)
        ledgers.add(labels, len(topic_ledgers.ledgers))
        entries.add(labels, topic_ledgers.total_entries)
        durable = {
            c.name: (c.mark_delete_ledger, c.mark_delete_entry)
            for c in cursors_of.get(topic, [])
            if c.durable
        }
        slowest = min(durable.values()) if durable else None
        backlog.add(labels, topic_ledgers.estimated_backlog_bytes(slowest) if slowest else 0)
        age = ages.at(topic, topic_ledgers, slowest) if slowest else 0.0
        backlog_age.set(labels, max(backlog_age.samples.get(labels, 0.0), age))
        _quota_limits(view, topic_row, strictest.setdefault(labels, {"size": -1, "time": -1}))
        if view.per_topic:
            _subscription_series(subscriptions, ages, topic_row, topic_ledgers, durable)
    for labels, limits in strictest.items():
        quota_limit.set(labels, limits["size"])
        quota_limit_time.set(labels, limits["time"])
    return made


def _tier_sizes(view: StoreView, offloaded: Family, by_tier: Family) -> None:
    """Per namespace (or topic), the completed offloads' bytes and the bytes by tier; every topic has its series
    (0 where nothing is offloaded), so a dashboard's sum is never a missing series."""
    for topic_row in view.topics:
        labels = view.key(topic_row.name)
        offloaded.add(labels, 0)
        for tier in ("local", "offloaded"):
            by_tier.add((*labels, tier), 0)
    for row in view.ledgers:
        labels = view.key(row.topic)
        if row.offload_complete:
            offloaded.add(labels, row.size_bytes)
            by_tier.add((*labels, "offloaded"), row.size_bytes)
        if not row.local_deleted:
            by_tier.add((*labels, "local"), row.size_bytes)


def _subscription_series(
    families: tuple[Family, Family, Family],
    ages: _Ages,
    topic_row: Any,
    topic_ledgers: TopicLedgers,
    durable: dict[str, tuple[int, int]],
) -> None:
    entries, size, age = families
    for name, position in sorted(durable.items()):
        if name == COMPACTION_SUBSCRIPTION:
            continue  # the compactor's own cursor is not a consumer's backlog
        labels = (topic_row.namespace, topic_row.name, name)
        entries.set(labels, topic_ledgers.backlog_entries(position))
        size.set(labels, topic_ledgers.estimated_backlog_bytes(position))
        age.set(labels, ages.at(topic_row.name, topic_ledgers, position))
