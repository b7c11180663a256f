"""A manifest into a store (``housekeeping load``): read and validate it completely (JSON syntax, the schema,
Pulsar's rules, the messages against their ledgers) before anything changes; stage the entries, replace the metadata
in one transaction, then swap the ledger tree in."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
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
    StoreContent,
    TopicSpec,
    compaction_horizon,
)
from housekeeping.store.manifest.validate import validate_content, validate_schema
from housekeeping.store.store import LEDGERS_DIR, Store, migrate, write_transaction


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
                ledgers=[
                    LedgerSpec(ledger["ledgerId"], ledger["entries"], ledger["size"], ledger.get("timestamp"))
                    for ledger in body["ledgers"]
                ],
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


def _manifest_entries_writer(content: StoreContent, messages: dict[str, list]) -> Callable[[Store], None]:
    """Check every topic's messages against its ledgers and return a writer for their Parquet files (the raw
    ledgers' and the compacted ledger's, each in its own ledger directory)."""
    tables: list[tuple[str, int, Any]] = []
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
            tables.append((topic.name, ledger.ledger_id, _entries_table(topic.name, rows)))

    def write(staging: Store) -> None:
        from housekeeping.store.entries import write_ledger

        for topic_name, ledger_id, table in tables:
            write_ledger(staging.ledger_dir(topic_name, ledger_id), table)

    return write


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


def load_manifest(store_root: Path, manifest_path: Path, metadata_url: str | None = None) -> Store:
    document = read_manifest(manifest_path)
    content, messages = content_from_manifest(document, str(manifest_path))
    validate_content(content)
    writer = _manifest_entries_writer(content, messages)
    return write_store(store_root, content, writer, metadata_url)


def write_store(
    store_root: Path,
    content: StoreContent,
    write_entries: Callable[[Store], None],
    metadata_url: str | None = None,
) -> Store:
    """Create or replace a store from validated content (callers run ``validate_content`` first, so its
    errors come before anything else). Entries are staged first; the metadata is replaced in one transaction;
    only then is the ledger tree swapped in. A failure before the commit leaves the old store as it was."""
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
        _replace_metadata(store, content)
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


def _replace_metadata(store: Store, content: StoreContent) -> None:
    """The whole metadata replaced by the content's, in one transaction."""
    with write_transaction(store.engine) as conn:
        for table in REPLACED_TABLES:
            conn.execute(delete(table))
        for table, rows in _metadata_rows(content):
            for start in range(0, len(rows), BATCH):
                conn.execute(insert(table), rows[start : start + BATCH])


def _metadata_rows(content: StoreContent) -> list[tuple[Any, list[dict[str, Any]]]]:
    """Each table's rows of the content, parents first."""
    topics = content.topics
    return [
        (
            t.store_settings,
            [
                {"key": "broker", "value": json.dumps(content.broker, sort_keys=True)},
                {"key": "manifestVersion", "value": json.dumps(MANIFEST_VERSION)},
            ],
        ),
        (
            t.namespaces,
            [
                {"name": name, "policies": json.dumps(policies, sort_keys=True)}
                for name, policies in content.namespaces.items()
            ],
        ),
        (t.topics, [_topic_row(topic) for topic in topics]),
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


def _topic_row(topic: TopicSpec) -> dict[str, Any]:
    return {
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
