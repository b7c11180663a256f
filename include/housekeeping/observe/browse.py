"""One namespace as an operator browses it: its policies in force and where each comes from (topic, namespace,
broker), a page of its topics (found by name) with their ledgers and subscriptions, the holds on it and the runs
that touched it; and one topic: its ledgers (times, tier, pending deletion), subscriptions, policies in force, holds
and runs. Read from the metadata a page at a time (SQL paging and grouping), so a namespace of 100,000 topics
reads as one of ten."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from sqlalchemy import case, func, select

from housekeeping.core.errors import InputError, NotFound
from housekeeping.core.names import NamespaceName, TopicName
from housekeeping.core.policies import resolve_policies
from housekeeping.core.timeutil import format_ms
from housekeeping.observe.journal_view import JournalFilter, journal_entries
from housekeeping.store import metadata_schema as t
from housekeeping.store.holds import covering_targets, list_holds
from housekeeping.store.store import Store, read_transaction

MAX_TOPICS = 1000


def namespace_view(
    store: Store, namespace: str, *, search: str | None = None, offset: int = 0, limit: int = 100
) -> dict[str, Any]:
    """``{"namespace", "policies", "effective", "topics": {"total", "offset", "limit", "rows"}, "holds", "runs"}``."""
    name = str(NamespaceName.parse(namespace))
    if not 1 <= limit <= MAX_TOPICS or offset < 0:
        raise InputError(f"limit must be between 1 and {MAX_TOPICS} and offset >= 0")
    n, tp = t.namespaces.c, t.topics.c
    with read_transaction(store.engine) as conn:
        row = conn.execute(select(n.policies).where(n.name == name)).first()
        if row is None:
            raise NotFound(f"no namespace {name} in store {store.root}")
        wanted = select(tp.name).where(tp.namespace == name)
        if search:
            wanted = wanted.where(tp.name.contains(search, autoescape=True))
        total = conn.execute(select(func.count()).select_from(wanted.subquery())).scalar_one()
        topics = conn.execute(
            select(tp.name, tp.policies, tp.producers, tp.consumers, tp.last_active_ms)
            .where(tp.name.in_(wanted.order_by(tp.name).offset(offset).limit(limit).scalar_subquery()))
            .order_by(tp.name)
        ).all()
        names = [topic.name for topic in topics]
        ledgers = _ledgers(conn, names)
        cursors = _cursors(conn, names)
        entries = journal_entries(conn, JournalFilter(namespace=name), limit=500, newest_first=True)
    policies = json.loads(row.policies)
    effective = resolve_policies(f"persistent://{name}/-", {}, name, policies, store.broker_config())
    return {
        "namespace": name,
        "policies": policies,
        "effective": _effective(effective),
        "topics": {
            "total": total,
            "offset": offset,
            "limit": limit,
            "rows": [
                {
                    "topic": topic.name,
                    "ownPolicies": sorted(json.loads(topic.policies)),
                    "producers": topic.producers,
                    "consumers": topic.consumers,
                    "lastActive": format_ms(topic.last_active_ms)
                    if topic.last_active_ms is not None
                    else None,
                    **ledgers.get(topic.name, {"ledgers": 0, "bytes": 0, "offloadedLedgers": 0}),
                    "subscriptions": cursors.get(topic.name, []),
                }
                for topic in topics
            ],
        },
        "holds": [
            h
            for h in list_holds(store)
            if h["target"] == name or h["target"].startswith(f"persistent://{name}/")
        ],
        "runs": _runs(entries),
    }


def topic_view(store: Store, topic: str) -> dict[str, Any]:
    """One topic: ``{"topic", "namespace", "policies", "effective", "producers", "consumers", "lastActive",
    "ledgers": [...], "pending": [...], "subscriptions": [...], "holds", "runs"}``; each ledger with its entries,
    bytes, first and last entry's publish time, when it closed (None: the one being written) and where it is
    (``local``, ``local+tier``: offloaded with its local copy still there, ``tier``)."""
    name = str(TopicName.parse(topic))
    g, p = t.ledgers.c, t.pending_deletions.c
    with read_transaction(store.engine) as conn:
        row = conn.execute(select(t.topics).where(t.topics.c.name == name)).first()
        if row is None:
            raise NotFound(f"no topic {name} in store {store.root}")
        namespace_policies = json.loads(
            conn.execute(
                select(t.namespaces.c.policies).where(t.namespaces.c.name == row.namespace)
            ).scalar_one()
        )
        ledgers = conn.execute(select(t.ledgers).where(g.topic == name).order_by(g.ledger_id)).all()
        pending = conn.execute(
            select(t.pending_deletions)
            .where(p.topic == name, p.status == "pending")
            .order_by(p.ledger_id, p.id)
        ).all()
        subscriptions = _cursors(conn, [name]).get(name, [])
        entries = journal_entries(conn, JournalFilter(topic=name), limit=500, newest_first=True)
    own = json.loads(row.policies)
    effective = resolve_policies(name, own, row.namespace, namespace_policies, store.broker_config())
    held = set(covering_targets(name))
    return {
        "topic": name,
        "namespace": row.namespace,
        "policies": own,
        "namespacePolicies": namespace_policies,
        "effective": _effective(effective),
        "producers": row.producers,
        "consumers": row.consumers,
        "lastActive": format_ms(row.last_active_ms) if row.last_active_ms is not None else None,
        "ledgers": [
            {
                "ledgerId": r.ledger_id,
                "entries": r.entries,
                "bytes": r.size_bytes,
                "firstEntry": format_ms(r.min_entry_ts_ms) if r.min_entry_ts_ms is not None else None,
                "lastEntry": format_ms(r.max_entry_ts_ms) if r.max_entry_ts_ms is not None else None,
                "closed": format_ms(r.closed_at_ms) if r.closed_at_ms is not None else None,
                "where": "tier" if r.local_deleted else ("local+tier" if r.offload_complete else "local"),
            }
            for r in ledgers
        ],
        "pending": [
            {
                "ledgerId": r.ledger_id,
                "kind": r.kind,
                "bytes": r.size_bytes,
                "runId": r.run_id,
                "deletedAsOf": format_ms(r.deleted_as_of_ms),
                "purgeAfter": format_ms(r.purge_after_ms),
            }
            for r in pending
        ],
        "subscriptions": subscriptions,
        "holds": [h for h in list_holds(store) if h["target"] in held],
        "runs": _runs(entries),
    }


def _effective(effective: Any) -> dict[str, Any]:
    """The policies in force, each with the level it comes from (topic, namespace, broker)."""
    plain = effective.to_json()
    return {
        "retention": {**plain["retention"], "source": effective.retention_source},
        "messageTtlSeconds": {"value": effective.message_ttl_seconds, "source": effective.message_ttl_source},
        "inactiveTopicPolicies": {
            **plain["inactive_topic_policies"],
            "source": effective.inactive_topic_policies_source,
        },
        "backlogQuotas": plain["backlog_quotas"],
    }


def _ledgers(conn: Any, names: list[str]) -> dict[str, dict[str, int]]:
    g = t.ledgers.c
    rows = conn.execute(
        select(
            g.topic,
            func.count().label("ledgers"),
            func.coalesce(func.sum(g.size_bytes), 0).label("bytes"),
            # CASE, not a cast: PostgreSQL casts no boolean to bigint (found by the live test on PostgreSQL).
            func.sum(case((g.offload_complete.is_(True), 1), else_=0)).label("offloaded"),
        )
        .where(g.topic.in_(names))
        .group_by(g.topic)
    ).all()
    return {
        r.topic: {"ledgers": int(r.ledgers), "bytes": int(r.bytes), "offloadedLedgers": int(r.offloaded or 0)}
        for r in rows
    }


def _cursors(conn: Any, names: list[str]) -> dict[str, list[dict[str, Any]]]:
    c = t.cursors.c
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in conn.execute(select(t.cursors).where(c.topic.in_(names)).order_by(c.topic, c.name)):
        found[r.topic].append(
            {
                "name": r.name,
                "durable": bool(r.durable),
                "markDelete": f"{r.mark_delete_ledger}:{r.mark_delete_entry}",
                "consumers": r.consumers,
                "lastActive": format_ms(r.last_active_ms) if r.last_active_ms is not None else None,
            }
        )
    return found


def _runs(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs and actions the journal records in the namespace, newest first, one row each."""
    seen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        run = str(entry.get("runId") or "")
        if run and run not in seen:
            seen[run] = {
                "runId": run.split("@")[0],
                "mechanism": entry.get("mechanism"),
                "at": entry.get("asOf"),
            }
    return list(seen.values())[:30]
