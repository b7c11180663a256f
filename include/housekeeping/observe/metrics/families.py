"""A metric family before it becomes a ``prometheus_client`` object, and the one read of the store every collector
works from (:class:`StoreView`)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import select

from housekeeping.core.names import TopicName
from housekeeping.store import metadata_schema as t
from housekeeping.store.holds import load_holds
from housekeeping.store.store import Store, read_transaction


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


class Families(list[Family]):
    """The families a collector makes, in the order it makes them."""

    def family(self, name: str, help: str, labels: tuple[str, ...], *, counter: bool = False) -> Family:
        made = Family(name, help, labels, counter)
        self.append(made)
        return made


@lru_cache(maxsize=65536)
def namespace_of(topic: str) -> str:
    """``tenant/namespace`` of a topic name (rows of deleted topics have no topics row to join)."""
    return str(TopicName.parse(topic).namespace_name)


def seconds(ms: int) -> float:
    return ms / 1000


@dataclass
class StoreView:
    """One read transaction's rows of what the collectors measure, and when they measure it."""

    store: Store
    as_of_ms: int
    per_topic: bool
    namespaces: dict[str, dict[str, Any]]
    topics: list[Any]
    ledgers: list[Any]
    cursors: list[Any]
    pending: list[Any]
    deleted_topics: list[Any]
    journal: list[Any]
    holds: dict[str, Any]

    @classmethod
    def read(cls, store: Store, *, as_of_ms: int, per_topic: bool) -> StoreView:
        with read_transaction(store.engine) as conn:
            return cls(
                store,
                as_of_ms,
                per_topic,
                namespaces={r.name: json.loads(r.policies) for r in conn.execute(select(t.namespaces))},
                topics=list(conn.execute(select(t.topics).order_by(t.topics.c.name))),
                ledgers=list(
                    conn.execute(select(t.ledgers).order_by(t.ledgers.c.topic, t.ledgers.c.ledger_id))
                ),
                cursors=list(conn.execute(select(t.cursors).order_by(t.cursors.c.topic, t.cursors.c.name))),
                pending=list(conn.execute(select(t.pending_deletions))),
                deleted_topics=list(conn.execute(select(t.deleted_topics))),
                journal=list(
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
                ),
                holds=load_holds(conn),
            )

    @property
    def scope(self) -> tuple[str, ...]:
        """The labels of a storage series: per namespace, or per namespace and topic with ``per_topic``."""
        return ("namespace", "topic") if self.per_topic else ("namespace",)

    def key(self, topic: str) -> tuple[str, ...]:
        return (namespace_of(topic), topic) if self.per_topic else (namespace_of(topic),)

    @cached_property
    def broker(self) -> Any:
        return self.store.broker_config()

    @cached_property
    def stored_ids(self) -> dict[str, dict[int, int]]:
        """topic -> ledger id -> bytes, of the ledgers in the ledger lists."""
        stored: dict[str, dict[int, int]] = defaultdict(dict)
        for row in self.ledgers:
            stored[row.topic][row.ledger_id] = row.size_bytes
        return stored


Collector = Callable[[StoreView], list[Family]]
