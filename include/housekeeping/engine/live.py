"""What apply re-checks: each topic as it is inside apply's transaction, beside the snapshot its plan was made on.

A plan is made on a snapshot and applied minutes to a day later (the plan, the gate, a person's approval). Meanwhile
subscriptions are created and cursors reset, policies change, topics are deleted and created again. Apply therefore
re-derives the bound where it acts, as Pulsar's trim reads the slowest reader and the policy under the ledger's lock
as it trims (``ManagedLedgerImpl#internalTrimLedgers``): in each topic's transaction it reads the topic now
(:class:`TopicNow`: its row, its cursors, the policies in force, resolved as the snapshot resolves them) and the
mechanism narrows the topic's planned rows to what that state allows (``Mechanism.recheck``, a :class:`Narrowed`):
the same rows, fewer or narrower ones, or none, never more. The snapshot's side is a :class:`TopicThen`.

The reads lock what they read until the topic's transaction commits: the topic rows ``FOR UPDATE`` (every client path
that creates or moves a cursor, or changes a topic's policies, locks the topic row first, so it waits for apply's
commit or apply waits for its), the namespace rows ``FOR SHARE`` (a namespace policy change waits). SQLite's write
transaction already excludes every other writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sqlalchemy import bindparam, select

from housekeeping.core.names import is_system_topic_name
from housekeeping.core.policies import BrokerConfig, resolve_policies
from housekeeping.core.positions import format_position
from housekeeping.store import metadata_schema as t

Position = tuple[int, int]


# Plain slotted classes, not frozen dataclasses: apply makes one per cursor of every topic it acts on.
@dataclass(slots=True)
class CursorState:
    """A cursor, now or in the snapshot; now, with the entry count of the ledger its mark-delete is in
    (``ledger_entries``; None when that ledger is not listed), which tells whether it consumed that ledger whole."""

    name: str
    durable: bool
    position: Position
    consumers: int = 0
    ledger_entries: int | None = None

    def past(self, ledger_id: int) -> bool:
        """Whether it has consumed ledger ``ledger_id`` whole, known from itself alone: in a later ledger, or on the
        last entry of that one (its entry count read with it)."""
        if self.position[0] != ledger_id:
            return self.position[0] > ledger_id
        return self.ledger_entries is not None and self.position[1] >= self.ledger_entries - 1

    def describe(self) -> str:
        return f"{'durable subscription' if self.durable else 'reader'} {self.name!r} at {format_position(self.position)}"


@dataclass(frozen=True)
class LedgerNow:
    """A ledger of the topic's list now (what a re-derivation of a bound reads)."""

    ledger_id: int
    entries: int
    size: int
    closed_at_ms: int | None

    @property
    def last_position(self) -> Position:
        """Its last entry (``L:-1`` when empty): a cursor at or past it has consumed the whole ledger."""
        return (self.ledger_id, self.entries - 1)


@dataclass(frozen=True)
class Narrowed:
    """A topic's planned rows as the store now allows them: ``rows`` (the plan's, or fewer, or narrower: never
    more), and ``why`` they differ from the plan (None: as planned). No rows: the topic is left alone."""

    rows: list[dict[str, Any]]
    why: str | None = None

    @classmethod
    def as_planned(cls, rows: list[dict[str, Any]]) -> Narrowed:
        return cls(rows)

    @classmethod
    def nothing(cls, why: str) -> Narrowed:
        return cls([], why)

    @property
    def narrowed(self) -> bool:
        return self.why is not None


class TopicNow:
    """One topic as apply's transaction read it (and locked it): its row, its effective policies (``policies``: the
    same JSON document the snapshot records), its cursors and its ledgers (read when first asked)."""

    def __init__(
        self,
        conn: Any,
        name: str,
        namespace: str,
        version: int,
        incarnation: str | None,
        document: str,
        cursors: tuple[CursorState, ...] | None = None,
        ledgers: list[LedgerNow] | None = None,
    ) -> None:
        self._conn = conn
        self.name, self.namespace, self.version, self.incarnation = name, namespace, version, incarnation
        self.document = document
        self._cursors, self._ledgers = cursors, ledgers

    @cached_property
    def policies(self) -> dict[str, Any]:
        return json.loads(self.document)

    @property
    def cursors(self) -> tuple[CursorState, ...]:
        if self._cursors is None:
            self._cursors = tuple(_cursors_of(self._conn, [self.name]).get(self.name, ()))
        return self._cursors

    @property
    def durable(self) -> list[CursorState]:
        return [c for c in self.cursors if c.durable]

    @property
    def ledgers(self) -> list[LedgerNow]:
        """The topic's ledgers now, oldest first."""
        if self._ledgers is None:
            rows = self._conn.execute(_LEDGERS_OF, {"live_topic": self.name})
            self._ledgers = [LedgerNow(r.ledger_id, r.entries, r.size_bytes, r.closed_at_ms) for r in rows]
        return self._ledgers

    def ledger(self, ledger_id: int) -> LedgerNow | None:
        return next((ledger for ledger in self.ledgers if ledger.ledger_id == ledger_id), None)


@dataclass
class TopicThen:
    """One topic in the run's snapshot: its version, incarnation and policies document, and its cursors (read from
    the snapshot when first asked: most re-checks never need them)."""

    version: int
    incarnation: str | None
    document: str
    read_cursors: Callable[[], tuple[CursorState, ...]] = field(repr=False, default=lambda: ())
    # False for a snapshot taken before topics had an incarnation: only the version can be compared.
    incarnation_known: bool = True

    @cached_property
    def policies(self) -> dict[str, Any]:
        return json.loads(self.document)

    @cached_property
    def cursors(self) -> dict[str, CursorState]:
        return {c.name: c for c in self.read_cursors()}


def changed(then: TopicThen, now: TopicNow, key: str) -> tuple[Any, Any] | None:
    """(then, now) of one effective policy (a key of ``EffectivePolicies.to_json()``: ``retention``,
    ``message_ttl_seconds``, ``backlog_quotas``, ``offload``, ...) when it differs; None when it is the same (where
    it came from does not count)."""
    if then.document == now.document:
        return None
    before, after = then.policies.get(key), now.policies.get(key)
    return None if before == after else (before, after)


def policy_changes(then: TopicThen, now: TopicNow, keys: Iterable[str] | None = None) -> str:
    """The effective policies (of ``keys``, default all) that differ between the snapshot and now, for a person:
    ``retention {...} -> {...}``; where a value came from is left out."""
    names = sorted(set(then.policies) | set(now.policies)) if keys is None else list(keys)
    parts = [
        f"{key} {json.dumps(then.policies.get(key), sort_keys=True)} -> {json.dumps(now.policies.get(key), sort_keys=True)}"
        for key in names
        if not key.endswith("_source") and then.policies.get(key) != now.policies.get(key)
    ]
    return "; ".join(parts) or "where they are set"


def moved_back(then: TopicThen, now: TopicNow) -> list[str]:
    """The durable cursors now behind where the snapshot had them, or that it did not have: each described, with
    what changed ("created after the snapshot", "reset from 7:3")."""
    found = []
    for cursor in now.durable:
        before = then.cursors.get(cursor.name)
        if before is None or not before.durable:
            found.append(f"{cursor.describe()} (created after the snapshot)")
        elif cursor.position < before.position:
            found.append(
                f"{cursor.describe()} (reset from {format_position(before.position)} since the snapshot)"
            )
    return found


def topic_replaced(then: TopicThen, now: TopicNow | None) -> str | None:
    """Why the topic the plan names is not the one the store has now (None: it is): gone, or deleted and created
    again under its name (another incarnation; its version alone may match)."""
    if now is None:
        return "topic no longer exists"
    if then.incarnation_known and then.incarnation != now.incarnation:
        return "topic was deleted and created again under its name since the snapshot"
    return None


class PoliciesNow:
    """The effective policies document of topics now, resolved as the snapshot resolves them (topic > namespace >
    broker): a topic that sets no policy of its own shares its namespace's document with every such topic (per
    namespace policies text and system-topic flag), so a batch resolves a few documents, not one per topic."""

    def __init__(self, broker: BrokerConfig) -> None:
        self._broker = broker
        self._shared: dict[tuple[str, str, bool], str] = {}

    def document(self, topic: str, topic_policies: str, namespace: str, namespace_policies: str) -> str:
        own = {} if topic_policies == "{}" else json.loads(topic_policies)
        if own:
            return self._resolve(topic, own, namespace, namespace_policies)
        key = (namespace, namespace_policies, is_system_topic_name(topic))
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = self._resolve(topic, own, namespace, namespace_policies)
        return found

    def _resolve(self, topic: str, own: Mapping[str, Any], namespace: str, namespace_policies: str) -> str:
        return resolve_policies(
            topic, own, namespace, json.loads(namespace_policies), self._broker
        ).document()


# Statements compiled once, names bound as one expanding list of at most _PER_STATEMENT (under every database's
# parameter limit). Topic rows are locked until the caller's transaction commits; namespace rows share-locked.
_PER_STATEMENT = 500
_TOPICS_NOW = (
    select(
        t.topics.c.name, t.topics.c.version, t.topics.c.namespace, t.topics.c.incarnation, t.topics.c.policies
    )
    .where(t.topics.c.name.in_(bindparam("live_topics", expanding=True)))
    .order_by(t.topics.c.name)
    .with_for_update()
)
_NAMESPACES_NOW = (
    select(t.namespaces.c.name, t.namespaces.c.policies)
    .where(t.namespaces.c.name.in_(bindparam("live_namespaces", expanding=True)))
    .order_by(t.namespaces.c.name)
    .with_for_update(read=True)
)
# With the entry count of the ledger each mark-delete is in (its primary key: one lookup per cursor), so a cursor on
# a planned ledger's last entry is known to have consumed it without reading the topic's ledgers.
_CURSORS_NOW = (
    select(
        t.cursors.c.topic,
        t.cursors.c.name,
        t.cursors.c.durable,
        t.cursors.c.mark_delete_ledger,
        t.cursors.c.mark_delete_entry,
        t.cursors.c.consumers,
        t.ledgers.c.entries,
    )
    .select_from(
        t.cursors.outerjoin(
            t.ledgers,
            (t.ledgers.c.topic == t.cursors.c.topic)
            & (t.ledgers.c.ledger_id == t.cursors.c.mark_delete_ledger),
        )
    )
    .where(t.cursors.c.topic.in_(bindparam("live_topics", expanding=True)))
    .order_by(t.cursors.c.topic, t.cursors.c.name)
)
_LEDGERS_OF = (
    select(t.ledgers.c.ledger_id, t.ledgers.c.entries, t.ledgers.c.size_bytes, t.ledgers.c.closed_at_ms)
    .where(t.ledgers.c.topic == bindparam("live_topic"))
    .order_by(t.ledgers.c.ledger_id)
)


def _chunks(names: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(names), _PER_STATEMENT):
        yield names[start : start + _PER_STATEMENT]


def _cursors_of(conn: Any, topics: list[str]) -> dict[str, list[CursorState]]:
    # Rows unpacked as tuples: a Row's attribute lookups were most of this loop's time at 100,000 topics.
    found: dict[str, list[CursorState]] = {}
    for chunk in _chunks(topics):
        for topic, name, durable, ledger, entry, consumers, entries in conn.execute(
            _CURSORS_NOW, {"live_topics": chunk}
        ):
            found.setdefault(topic, []).append(
                CursorState(name, bool(durable), (ledger, entry), int(consumers or 0), entries)
            )
    return found


def read_topics_now(
    conn: Any, topics: list[str], policies: PoliciesNow, *, cursors: bool
) -> dict[str, TopicNow]:
    """Each of ``topics`` the metadata has now, read and locked in ``conn``'s transaction (see the module
    docstring), with its effective policies and, when ``cursors``, its cursors (one statement for them all; else
    each topic reads its own when first asked)."""
    rows = [
        tuple(r)
        for chunk in _chunks(sorted(topics))
        for r in conn.execute(_TOPICS_NOW, {"live_topics": chunk})
    ]
    namespaces = sorted({namespace for _, _, namespace, _, _ in rows})
    namespace_policies = {
        name: text
        for chunk in _chunks(namespaces)
        for name, text in conn.execute(_NAMESPACES_NOW, {"live_namespaces": chunk})
    }
    by_topic = _cursors_of(conn, [row[0] for row in rows]) if cursors else {}
    document = policies.document
    return {
        name: TopicNow(
            conn,
            name,
            namespace,
            version,
            incarnation,
            document(name, own, namespace, namespace_policies[namespace]),
            tuple(by_topic.get(name, ())) if cursors else None,
        )
        for name, version, namespace, incarnation, own in rows
    }
