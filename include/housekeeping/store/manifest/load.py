"""A manifest into a store (``housekeeping load``): read and validate it completely (JSON syntax, the schema,
Pulsar's rules, the messages against their ledgers) before anything changes; stage the entries, replace the metadata
in one transaction, then swap the ledger tree in."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert

from housekeeping.core.errors import InputError
from housekeeping.core.names import TopicName
from housekeeping.core.positions import parse_position
from housekeeping.store import metadata_schema as t
from housekeeping.store.fs import remove_tree
from housekeeping.store.manifest.model import (
    MANIFEST_VERSION,
    CompactedLedgerSpec,
    CursorSpec,
    LedgerSpec,
    OffloadSpec,
    StoreContent,
    TopicSpec,
    compaction_horizon,
)
from housekeeping.store.manifest.validate import validate_content, validate_schema
from housekeeping.store.store import LEDGERS_DIR, Store, migrate, new_incarnation, write_transaction
from housekeeping.store.tier import new_attempt_uuid, object_key, tier_of_settings


def read_manifest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError(f"manifest {path} does not exist")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"manifest {path} is not valid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"manifest {path} is not UTF-8 text: {exc}") from None


def content_from_manifest(document: Mapping[str, Any], source: str) -> tuple[StoreContent, dict[str, list]]:
    """Returns the content and, per topic, the manifest's messages (empty when none were given)."""
    validate_schema(document, source)
    topics: list[TopicSpec] = []
    messages: dict[str, list] = {}
    for name, body in document.get("topics", {}).items():
        cursors = [
            CursorSpec(
                name=cursor_name,
                durable=bool(cursor.get("durable", True)),
                mark_delete=parse_position(
                    cursor["markDeletePosition"], f"topic {name} cursor {cursor_name!r}"
                ),
                last_active_ms=cursor.get("lastActive"),
                consumers=cursor.get("consumers", 0),
            )
            for cursor_name, cursor in body.get("cursors", {}).items()
        ]
        topics.append(
            TopicSpec(
                name=name,
                policies=dict(body.get("policies", {})),
                ledgers=[_ledger_spec(ledger) for ledger in body["ledgers"]],
                cursors=cursors,
                producers=body.get("producers", 0),
                consumers=body.get("consumers", 0),
                last_active_ms=body.get("lastActive"),
                compacted=_compacted_spec(body.get("compactedLedger")),
            )
        )
        messages[name] = list(body.get("messages", []))
    content = StoreContent(
        broker=dict(document.get("broker", {})),
        namespaces={name: dict(p) for name, p in document.get("namespaces", {}).items()},
        topics=topics,
        partitioned_topics={
            name: int(body["partitions"]) for name, body in document.get("partitionedTopics", {}).items()
        },
    )
    return content, messages


def _ledger_spec(ledger: Mapping[str, Any]) -> LedgerSpec:
    context = ledger.get("offloadContext")
    offload = (
        None
        if context is None
        else OffloadSpec(
            complete=bool(context["complete"]),
            offloaded_at_ms=context.get("timestamp"),
            local_deleted=bool(context.get("bookkeeperDeleted", False)),
        )
    )
    return LedgerSpec(
        ledger["ledgerId"],
        ledger["entries"],
        ledger["size"],
        ledger.get("timestamp"),
        offload=offload,
        offloaded=ledger.get("offloaded"),
        offload_uuid=None if offload is None else new_attempt_uuid(),
    )


def _compacted_spec(body: Mapping[str, Any] | None) -> CompactedLedgerSpec | None:
    if body is None:
        return None
    return CompactedLedgerSpec(
        ledger_id=body["ledgerId"],
        entries=body["entries"],
        size_bytes=body["size"],
        messages=list(body["messages"]),
        compacted_at_ms=body.get("compactedAt"),
    )


def _entry_timestamp(message: Mapping[str, Any]) -> int:
    broker_ts = message.get("brokerTimestamp")
    return int(broker_ts) if broker_ts is not None else int(message["publishTime"])


def _entries_table(topic: str, rows: list[Mapping[str, Any]]) -> Any:
    """The manifest's messages of one ledger as an entry table (docs/store.md "Entry schema")."""
    import pyarrow as pa

    from housekeeping.store.entries import ENTRY_SCHEMA

    values = [None if m["value"] is None else m["value"].encode("utf-8") for m in rows]
    return pa.table(
        {
            "topic": [topic] * len(rows),
            "ledgerId": [int(m["ledgerId"]) for m in rows],
            "entryId": [int(m["entryId"]) for m in rows],
            "publishTime": [int(m["publishTime"]) for m in rows],
            "brokerTimestamp": [m.get("brokerTimestamp") for m in rows],
            "key": [m.get("key") for m in rows],
            "value": values,
            "size": [0 if v is None else len(v) for v in values],
            "properties": [list((m.get("properties") or {}).items()) for m in rows],
        },
        schema=ENTRY_SCHEMA,
    )


@dataclass
class EntryWriters:
    """What a load writes besides the metadata: the local ledger directories (into the staging store) and the
    offloaded ledgers' tier objects (into the tier, before the metadata names them)."""

    local: Callable[[Store], None]
    tier: Callable[[Store], None] = lambda store: None


def _manifest_entries_writer(content: StoreContent, messages: dict[str, list]) -> EntryWriters:
    """Check every topic's messages against its ledgers and return the writers of their Parquet files (the raw
    ledgers' and the compacted ledger's, each in its own ledger directory; an offloaded ledger's object in the
    tier, under its attempt's UUID; no local copy when the context says it is deleted)."""
    tables: list[tuple[str, int, Any]] = []
    objects: list[tuple[str, int, str, Any]] = []
    for topic in content.topics:
        topic_messages = messages.get(topic.name) or []
        if topic.compacted is not None:
            _check_compacted_against_raw(topic, topic_messages)
            tables.append(
                (topic.name, topic.compacted.ledger_id, _entries_table(topic.name, topic.compacted.messages))
            )
        if not topic_messages:
            continue
        by_ledger: dict[int, list] = {}
        for message in topic_messages:
            by_ledger.setdefault(message["ledgerId"], []).append(message)
        known = {ledger.ledger_id for ledger in topic.ledgers}
        unknown = sorted(set(by_ledger) - known)
        if unknown:
            raise InputError(
                f"topic {topic.name}: messages refer to ledger {unknown[0]}, which is not in its ledgers"
            )
        for ledger in topic.ledgers:
            rows = sorted(by_ledger.get(ledger.ledger_id, []), key=lambda m: m["entryId"])
            ids = [m["entryId"] for m in rows]
            if ids != list(range(ledger.entries)):
                raise InputError(
                    f"topic {topic.name} ledger {ledger.ledger_id}: messages must be exactly entries "
                    f"0..{ledger.entries - 1} (the ledger's entries), got {len(ids)} with ids "
                    f"{ids[:5]}{'...' if len(ids) > 5 else ''}"
                )
            if not rows:
                continue
            timestamps = [_entry_timestamp(m) for m in rows]
            ledger.min_entry_ts_ms, ledger.max_entry_ts_ms = min(timestamps), max(timestamps)
            ledger.entries_stored = True
            table = _entries_table(topic.name, rows)
            offload = ledger.offload
            if offload is not None and offload.complete:
                assert ledger.offload_uuid is not None
                objects.append((topic.name, ledger.ledger_id, ledger.offload_uuid, table))
            if offload is None or not offload.local_deleted:
                tables.append((topic.name, ledger.ledger_id, table))
    if objects and tier_of_settings() is None:
        topic_name, ledger_id, _, _ = objects[0]
        raise InputError(
            f"topic {topic_name} ledger {ledger_id} is offloaded (offloadContext.complete) and its messages are "
            "given: loading them needs the object tier (set HOUSEKEEPING_OFFLOAD_URL), or leave the messages out "
            "to load the metadata only"
        )

    def write_local(staging: Store) -> None:
        from housekeeping.store.entries import write_ledger

        for topic_name, ledger_id, table in tables:
            write_ledger(staging.ledger_dir(topic_name, ledger_id), table)

    def write_tier(store: Store) -> None:
        if not objects:
            return
        tier = store.tier_for_writing("loading offloaded ledgers")
        for topic_name, ledger_id, attempt, table in objects:
            tier.write_ledger(object_key(topic_name, ledger_id, attempt), table)

    return EntryWriters(write_local, write_tier)


def _check_compacted_against_raw(topic: TopicSpec, raw_messages: list[Mapping[str, Any]]) -> None:
    """A compacted entry is a copy of the raw entry at its position: where the manifest has both, they agree."""
    assert topic.compacted is not None
    raw = {(m["ledgerId"], m["entryId"]): m for m in raw_messages}
    fields = ("publishTime", "brokerTimestamp", "key", "value", "properties")
    for message in topic.compacted.messages:
        original = raw.get((message["ledgerId"], message["entryId"]))
        if original is None:
            continue  # its raw ledger was trimmed, or the manifest gives no raw entries
        differs = [f for f in fields if message.get(f) != original.get(f)]
        if differs:
            raise InputError(
                f"topic {topic.name} compactedLedger {topic.compacted.ledger_id} message "
                f"{message['ledgerId']}:{message['entryId']}: differs from the raw entry at the same position in "
                f"{', '.join(differs)}; a compacted entry is a copy of it"
            )


def compacted_ledger_row(topic: TopicSpec, run_id: str) -> dict[str, Any] | None:
    """The ``compacted_ledgers`` row of a topic's loaded compacted ledger (``current``), its facts derived from
    its entries as the compaction apply derives them from the ones it writes."""
    spec = topic.compacted
    if spec is None:
        return None
    horizon = compaction_horizon(topic)
    assert horizon is not None  # validate_content requires the cursor
    stamps = [_entry_timestamp(m) for m in spec.messages]
    tombstones = [
        _entry_timestamp(m) for m in spec.messages if m.get("key") is not None and not (m["value"] or "")
    ]
    return {
        "topic": topic.name,
        "ledger_id": spec.ledger_id,
        "status": "current",
        "horizon_ledger": horizon[0],
        "horizon_entry": horizon[1],
        "entries": spec.entries,
        "size_bytes": spec.size_bytes,
        "min_entry_ts_ms": min(stamps, default=None),
        "max_entry_ts_ms": max(stamps, default=None),
        "tombstones": len(tombstones),
        "oldest_tombstone_ts_ms": min(tombstones, default=None),
        "run_id": run_id,
        # When it was compacted is not in Pulsar's stats: without compactedAt, its newest entry's time (the
        # compaction ran at or after it; apache/pulsar#11211's warning then measures a longer interval).
        "compacted_as_of_ms": spec.compacted_at_ms
        if spec.compacted_at_ms is not None
        else max(stamps, default=0),
    }


def load_manifest(
    store_root: Path, manifest_path: Path, metadata_url: str | None = None, *, at_ms: int | None = None
) -> Store:
    """Create or replace a store from a manifest. With ``at_ms`` (the ``load`` command always gives one), the
    policies it loads are journaled as of then, where the store's policy history begins
    (``housekeeping.store.policy_history``)."""
    document = read_manifest(manifest_path)
    content, messages = content_from_manifest(document, str(manifest_path))
    validate_content(content)
    writers = _manifest_entries_writer(content, messages)
    return write_store(
        store_root,
        content,
        writers.local,
        metadata_url,
        write_tier=writers.tier,
        policies_at_ms=at_ms,
        source=str(manifest_path),
    )


def write_store(
    store_root: Path,
    content: StoreContent,
    write_entries: Callable[[Store], None],
    metadata_url: str | None = None,
    *,
    write_tier: Callable[[Store], None] | None = None,
    load_id: str | None = None,
    policies_at_ms: int | None = None,
    source: str | None = None,
) -> Store:
    """Create or replace a store from validated content (callers run ``validate_content`` first, so its
    errors come before anything else). Entries are staged first and offloaded ledgers' objects uploaded
    (``write_tier``); the metadata is replaced in one transaction; only then is the ledger tree swapped in. A
    failure before the commit leaves the old store as it was (an object uploaded before it is named by no row:
    the store scrub finds it). ``load_id`` names this load in its topics' incarnations (default: a new one each
    time, so a run planned before a load never matches a topic after it); ``generate`` gives its own, so the same
    options give the same metadata. ``policies_at_ms``: journal the loaded policies as of then (``load`` does;
    ``generate`` does not, its metadata a function of its options)."""
    root = Path(store_root).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    if not os.access(root, os.W_OK):
        raise InputError(f"store {root} is not writable")
    staging_root = root / f".staging-{uuid.uuid4().hex}"
    staging = Store(staging_root, "sqlite://")
    try:
        staging_root.mkdir()
        write_entries(staging)
        store = Store.open(root, metadata_url, must_exist=False)
        migrate(store.engine)
        store_id = store.store_id()  # kept across loads: the tier the store claimed stays its own
        if write_tier is not None:
            write_tier(store)
        _replace_metadata(store, content, store_id, load_id or uuid.uuid4().hex, policies_at_ms, source)
        old = root / f".old-ledgers-{uuid.uuid4().hex}"
        if store.ledgers_root.exists():
            os.replace(store.ledgers_root, old)
        if (staging_root / LEDGERS_DIR).exists():
            os.replace(staging_root / LEDGERS_DIR, store.ledgers_root)
        else:
            store.ledgers_root.mkdir()
        with contextlib.suppress(OSError):
            remove_tree(old, within=root)  # the replaced store's ledgers, already renamed aside
    finally:
        with contextlib.suppress(OSError):
            remove_tree(staging_root, within=root)
    return store


# Every table a load replaces, children before their parents (foreign keys).
REPLACED_TABLES = (
    t.compacted_ledgers,
    t.deleted_topics,
    t.partitioned_topics,
    t.backlog_quota_states,
    t.pending_deletions,
    t.journal,
    t.cursors,
    t.ledgers,
    t.topics,
    t.namespaces,
    t.store_settings,
)
BATCH = 5000  # rows per INSERT: bounded statements at benchmark sizes


def _replace_metadata(
    store: Store,
    content: StoreContent,
    store_id: str,
    load_id: str,
    policies_at_ms: int | None = None,
    source: str | None = None,
) -> None:
    """The whole metadata replaced by the content's, in one transaction (the store's identity kept); with
    ``policies_at_ms``, the loaded policies journaled as of then."""
    from housekeeping.store.policy_history import journal_loaded_policies

    with write_transaction(store.engine) as conn:
        for table in REPLACED_TABLES:
            conn.execute(delete(table))
        for table, rows in _metadata_rows(content, store_id, load_id):
            for start in range(0, len(rows), BATCH):
                conn.execute(insert(table), rows[start : start + BATCH])
        if policies_at_ms is not None:
            journal_loaded_policies(conn, content, load_id, policies_at_ms, source)


def _metadata_rows(
    content: StoreContent, store_id: str, load_id: str
) -> list[tuple[Any, list[dict[str, Any]]]]:
    """Each table's rows of the content, parents first; every topic a new incarnation of its name (``load_id``)."""
    topics = content.topics
    return [
        (
            t.store_settings,
            [
                {"key": "broker", "value": json.dumps(content.broker, sort_keys=True)},
                {"key": "manifestVersion", "value": json.dumps(MANIFEST_VERSION)},
                {"key": "storeId", "value": json.dumps(store_id)},
            ],
        ),
        (
            t.namespaces,
            [
                {"name": name, "policies": json.dumps(policies, sort_keys=True)}
                for name, policies in content.namespaces.items()
            ],
        ),
        (t.topics, [_topic_row(topic, load_id) for topic in topics]),
        (
            t.partitioned_topics,
            [
                {
                    "name": name,
                    "namespace": str(TopicName.parse(name).namespace_name),
                    "partitions": partitions,
                }
                for name, partitions in sorted(content.partitioned_topics.items())
            ],
        ),
        (t.ledgers, [_ledger_row(topic, ledger) for topic in topics for ledger in topic.ledgers]),
        (t.cursors, [_cursor_row(topic, cursor) for topic in topics for cursor in topic.cursors]),
        (t.compacted_ledgers, [row for topic in topics if (row := compacted_ledger_row(topic, "load"))]),
    ]


def _topic_row(topic: TopicSpec, load_id: str) -> dict[str, Any]:
    return {
        "incarnation": new_incarnation(f"{load_id}/{topic.name}"),
        "name": topic.name,
        "namespace": topic.namespace,
        "policies": json.dumps(topic.policies, sort_keys=True),
        "version": 1,
        "producers": topic.producers,
        "consumers": topic.consumers,
        "last_active_ms": topic.last_active_ms,
    }


def _ledger_row(topic: TopicSpec, ledger: LedgerSpec) -> dict[str, Any]:
    return {
        "topic": topic.name,
        "ledger_id": ledger.ledger_id,
        "entries": ledger.entries,
        "size_bytes": ledger.size_bytes,
        "closed_at_ms": ledger.closed_at_ms,
        "min_entry_ts_ms": ledger.min_entry_ts_ms,
        "max_entry_ts_ms": ledger.max_entry_ts_ms,
        "entries_stored": ledger.entries_stored,
        "offload_uuid": ledger.offload_uuid,
        "offload_complete": bool(ledger.offload and ledger.offload.complete),
        "offloaded_at_ms": ledger.offload.offloaded_at_ms if ledger.offload else None,
        "local_deleted": bool(ledger.offload and ledger.offload.local_deleted),
    }


def _cursor_row(topic: TopicSpec, cursor: CursorSpec) -> dict[str, Any]:
    return {
        "topic": topic.name,
        "name": cursor.name,
        "durable": cursor.durable,
        "mark_delete_ledger": cursor.mark_delete[0],
        "mark_delete_entry": cursor.mark_delete[1],
        "last_active_ms": cursor.last_active_ms,
        "consumers": cursor.consumers,
    }
