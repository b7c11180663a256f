"""A store back in the manifest's shape (``housekeeping inspect``), with facts of the store under ``store``;
with ``--messages`` every ledger's entries too (the compacted ledger's then load again)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from housekeeping.store import metadata_schema as t
from housekeeping.store.manifest.model import MANIFEST_VERSION
from housekeeping.store.store import Store, read_transaction


@dataclass
class _StoreRows:
    """What an export reads, in one read transaction."""

    broker: dict[str, Any]
    namespaces: dict[str, Any]
    topics: list[Any]
    partitioned: dict[str, Any]
    ledgers: dict[str, list[Any]]
    cursors: dict[str, list[Any]]
    compacted: list[Any]
    quota_states: list[dict[str, Any]]

    @classmethod
    def read(cls, store: Store) -> _StoreRows:
        with read_transaction(store.engine) as conn:
            broker = conn.execute(
                select(t.store_settings.c.value).where(t.store_settings.c.key == "broker")
            ).first()
            ledgers: dict[str, list[Any]] = {}
            for r in conn.execute(select(t.ledgers).order_by(t.ledgers.c.topic, t.ledgers.c.ledger_id)):
                ledgers.setdefault(r.topic, []).append(r)
            cursors: dict[str, list[Any]] = {}
            for r in conn.execute(select(t.cursors).order_by(t.cursors.c.topic, t.cursors.c.name)):
                cursors.setdefault(r.topic, []).append(r)
            quotas = t.backlog_quota_states
            return cls(
                broker=json.loads(broker[0]) if broker else {},
                namespaces={
                    r.name: json.loads(r.policies)
                    for r in conn.execute(select(t.namespaces).order_by(t.namespaces.c.name))
                },
                topics=list(conn.execute(select(t.topics).order_by(t.topics.c.name))),
                partitioned={
                    r.name: {"partitions": r.partitions}
                    for r in conn.execute(select(t.partitioned_topics).order_by(t.partitioned_topics.c.name))
                },
                ledgers=ledgers,
                cursors=cursors,
                compacted=list(
                    conn.execute(
                        select(t.compacted_ledgers)
                        .where(t.compacted_ledgers.c.status == "current")
                        .order_by(t.compacted_ledgers.c.topic)
                    )
                ),
                quota_states=[
                    _quota_state(r)
                    for r in conn.execute(select(quotas).order_by(quotas.c.topic, quotas.c.quota_type))
                ],
            )


def _quota_state(r: Any) -> dict[str, Any]:
    return {
        "topic": r.topic,
        "quotaType": r.quota_type,
        "policy": r.policy,
        "exceeded": bool(r.exceeded),
        "limit": r.limit_value,
        "measured": r.measured_value,
        "exceededSinceMs": r.exceeded_since_ms,
        "clearedAtMs": r.cleared_at_ms,
        "asOfMs": r.as_of_ms,
    }


def _compacted_facts(row: Any) -> dict[str, Any]:
    return {
        "ledgerId": row.ledger_id,
        "horizon": f"{row.horizon_ledger}:{row.horizon_entry}",
        "entries": row.entries,
        "size": row.size_bytes,
        "compactedAsOfMs": row.compacted_as_of_ms,
    }


def _ledger_body(r: Any) -> dict[str, Any]:
    """A ledger as stats-internal shows it (``offloaded``: its offload completed), with its offload context when an
    offload was ever attempted."""
    body: dict[str, Any] = {"ledgerId": r.ledger_id, "entries": r.entries, "size": r.size_bytes}
    if r.closed_at_ms is not None:
        body["timestamp"] = r.closed_at_ms
    if r.offload_uuid is not None:
        body["offloaded"] = bool(r.offload_complete)
        body["offloadContext"] = {
            "complete": bool(r.offload_complete),
            **({"timestamp": r.offloaded_at_ms} if r.offloaded_at_ms is not None else {}),
            "bookkeeperDeleted": bool(r.local_deleted),
        }
    return body


def _topic_body(rows: _StoreRows, topic: Any) -> dict[str, Any]:
    """A topic in the manifest's shape (without its messages)."""
    body: dict[str, Any] = {}
    policies = json.loads(topic.policies)
    if policies:
        body["policies"] = policies
    body["ledgers"] = [_ledger_body(r) for r in rows.ledgers.get(topic.name, [])]
    body["cursors"] = {
        r.name: {
            "markDeletePosition": f"{r.mark_delete_ledger}:{r.mark_delete_entry}",
            "durable": bool(r.durable),
            **({"lastActive": r.last_active_ms} if r.last_active_ms is not None else {}),
            **({"consumers": r.consumers} if r.consumers else {}),
        }
        for r in rows.cursors.get(topic.name, [])
    }
    body["producers"], body["consumers"] = topic.producers, topic.consumers
    if topic.last_active_ms is not None:
        body["lastActive"] = topic.last_active_ms
    return body


def _add_messages(store: Store, rows: _StoreRows, topic: Any, body: dict[str, Any], compacted: Any) -> None:
    """The topic's raw entries, and its compacted ledger loadable with its entries (docs/manifest.md; without
    them the compacted ledger stays a fact under ``store``)."""
    body["messages"] = _read_messages(store, topic.name, rows.ledgers.get(topic.name, []))
    if compacted is not None:
        body["compactedLedger"] = {
            "ledgerId": compacted.ledger_id,
            "entries": compacted.entries,
            "size": compacted.size_bytes,
            "compactedAt": compacted.compacted_as_of_ms,
            "messages": _ledger_messages(store, compacted),
        }


def export_manifest(store: Store, *, with_messages: bool = False) -> dict[str, Any]:
    """The store's current state in the manifest's shape, plus facts of the store under ``store``."""
    rows = _StoreRows.read(store)
    compacted = {r.topic: r for r in rows.compacted}
    out_topics: dict[str, Any] = {}
    for topic in rows.topics:
        body = _topic_body(rows, topic)
        if with_messages:
            _add_messages(store, rows, topic, body, compacted.get(topic.name))
        out_topics[topic.name] = body
    return {
        "manifestVersion": MANIFEST_VERSION,
        "broker": rows.broker,
        "namespaces": rows.namespaces,
        "topics": out_topics,
        **({"partitionedTopics": rows.partitioned} if rows.partitioned else {}),
        # Facts of this store, not part of a cluster's description; `load` ignores them.
        "store": {
            "root": str(store.root),
            "metadata": store.safe_url,
            "topicVersions": {topic.name: topic.version for topic in rows.topics},
            "backlogQuotaStates": rows.quota_states,
            # Compacted ledgers in force (topic compaction); with --messages each is also under its topic's
            # compactedLedger, which load accepts.
            **(
                {"compactedLedgers": {r.topic: _compacted_facts(r) for r in rows.compacted}}
                if compacted
                else {}
            ),
        },
    }


def _read_messages(store: Store, topic: str, ledger_rows: list) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in ledger_rows:
        if row.entries_stored and row.entries > 0:
            out += _ledger_messages(store, row)
    return out


def _ledger_messages(store: Store, row: Any) -> list[dict[str, Any]]:
    """A ledger's entries as manifest messages (a compacted ledger's at their original positions), read where the
    ledger is: its local copy, or the object tier once the local copy is gone."""
    out: list[dict[str, Any]] = []
    for rec in store.read_ledger_entries(row).to_pylist():
        message = {
            "ledgerId": rec["ledgerId"],
            "entryId": rec["entryId"],
            "publishTime": rec["publishTime"],
        }
        if rec["brokerTimestamp"] is not None:
            message["brokerTimestamp"] = rec["brokerTimestamp"]
        if rec["key"] is not None:
            message["key"] = rec["key"]
        message["value"] = None if rec["value"] is None else rec["value"].decode("utf-8", "replace")
        if rec["properties"]:
            message["properties"] = dict(rec["properties"])
        out.append(message)
    return out
