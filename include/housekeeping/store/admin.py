"""The admin paths of a live cluster, on this store, in the shape of ``pulsar-admin``: reset a subscription's cursor
to a position or a time, create or delete a subscription, delete a topic, change a namespace's or a topic's policies.

Housekeeping never calls these; operators and clients do, between runs and while a run sits between its snapshot and
its apply. Each is one metadata transaction that first locks what a running apply reads (the topic row ``FOR
UPDATE``, a namespace row by its update), so an apply batch either saw the change or holds it off until it commits
(``housekeeping.engine.live``); and each is journaled (mechanism ``admin``) with who did it, when (the caller's
clock, ``now_ms``: nothing here reads the wall clock) and what changed, before and after: the history the soak's
checker and the capacity forecast read. Bad input (an unknown topic or subscription, a malformed position, a
position past the topic's end, a policy out of range) raises ``InputError`` naming it, and changes nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, select, update

from housekeeping.core.actor import current_actor
from housekeeping.core.errors import InputError
from housekeeping.core.names import NamespaceName, TopicName
from housekeeping.core.policies import (
    POLICY_KEYS,
    BrokerConfig,
    namespace_retention,
    resolve_policies,
    validate_policies,
)
from housekeeping.core.positions import format_position, parse_position
from housekeeping.core.timeutil import format_ms
from housekeeping.store import metadata_schema as t
from housekeeping.store.clients import (
    create_cursor,
    cursor_row,
    initial_position,
    last_entry,
    lock_topic,
    stamp_last_active,
)
from housekeeping.store.journal import journal
from housekeeping.store.store import Store, write_transaction
from housekeeping.store.topic_rows import delete_topic_rows

# The journal's mechanism for every change made here; its action is the pulsar-admin command's name.
ADMIN = "admin"
COMPACTION_CURSOR = "__compaction"

Position = tuple[int, int]


def _journal(
    conn: Any, *, topic: str | None, action: str, detail: dict[str, Any], now_ms: int, actor: str | None
) -> str:
    run_id = f"{ADMIN}-{uuid.uuid4().hex[:12]}"
    journal(
        conn,
        run_id=run_id,
        mechanism=ADMIN,
        topic=topic,
        action=action,
        status="applied",
        detail=detail,
        as_of_ms=now_ms,
        actor=actor or current_actor(),
    )
    return run_id


def _ledgers(conn: Any, topic: str) -> list[Any]:
    return list(
        conn.execute(select(t.ledgers).where(t.ledgers.c.topic == topic).order_by(t.ledgers.c.ledger_id))
    )


# --- cursors --------------------------------------------------------------------------------------------------


def subscribe(
    store: Store,
    topic: str,
    subscription: str,
    *,
    now_ms: int,
    initial: str = "latest",
    durable: bool = True,
    actor: str | None = None,
) -> dict[str, Any]:
    """``pulsar-admin topics create-subscription``: a durable subscription (or a reader) at ``latest``, ``earliest``
    or a position ``ledgerId:entryId`` (the first message it reads: its mark-delete is the entry before),
    journaled."""
    with write_transaction(store.engine) as conn:
        lock_topic(conn, topic)
        if initial in ("latest", "earliest"):
            position = initial_position(conn, topic, initial)
        else:
            read = parse_position(initial, f"topic {topic} subscription {subscription!r}")
            position = _mark_delete_before(conn, topic, read, initial)
        create_cursor(conn, topic, subscription, position, now_ms=now_ms, durable=durable)
        detail = {
            "subscription": subscription,
            "durable": durable,
            "initial": initial,
            "markDelete": format_position(position),
        }
        detail["runId"] = _journal(
            conn, topic=topic, action="create-subscription", detail=detail, now_ms=now_ms, actor=actor
        )
    return {"topic": topic, **detail}


def reset_cursor(
    store: Store,
    topic: str,
    subscription: str,
    *,
    now_ms: int,
    position: str | None = None,
    time_ms: int | None = None,
    actor: str | None = None,
) -> dict[str, Any]:
    """``pulsar-admin topics reset-cursor``: move a subscription's cursor backward or forward, so that the next
    message it reads is the one at ``position`` (``ledgerId:entryId``), or the first one published at or after
    ``time_ms`` (Pulsar's ``PersistentSubscription#resetCursor(timestamp)``: the mark-delete goes to the newest
    entry published before it, or before the first entry when there is none). As Pulsar's
    ``ManagedCursorImpl#asyncResetCursor``, a position in a ledger the topic no longer has moves to the next one it
    has (a cursor never points into a deleted ledger); a position past the topic's end is refused. The compaction
    cursor is moved by compaction only."""
    if (position is None) == (time_ms is None):
        raise InputError(f"topic {topic} subscription {subscription!r}: give a position or a time, not both")
    if subscription == COMPACTION_CURSOR:
        raise InputError(f"topic {topic}: subscription {COMPACTION_CURSOR!r} is moved by compaction only")
    with write_transaction(store.engine) as conn:
        lock_topic(conn, topic)
        cursor = cursor_row(conn, topic, subscription)
        before = (cursor.mark_delete_ledger, cursor.mark_delete_entry)
        if position is not None:
            read = parse_position(position, f"topic {topic} subscription {subscription!r}")
            target = _mark_delete_before(conn, topic, read, position)
        else:
            assert time_ms is not None
            target = _mark_delete_by_time(store, conn, topic, time_ms)
        after = _reset_to(conn, topic, subscription, target, now_ms=now_ms)
        stamp_last_active(conn, topic, now_ms)
        detail = {
            "subscription": subscription,
            "durable": bool(cursor.durable),
            "from": format_position(before),
            "to": format_position(after),
            "requested": position if position is not None else format_ms(time_ms),
            "direction": "backward" if after < before else ("forward" if after > before else "unchanged"),
        }
        detail["runId"] = _journal(
            conn, topic=topic, action="reset-cursor", detail=detail, now_ms=now_ms, actor=actor
        )
    return {"topic": topic, **detail}


def _reset_to(
    conn: Any, topic: str, subscription: str, target: Position, *, now_ms: int | None = None
) -> Position:
    values: dict[str, Any] = {"mark_delete_ledger": target[0], "mark_delete_entry": target[1]}
    if now_ms is not None:
        values["last_active_ms"] = now_ms
    conn.execute(
        update(t.cursors)
        .where(and_(t.cursors.c.topic == topic, t.cursors.c.name == subscription))
        .values(**values)
    )
    return target


def _mark_delete_before(conn: Any, topic: str, read: Position, text: str) -> Position:
    """The mark-delete of a cursor whose next read is ``read``: the entry before it. A position in a ledger the topic
    no longer lists (or past a closed ledger's last entry) moves to the next valid one; past the topic's end is bad
    input."""
    ledgers = _ledgers(conn, topic)
    if read[1] < 0:
        raise InputError(f"topic {topic}: position {text!r} has a negative entry id")
    current = ledgers[-1]
    end = last_entry(conn, topic) or (current.ledger_id, -1)
    # The next message to be written is the furthest a cursor can be reset to ("latest").
    latest = (end[0], end[1] + 1) if end[0] == current.ledger_id else (current.ledger_id, 0)
    if read > latest:
        raise InputError(
            f"topic {topic}: position {text!r} is beyond the topic's end (its last entry is {format_position(end)})"
        )
    for ledger in ledgers:
        if ledger.ledger_id < read[0]:
            continue
        entry = read[1] if ledger.ledger_id == read[0] else 0
        if entry < ledger.entries or ledger.ledger_id == current.ledger_id:
            return (ledger.ledger_id, entry - 1)
    return (current.ledger_id, current.entries - 1)


def _mark_delete_by_time(store: Store, conn: Any, topic: str, time_ms: int) -> Position:
    """The newest entry published before ``time_ms`` (publish times taken as increasing, as Pulsar's binary search
    takes them), or before the topic's first entry when none was."""
    ledgers = _ledgers(conn, topic)
    found: Position = (ledgers[0].ledger_id, -1)
    for ledger in ledgers:
        if ledger.entries == 0 or ledger.min_entry_ts_ms is None:
            continue
        if ledger.min_entry_ts_ms >= time_ms:
            break
        if ledger.max_entry_ts_ms is not None and ledger.max_entry_ts_ms < time_ms:
            found = (ledger.ledger_id, ledger.entries - 1)
            continue
        if not ledger.entries_stored:
            raise InputError(
                f"topic {topic} ledger {ledger.ledger_id}: entries published around {format_ms(time_ms)} are metadata "
                "only (no entry file to search); reset by position instead"
            )
        times = store.read_ledger_entries(ledger, ["entryId", "publishTime"]).sort_by("entryId")
        for entry_id, published in zip(
            times.column("entryId").to_pylist(), times.column("publishTime").to_pylist(), strict=True
        ):
            if published >= time_ms:
                return found
            found = (ledger.ledger_id, entry_id)
        break
    return found


def delete_subscription(
    store: Store, topic: str, subscription: str, *, now_ms: int, force: bool = False, actor: str | None = None
) -> dict[str, Any]:
    """``pulsar-admin topics unsubscribe``: refused while consumers are connected, unless ``force`` (which
    disconnects them, as Pulsar's forced unsubscribe does)."""
    with write_transaction(store.engine) as conn:
        topic_row = lock_topic(conn, topic)
        cursor = cursor_row(conn, topic, subscription)
        if cursor.consumers > 0 and not force:
            raise InputError(
                f"topic {topic}: subscription {subscription!r} has {cursor.consumers} connected consumer(s); "
                "use --force to disconnect them"
            )
        conn.execute(
            t.cursors.delete().where(and_(t.cursors.c.topic == topic, t.cursors.c.name == subscription))
        )
        consumers = max(0, topic_row.consumers - cursor.consumers)
        conn.execute(update(t.topics).where(t.topics.c.name == topic).values(consumers=consumers))
        stamp_last_active(conn, topic, now_ms)  # Pulsar PersistentTopic#unsubscribe
        detail = {
            "subscription": subscription,
            "durable": bool(cursor.durable),
            "markDelete": format_position((cursor.mark_delete_ledger, cursor.mark_delete_entry)),
            "consumersDisconnected": int(cursor.consumers),
        }
        detail["runId"] = _journal(
            conn, topic=topic, action="unsubscribe", detail=detail, now_ms=now_ms, actor=actor
        )
    return {"topic": topic, **detail}


# --- topics ---------------------------------------------------------------------------------------------------


def delete_topic(
    store: Store,
    topic: str,
    *,
    now_ms: int,
    purge_grace_seconds: int,
    force: bool = False,
    actor: str | None = None,
) -> dict[str, Any]:
    """``pulsar-admin topics delete``: refused while producers or consumers are connected, unless ``force``. The
    topic's metadata goes at once, its ledgers to the pending-deletion log (purged after the grace period), every
    other row saved for ``housekeeping restore`` until then, as inactive-topic GC deletes a topic. A partition is
    deleted alone; a partitioned topic's metadata is not a topic."""
    if purge_grace_seconds < 0:
        raise InputError(f"purge grace period {purge_grace_seconds} s must be >= 0")
    with write_transaction(store.engine) as conn:
        row = conn.execute(select(t.topics).where(t.topics.c.name == topic).with_for_update()).first()
        if row is None:
            partitioned = conn.execute(
                select(t.partitioned_topics.c.name).where(t.partitioned_topics.c.name == topic)
            ).first()
            if partitioned is not None:
                raise InputError(
                    f"topic {topic} is a partitioned topic: delete its partitions ({topic}-partition-N)"
                )
            raise InputError(f"topic {topic} does not exist")
        if (row.producers or row.consumers) and not force:
            raise InputError(
                f"topic {topic} has {row.producers} producer(s) and {row.consumers} consumer(s) connected; use --force "
                "to disconnect them"
            )
        if force:
            # Pulsar's forced delete disconnects them: a restored topic comes back without them.
            conn.execute(update(t.topics).where(t.topics.c.name == topic).values(producers=0, consumers=0))
            conn.execute(update(t.cursors).where(t.cursors.c.topic == topic).values(consumers=0))
        run_id = f"{ADMIN}-{uuid.uuid4().hex[:12]}"
        ledgers, size = delete_topic_rows(
            conn, topic, run_id=run_id, as_of_ms=now_ms, purge_after_ms=now_ms + purge_grace_seconds * 1000
        )
        detail = {
            "ledgers": ledgers,
            "bytes": size,
            "forced": bool(force and (row.producers or row.consumers)),
            "purgeAfter": format_ms(now_ms + purge_grace_seconds * 1000),
            "runId": run_id,
        }
        journal(
            conn,
            run_id=run_id,
            mechanism=ADMIN,
            topic=topic,
            action="delete",
            status="applied",
            detail=detail,
            as_of_ms=now_ms,
            actor=actor or current_actor(),
        )
    return {"topic": topic, **detail}


# --- policies -------------------------------------------------------------------------------------------------


def policies_of(store: Store, target: str) -> dict[str, Any]:
    """A namespace's (``tenant/ns``) or topic's own policies as stored (``pulsar-admin namespaces policies``), and
    for a topic the effective ones (topic > namespace > broker)."""
    with write_transaction(store.engine) as conn:
        scope, own, namespace, namespace_policies = _policy_target(conn, target)
        found: dict[str, Any] = {"target": target, "scope": scope, "policies": own}
        if scope == "topic":
            effective = resolve_policies(target, own, namespace, namespace_policies, store.broker_config())
            found["effective"] = effective.to_json()
    return found


def set_policies(
    store: Store, target: str, changes: Mapping[str, Any], *, now_ms: int, actor: str | None = None
) -> dict[str, Any]:
    """Change a namespace's (``tenant/ns``) or a topic's (``persistent://...``) own policies: each key of ``changes``
    (a policy of the manifest's shape, ``retention_policies``, ``message_ttl_in_seconds``, ...) set to its value, or
    removed when the value is None (the level below applies again). The result is checked as a manifest's policies
    are (schema and Pulsar's rules) before anything is written; the journal keeps each changed policy before and
    after."""
    unknown = sorted(set(changes) - set(POLICY_KEYS))
    if unknown:
        raise InputError(f"{target}: unknown policy {unknown[0]!r} (known: {', '.join(POLICY_KEYS)})")
    broker = store.broker_config()
    with write_transaction(store.engine) as conn:
        scope, own, namespace, namespace_policies = _policy_target(conn, target, lock=True)
        updated = {**own, **changes}
        updated = {key: value for key, value in updated.items() if value is not None}
        _check_policies(target, scope, updated, namespace, namespace_policies, broker)
        if scope == "namespace":
            conn.execute(
                update(t.namespaces)
                .where(t.namespaces.c.name == target)
                .values(policies=json.dumps(updated, sort_keys=True))
            )
        else:
            conn.execute(
                update(t.topics)
                .where(t.topics.c.name == target)
                .values(policies=json.dumps(updated, sort_keys=True))
            )
        diff = {
            key: {"before": own.get(key), "after": updated.get(key)}
            for key in sorted(changes)
            if own.get(key) != updated.get(key)
        }
        # The level's whole policies before and after, beside the changed ones: the policy history
        # (housekeeping.store.policy_history) reads them.
        detail = {"scope": scope, "target": target, "changes": diff, "previous": own, "policies": updated}
        detail["runId"] = _journal(
            conn,
            topic=target if scope == "topic" else None,
            action="set-policies",
            detail=detail,
            now_ms=now_ms,
            actor=actor,
        )
    return detail


def _policy_target(
    conn: Any, target: str, *, lock: bool = False
) -> tuple[str, dict[str, Any], str, dict[str, Any]]:
    """(scope, its own policies, its namespace, the namespace's policies) of a namespace or topic name."""
    if "://" in target:
        name = TopicName.parse(target)
        query = select(t.topics.c.policies, t.topics.c.namespace).where(t.topics.c.name == target)
        row = conn.execute(query.with_for_update() if lock else query).first()
        if row is None:
            raise InputError(f"topic {target} does not exist")
        namespace = str(name.namespace_name)
        ns = conn.execute(
            select(t.namespaces.c.policies).where(t.namespaces.c.name == namespace)
        ).scalar_one()
        return "topic", json.loads(row.policies), namespace, json.loads(ns)
    NamespaceName.parse(target)
    row = conn.execute(select(t.namespaces.c.policies).where(t.namespaces.c.name == target)).first()
    if row is None:
        raise InputError(f"namespace {target} does not exist")
    own = json.loads(row.policies)
    return "namespace", own, target, own


def _check_policies(
    target: str,
    scope: str,
    policies: dict[str, Any],
    namespace: str,
    namespace_policies: dict[str, Any],
    broker: BrokerConfig,
) -> None:
    """The manifest's checks of one level's policies: its JSON schema, then Pulsar's rules (a backlog quota below
    the retention in force at that level, ...)."""
    from jsonschema import Draft202012Validator

    from housekeeping.store.manifest.validate import manifest_schema

    schema = manifest_schema()
    validator = Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/policies"})
    error = next(iter(sorted(validator.iter_errors(policies), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = " -> ".join(str(p) for p in error.absolute_path) or "policies"
        raise InputError(f"{scope} {target}: {where}: {error.message}")
    if scope == "namespace":
        validate_policies(f"namespace {target}", policies, namespace_retention(policies, broker))
        return
    effective = resolve_policies(target, policies, namespace, namespace_policies, broker)
    validate_policies(f"topic {target}", policies, effective.retention)
