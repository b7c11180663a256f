"""The store's client-facing paths: what a broker does for producers and consumers, on this store.

Housekeeping never calls these; they are how a topic's state changes between runs (tests, simulations and
tools that feed a store use them, and so can anything that mirrors a live cluster into a store). Every
function takes the caller's clock as ``now_ms``: nothing here reads the wall clock.

``lastActive`` (``topics.last_active_ms``) is the last time the topic was known to be in use, and only ever
moves forward (``max``). It is set:

- when the topic is created (Pulsar: ``lastActive = now`` when a broker loads the topic) and loaded from a
  manifest's ``lastActive``; a loaded topic without one is stamped by the first GC run that sees it;
- when a producer disconnects (Pulsar ``AbstractTopic#handleProducerRemoved``) and when a subscription is
  removed (Pulsar ``PersistentTopic#unsubscribe``);
- by every inactive-topic GC run, for each topic it finds active (Pulsar ``checkGC``), and by the message
  expiry and backlog-quota applies for a topic whose cursor they move (the topic had a backlog, so it was
  active, until that moment);
- deliberately beyond Pulsar, when a consumer disconnects, and on publish and acknowledge. Pulsar's monitor
  looks every 60 s and stamps any topic it sees in use; these DAGs look once per schedule interval, so the
  moments a client stops being active are recorded where they happen. This only ever postpones a deletion.

Topic versions (compare-and-set tokens) change only when the ledger list changes (a ledger roll here;
trim, GC and restore in apply), so a steady stream of writes does not void a trim plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, or_, select, update

from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName
from housekeeping.core.positions import format_position, parse_position
from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store, new_incarnation, write_transaction

PRODUCER_BLOCKING_POLICIES = ("producer_request_hold", "producer_exception")


class ProducerBlocked(InputError):
    """A backlog quota with a producer policy is exceeded: the write path refuses new producers."""


def lock_topic(conn: Any, topic: str) -> Any:
    """The topic's row, locked until the caller's transaction ends (``FOR UPDATE``; SQLite's write transaction
    excludes every other writer already). Every client path takes it first: a running apply reads the topic, its
    cursors and its policies under the same lock (``housekeeping.engine.live``), so it sees a new or moved cursor
    whole or holds it off until it commits."""
    row = conn.execute(_LOCK_TOPIC, {"locked_topic": topic}).first()
    if row is None:
        raise InputError(f"topic {topic} does not exist")
    return row


_LOCK_TOPIC = select(t.topics).where(t.topics.c.name == bindparam("locked_topic")).with_for_update()


def _touch(conn: Any, topic: str, now_ms: int, **values: Any) -> None:
    """Update the topic row and move lastActive forward to ``now_ms`` (never backward)."""
    if values:
        conn.execute(update(t.topics).where(t.topics.c.name == topic).values(**values))
    stamp_last_active(conn, topic, now_ms)


def stamp_last_active(conn: Any, topic: str, when_ms: int) -> int:
    """lastActive = max(lastActive, when_ms) in the caller's transaction; returns rows changed (0 or 1)."""
    return conn.execute(_STAMP_LAST_ACTIVE, {"stamp_topic": topic, "stamp_ms": when_ms}).rowcount


# Compiled once: apply stamps every topic whose cursor it moves.
_STAMP_LAST_ACTIVE = (
    update(t.topics)
    .where(
        and_(
            t.topics.c.name == bindparam("stamp_topic"),
            or_(t.topics.c.last_active_ms.is_(None), t.topics.c.last_active_ms < bindparam("stamp_ms")),
        )
    )
    .values(last_active_ms=bindparam("stamp_ms"))
)


def next_ledger_id(conn: Any, topic: str) -> int:
    """Above every id the topic ever used, pending deletions and compacted ledgers included: a ledger directory
    of a deleted (still restorable) or compacted ledger must never be reused by a new one."""
    used = [
        conn.execute(select(func.max(table.c.ledger_id)).where(table.c.topic == topic)).scalar()
        for table in (t.ledgers, t.pending_deletions, t.compacted_ledgers)
    ]
    return max([u for u in used if u is not None], default=-1) + 1


def create_topic(store: Store, topic: str, *, now_ms: int, policies: Mapping[str, Any] | None = None) -> None:
    """A new non-partitioned topic (or partition) with an empty current ledger."""
    parsed = TopicName.parse(topic)
    namespace = str(parsed.namespace_name)
    with write_transaction(store.engine) as conn:
        if conn.execute(select(t.namespaces.c.name).where(t.namespaces.c.name == namespace)).first() is None:
            raise InputError(f"topic {topic}: namespace {namespace} does not exist")
        if conn.execute(select(t.topics.c.name).where(t.topics.c.name == topic)).first() is not None:
            raise InputError(f"topic {topic} already exists")
        if conn.execute(
            select(t.partitioned_topics.c.name).where(t.partitioned_topics.c.name == topic)
        ).first():
            raise InputError(f"topic {topic}: a partitioned topic has this name")
        conn.execute(
            insert(t.topics).values(
                name=topic,
                namespace=namespace,
                policies=json.dumps(dict(policies or {}), sort_keys=True),
                version=1,
                producers=0,
                consumers=0,
                last_active_ms=now_ms,
                incarnation=new_incarnation(),
            )
        )
        conn.execute(
            insert(t.ledgers).values(
                topic=topic,
                ledger_id=next_ledger_id(conn, topic),
                entries=0,
                size_bytes=0,
                closed_at_ms=None,
                entries_stored=False,  # an empty ledger has no file; the first publish writes one
            )
        )


def connect_producer(store: Store, topic: str, *, now_ms: int) -> None:
    with write_transaction(store.engine) as conn:
        lock_topic(conn, topic)
        q = t.backlog_quota_states.c
        blocked = conn.execute(
            select(q.quota_type, q.policy).where(
                and_(q.topic == topic, q.exceeded.is_(True), q.policy.in_(PRODUCER_BLOCKING_POLICIES))
            )
        ).first()
        if blocked is not None:
            raise ProducerBlocked(
                f"topic {topic}: backlog quota {blocked.quota_type} is exceeded ({blocked.policy}); "
                "new producers are refused until the backlog is back under the limit"
            )
        _touch(conn, topic, now_ms, producers=t.topics.c.producers + 1)


def disconnect_producer(store: Store, topic: str, *, now_ms: int) -> None:
    with write_transaction(store.engine) as conn:
        if lock_topic(conn, topic).producers < 1:
            raise InputError(f"topic {topic}: no producer is connected")
        _touch(conn, topic, now_ms, producers=t.topics.c.producers - 1)


def _current_ledger(conn: Any, topic: str) -> Any:
    return conn.execute(
        select(t.ledgers).where(t.ledgers.c.topic == topic).order_by(t.ledgers.c.ledger_id.desc()).limit(1)
    ).first()


def publish(store: Store, topic: str, messages: Iterable[Mapping[str, Any]], *, now_ms: int) -> list[str]:
    """Append messages (``key``, ``value`` str|None, optional ``publishTime``/``properties``) to the current
    ledger; returns their positions. Needs a connected producer. One writer per topic (as a broker owns a
    topic): the ledger file is rewritten whole and renamed, then the metadata commits."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from housekeeping.store.entries import ENTRY_SCHEMA, read_ledger, write_ledger

    batch = list(messages)
    if not batch:
        return []
    with write_transaction(store.engine) as conn:
        if lock_topic(conn, topic).producers < 1:
            raise InputError(f"topic {topic}: publish needs a connected producer")
        ledger = _current_ledger(conn, topic)
        if ledger.entries > 0 and not ledger.entries_stored:
            raise InputError(
                f"topic {topic} ledger {ledger.ledger_id}: entries are metadata only; cannot append"
            )
        ledger_dir = store.ledger_dir(topic, ledger.ledger_id, ledger.files_generation)
        # Only the entries the metadata committed: a publish whose commit failed after its file was written left
        # entries there that are not the topic's (their positions are this publish's to give).
        existing = (
            read_ledger(ledger_dir).filter(pc.field("entryId") < ledger.entries)
            if ledger.entries > 0
            else None
        )
        values = [None if m.get("value") is None else str(m["value"]).encode() for m in batch]
        publish_times = [int(m.get("publishTime", now_ms)) for m in batch]
        first = ledger.entries
        appended = pa.table(
            {
                "topic": [topic] * len(batch),
                "ledgerId": [ledger.ledger_id] * len(batch),
                "entryId": list(range(first, first + len(batch))),
                "publishTime": publish_times,
                "brokerTimestamp": [None] * len(batch),
                "key": [m.get("key") for m in batch],
                "value": values,
                "size": [0 if v is None else len(v) for v in values],
                "properties": [list((m.get("properties") or {}).items()) for m in batch],
            },
            schema=ENTRY_SCHEMA,
        )
        table = appended if existing is None else pa.concat_tables([existing, appended])
        write_ledger(ledger_dir, table)
        known = [ts for ts in (ledger.min_entry_ts_ms, ledger.max_entry_ts_ms) if ts is not None]
        low, high = min(known + publish_times), max(known + publish_times)
        conn.execute(
            update(t.ledgers)
            .where(and_(t.ledgers.c.topic == topic, t.ledgers.c.ledger_id == ledger.ledger_id))
            .values(
                entries=first + len(batch),
                size_bytes=ledger.size_bytes + sum(0 if v is None else len(v) for v in values),
                min_entry_ts_ms=low,
                max_entry_ts_ms=high,
                entries_stored=True,
            )
        )
        _touch(conn, topic, now_ms)
    return [format_position((ledger.ledger_id, first + i)) for i in range(len(batch))]


def roll_ledger(store: Store, topic: str, *, now_ms: int) -> int:
    """Close the current ledger at ``now_ms`` and open a new empty one (the ledger list changes: version + 1)."""
    with write_transaction(store.engine) as conn:
        lock_topic(conn, topic)
        ledger = _current_ledger(conn, topic)
        _drop_uncommitted(store, topic, ledger)
        conn.execute(
            update(t.ledgers)
            .where(and_(t.ledgers.c.topic == topic, t.ledgers.c.ledger_id == ledger.ledger_id))
            .values(closed_at_ms=now_ms)
        )
        new_id = next_ledger_id(conn, topic)
        conn.execute(
            insert(t.ledgers).values(
                topic=topic,
                ledger_id=new_id,
                entries=0,
                size_bytes=0,
                closed_at_ms=None,
                entries_stored=False,
            )
        )
        conn.execute(update(t.topics).where(t.topics.c.name == topic).values(version=t.topics.c.version + 1))
    return new_id


def _drop_uncommitted(store: Store, topic: str, ledger: Any) -> None:
    """A ledger closes at its last committed entry (BookKeeper's last add confirmed): entries a publish wrote to the
    file whose metadata never committed (the database went away mid-publish, and no later publish rewrote the file)
    are not the ledger's and leave with the close. Found by the 60-minute soak: such a tail outlived the roll and the
    store scrub rightly called the closed ledger's file a mismatch."""
    import pyarrow.compute as pc

    from housekeeping.store.entries import read_ledger, write_ledger
    from housekeeping.store.fs import remove_tree

    ledger_dir = store.ledger_dir(topic, ledger.ledger_id, ledger.files_generation)
    if not ledger_dir.is_dir():
        return
    table = read_ledger(ledger_dir)
    if table.num_rows <= ledger.entries:
        return
    if ledger.entries == 0 and not ledger.entries_stored:
        remove_tree(ledger_dir, within=store.ledgers_root)  # only a failed first publish ever wrote there
        return
    write_ledger(ledger_dir, table.filter(pc.field("entryId") < ledger.entries))


def last_entry(conn: Any, topic: str) -> tuple[int, int] | None:
    """The topic's last entry (newest ledger with entries, its last entry id); None when nothing was written."""
    row = conn.execute(_LAST_LEDGER_WITH_ENTRIES, {"last_topic": topic}).first()
    return None if row is None else (row.ledger_id, row.entries - 1)


# Compiled once: GC's re-check reads it for every topic it deletes in caught-up mode.
_LAST_LEDGER_WITH_ENTRIES = (
    select(t.ledgers.c.ledger_id, t.ledgers.c.entries)
    .where(and_(t.ledgers.c.topic == bindparam("last_topic"), t.ledgers.c.entries > 0))
    .order_by(t.ledgers.c.ledger_id.desc())
    .limit(1)
)


def _last_position(conn: Any, topic: str) -> tuple[int, int]:
    """The last entry, or (current ledger, -1) when nothing was ever written."""
    return last_entry(conn, topic) or (_current_ledger(conn, topic).ledger_id, -1)


def subscribe(
    store: Store, topic: str, name: str, *, now_ms: int, durable: bool = True, initial: str = "latest"
) -> str:
    """Create a subscription (durable cursor) or a reader (non-durable); returns its mark-delete position."""
    with write_transaction(store.engine) as conn:
        lock_topic(conn, topic)
        position = initial_position(conn, topic, initial)
        create_cursor(conn, topic, name, position, now_ms=now_ms, durable=durable)
    return format_position(position)


def initial_position(conn: Any, topic: str, initial: str) -> tuple[int, int]:
    """The mark-delete a new subscription starts at: ``latest`` (the last entry: it reads what comes next) or
    ``earliest`` (before the topic's first ledger: it reads everything the topic still has)."""
    if initial == "latest":
        return _last_position(conn, topic)
    if initial == "earliest":
        first = conn.execute(
            select(func.min(t.ledgers.c.ledger_id)).where(t.ledgers.c.topic == topic)
        ).scalar_one()
        return (first, -1)
    raise InputError(f"topic {topic}: initial position must be latest or earliest, got {initial!r}")


def create_cursor(
    conn: Any, topic: str, name: str, position: tuple[int, int], *, now_ms: int, durable: bool = True
) -> None:
    """A new cursor at mark-delete ``position``, in the caller's transaction (the topic locked: :func:`lock_topic`)."""
    if not name:
        raise InputError(f"topic {topic}: a subscription name must not be empty")
    exists = conn.execute(
        select(t.cursors.c.name).where(and_(t.cursors.c.topic == topic, t.cursors.c.name == name))
    ).first()
    if exists:
        raise InputError(f"topic {topic}: subscription {name!r} already exists")
    conn.execute(
        insert(t.cursors).values(
            topic=topic,
            name=name,
            durable=durable,
            mark_delete_ledger=position[0],
            mark_delete_entry=position[1],
            last_active_ms=now_ms,
            consumers=0,
        )
    )
    _touch(conn, topic, now_ms)


def cursor_row(conn: Any, topic: str, name: str) -> Any:
    """A subscription's cursor row (bad input naming it when the topic has none of that name)."""
    row = conn.execute(
        select(t.cursors).where(and_(t.cursors.c.topic == topic, t.cursors.c.name == name))
    ).first()
    if row is None:
        raise InputError(f"topic {topic}: subscription {name!r} does not exist")
    return row


def unsubscribe(store: Store, topic: str, name: str, *, now_ms: int) -> None:
    """Delete a subscription. Refused while consumers are connected (as Pulsar without ``force``)."""
    with write_transaction(store.engine) as conn:
        lock_topic(conn, topic)
        if cursor_row(conn, topic, name).consumers > 0:
            raise InputError(f"topic {topic}: subscription {name!r} has connected consumers")
        conn.execute(t.cursors.delete().where(and_(t.cursors.c.topic == topic, t.cursors.c.name == name)))
        _touch(conn, topic, now_ms)


def connect_consumer(store: Store, topic: str, subscription: str, *, now_ms: int) -> None:
    with write_transaction(store.engine) as conn:
        lock_topic(conn, topic)
        cursor_row(conn, topic, subscription)
        conn.execute(
            update(t.cursors)
            .where(and_(t.cursors.c.topic == topic, t.cursors.c.name == subscription))
            .values(consumers=t.cursors.c.consumers + 1, last_active_ms=now_ms)
        )
        _touch(conn, topic, now_ms, consumers=t.topics.c.consumers + 1)


def disconnect_consumer(store: Store, topic: str, subscription: str, *, now_ms: int) -> None:
    with write_transaction(store.engine) as conn:
        lock_topic(conn, topic)
        if cursor_row(conn, topic, subscription).consumers < 1:
            raise InputError(f"topic {topic}: subscription {subscription!r} has no connected consumer")
        conn.execute(
            update(t.cursors)
            .where(and_(t.cursors.c.topic == topic, t.cursors.c.name == subscription))
            .values(consumers=t.cursors.c.consumers - 1, last_active_ms=now_ms)
        )
        _touch(conn, topic, now_ms, consumers=t.topics.c.consumers - 1)


def acknowledge(store: Store, topic: str, subscription: str, position: str, *, now_ms: int) -> str:
    """Cumulative acknowledgement: the mark-delete moves forward to ``position`` (never backward, never past
    the topic's last entry). Returns the mark-delete position after the call."""
    with write_transaction(store.engine) as conn:
        lock_topic(conn, topic)
        cursor = cursor_row(conn, topic, subscription)
        target = parse_position(position, f"topic {topic} subscription {subscription!r}")
        last = _last_position(conn, topic)
        if target > last:
            raise InputError(
                f"topic {topic} subscription {subscription!r}: {position} is beyond the last entry "
                f"{format_position(last)}"
            )
        current = (cursor.mark_delete_ledger, cursor.mark_delete_entry)
        if target > current:
            conn.execute(
                update(t.cursors)
                .where(and_(t.cursors.c.topic == topic, t.cursors.c.name == subscription))
                .values(mark_delete_ledger=target[0], mark_delete_entry=target[1], last_active_ms=now_ms)
            )
            current = target
        _touch(conn, topic, now_ms)
    return format_position(current)


def create_partitioned_topic(store: Store, name: str, partitions: int, *, now_ms: int) -> list[str]:
    """Partitioned-topic metadata plus its partitions ``<name>-partition-<i>`` (as the admin API does)."""
    parsed = TopicName.parse(name)
    if parsed.partitioned_parent is not None:
        raise InputError(f"partitioned topic {name}: a partition name cannot be a partitioned topic")
    if partitions < 1:
        raise InputError(f"partitioned topic {name}: partitions={partitions} must be >= 1")
    with write_transaction(store.engine) as conn:
        if conn.execute(
            select(t.partitioned_topics.c.name).where(t.partitioned_topics.c.name == name)
        ).first():
            raise InputError(f"partitioned topic {name} already exists")
        if conn.execute(select(t.topics.c.name).where(t.topics.c.name == name)).first():
            raise InputError(f"partitioned topic {name}: a non-partitioned topic has this name")
        conn.execute(
            insert(t.partitioned_topics).values(
                name=name, namespace=str(parsed.namespace_name), partitions=partitions
            )
        )
    names = [f"{name}-partition-{i}" for i in range(partitions)]
    for partition in names:
        create_topic(store, partition, now_ms=now_ms)
    return names
