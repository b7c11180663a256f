"""The manifest: a JSON description of a store (public format, see docs/manifest.md).

``load`` validates a manifest completely (JSON syntax, the JSON schema, then Pulsar's semantic rules)
before it changes anything, then replaces the store. ``export`` prints a store back in the same shape.
The generator builds the same :class:`StoreContent` and goes through the same validation and writer.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, select

from housekeeping import metadata_schema as t
from housekeeping.errors import InputError
from housekeeping.fs import remove_tree
from housekeeping.names import COMPACTION_SUBSCRIPTION, NamespaceName, TopicName
from housekeeping.policies import BrokerConfig, RetentionPolicy, resolve_policies, validate_policies
from housekeeping.store import LEDGERS_DIR, Store, migrate, read_transaction, write_transaction

MANIFEST_VERSION = 1


@dataclass
class LedgerSpec:
    ledger_id: int
    entries: int
    size_bytes: int
    closed_at_ms: int | None
    min_entry_ts_ms: int | None = None
    max_entry_ts_ms: int | None = None
    entries_stored: bool = False


@dataclass
class CursorSpec:
    name: str
    durable: bool
    mark_delete: tuple[int, int]
    last_active_ms: int | None = None
    consumers: int = 0  # consumers connected to this subscription


@dataclass
class CompactedLedgerSpec:
    """A topic's compacted ledger as a running cluster has it (the manifest's ``compactedLedger``): its entries at
    their original positions, in publish order. Its compaction horizon is the topic's ``__compaction`` cursor's
    mark-delete, as in Pulsar (the compactor acknowledges up to the horizon on that cursor)."""

    ledger_id: int
    entries: int
    size_bytes: int
    messages: list[dict[str, Any]]
    compacted_at_ms: int | None = None


@dataclass
class TopicSpec:
    name: str
    policies: dict[str, Any]
    ledgers: list[LedgerSpec]
    cursors: list[CursorSpec] = field(default_factory=list)
    producers: int = 0
    consumers: int = 0
    last_active_ms: int | None = None
    compacted: CompactedLedgerSpec | None = None

    @property
    def namespace(self) -> str:
        return str(TopicName.parse(self.name).namespace_name)


@dataclass
class StoreContent:
    broker: dict[str, Any]
    namespaces: dict[str, dict[str, Any]]
    topics: list[TopicSpec]
    # partitioned topic name -> number of partitions (Pulsar's partitioned-topic metadata)
    partitioned_topics: dict[str, int] = field(default_factory=dict)


def parse_position(text: str, where: str) -> tuple[int, int]:
    ledger, sep, entry = str(text).partition(":")
    try:
        if not sep:
            raise ValueError
        return int(ledger), int(entry)
    except ValueError:
        raise InputError(f"{where}: position {text!r} must have the form ledgerId:entryId") from None


def format_position(position: tuple[int, int]) -> str:
    return f"{position[0]}:{position[1]}"


# --- validation ---------------------------------------------------------------------------------


def _schema() -> dict[str, Any]:
    text = (
        resources.files("housekeeping").joinpath("schemas/manifest.schema.json").read_text(encoding="utf-8")
    )
    return json.loads(text)


def _describe_path(parts: Iterable[Any]) -> str:
    return " -> ".join(repr(p) if isinstance(p, str) else f"[{p}]" for p in parts) or "(top level)"


def validate_schema(document: Any, source: str) -> None:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{_describe_path(e.absolute_path)}: {e.message}" for e in errors[:10]]
        more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise InputError(f"{source} does not match the manifest schema:\n  " + "\n  ".join(lines) + more)


def validate_content(content: StoreContent) -> BrokerConfig:
    """Pulsar's semantic rules; every message names the topic or namespace."""
    broker = BrokerConfig.from_layers(("manifest broker section", content.broker))
    for name, policies in content.namespaces.items():
        NamespaceName.parse(name)
        retention = policies.get("retention_policies")
        in_force = (
            RetentionPolicy(retention["retentionTimeInMinutes"], retention["retentionSizeInMB"])
            if retention
            else broker.retention
        )
        validate_policies(f"namespace {name}", policies, in_force)
    seen: set[str] = set()
    for topic in content.topics:
        parsed = TopicName.parse(topic.name)
        if topic.name in seen:
            raise InputError(f"topic {topic.name} is listed twice")
        seen.add(topic.name)
        namespace = str(parsed.namespace_name)
        if namespace not in content.namespaces:
            raise InputError(f"topic {topic.name}: namespace {namespace} is not declared under 'namespaces'")
        effective = resolve_policies(
            topic.name,
            topic.policies,
            namespace,
            content.namespaces[namespace],
            broker,
        )
        validate_policies(f"topic {topic.name}", topic.policies, effective.retention)
        _validate_ledgers(topic)
        _validate_cursors(topic)
        _validate_compacted_ledger(topic, retain_null_key=bool(broker["topicCompactionRetainNullKey"]))
        for label, value in (("producers", topic.producers), ("consumers", topic.consumers)):
            if value < 0:
                raise InputError(f"topic {topic.name}: {label}={value} must be >= 0")
    _validate_partitioned(content, seen)
    return broker


def _validate_partitioned(content: StoreContent, topic_names: set[str]) -> None:
    """Pulsar's naming rules for partitioned topics: the metadata's name is not itself a partition, no plain
    topic shares it, and a partition listed under ``topics`` has an index below the partition count."""
    for name, partitions in content.partitioned_topics.items():
        parsed = TopicName.parse(name)
        namespace = str(parsed.namespace_name)
        if namespace not in content.namespaces:
            raise InputError(
                f"partitioned topic {name}: namespace {namespace} is not declared under 'namespaces'"
            )
        if parsed.partitioned_parent is not None:
            raise InputError(f"partitioned topic {name}: a partition name cannot be a partitioned topic")
        if name in topic_names:
            raise InputError(f"partitioned topic {name}: a non-partitioned topic has the same name")
        if partitions < 1:
            raise InputError(f"partitioned topic {name}: partitions={partitions} must be >= 1")
    for topic in topic_names:
        parsed = TopicName.parse(topic)
        parent = parsed.partitioned_parent
        if parent is None or parent not in content.partitioned_topics:
            continue  # a partition whose metadata is absent is decided on its own, as Pulsar does
        index = parsed.partition_index
        if index is not None and index >= content.partitioned_topics[parent]:
            raise InputError(
                f"topic {topic}: partition index {index} is not below the {content.partitioned_topics[parent]} "
                f"partitions of partitioned topic {parent}"
            )


def _validate_ledgers(topic: TopicSpec) -> None:
    if not topic.ledgers:
        raise InputError(f"topic {topic.name}: has no ledgers; the current (open) ledger must be listed last")
    previous = -1
    for index, ledger in enumerate(topic.ledgers):
        where = f"topic {topic.name} ledger {ledger.ledger_id}"
        if ledger.ledger_id <= previous:
            raise InputError(
                f"{where}: ledger ids must be unique and increasing oldest first (after ledger {previous})"
            )
        previous = ledger.ledger_id
        if ledger.entries < 0 or ledger.size_bytes < 0:
            raise InputError(f"{where}: entries and size must be >= 0")
        is_last = index == len(topic.ledgers) - 1
        if is_last and ledger.closed_at_ms is not None:
            raise InputError(
                f"{where}: the last ledger is the current (open) ledger and must have no timestamp "
                f"(it has {ledger.closed_at_ms})"
            )
        if not is_last and ledger.closed_at_ms is None:
            raise InputError(
                f"{where}: only the last (current) ledger may lack a close timestamp; closed ledgers need one"
            )


def last_position(topic: TopicSpec) -> tuple[int, int]:
    """The topic's last entry; (currentLedger, -1) when nothing was ever written after the last closed ledger."""
    for ledger in reversed(topic.ledgers):
        if ledger.entries > 0:
            return ledger.ledger_id, ledger.entries - 1
    return topic.ledgers[-1].ledger_id, -1


def _validate_cursors(topic: TopicSpec) -> None:
    by_id = {ledger.ledger_id: ledger for ledger in topic.ledgers}
    last = last_position(topic)
    for cursor in topic.cursors:
        where = f"topic {topic.name} cursor {cursor.name!r}"
        if not cursor.name:
            raise InputError(f"topic {topic.name}: a cursor has an empty name")
        ledger_id, entry_id = cursor.mark_delete
        if entry_id < -1:
            raise InputError(
                f"{where}: markDeletePosition {format_position(cursor.mark_delete)} has entry id < -1"
            )
        if cursor.mark_delete > last and not (ledger_id in by_id and entry_id == -1):
            raise InputError(
                f"{where}: markDeletePosition {format_position(cursor.mark_delete)} is beyond the topic's last "
                f"entry {format_position(last)}"
            )
        ledger = by_id.get(ledger_id)
        if ledger is not None and entry_id >= ledger.entries:
            raise InputError(
                f"{where}: markDeletePosition {format_position(cursor.mark_delete)} is beyond ledger {ledger_id}, "
                f"which has {ledger.entries} entries"
            )


def compaction_horizon(topic: TopicSpec) -> tuple[int, int] | None:
    """The ``__compaction`` cursor's mark-delete: the horizon of the topic's compacted ledger."""
    cursor = next((c for c in topic.cursors if c.name == COMPACTION_SUBSCRIPTION), None)
    return None if cursor is None else cursor.mark_delete


def _validate_compacted_ledger(topic: TopicSpec, *, retain_null_key: bool) -> None:
    """A compacted ledger taken from a cluster: its horizon is a durable ``__compaction`` cursor inside the topic
    (the cursor checks above), its id is not a raw ledger's, and it holds exactly its entries, each a keyed
    (unless the broker retains null keys) entry at or before the horizon, one per key, in publish order."""
    spec = topic.compacted
    if spec is None:
        return
    where = f"topic {topic.name} compactedLedger {spec.ledger_id}"
    cursor = next((c for c in topic.cursors if c.name == COMPACTION_SUBSCRIPTION), None)
    if cursor is None or not cursor.durable:
        raise InputError(
            f"{where}: needs the durable {COMPACTION_SUBSCRIPTION} cursor, whose markDeletePosition is the compaction "
            "horizon (the last entry the compacted ledger covers)"
        )
    if spec.ledger_id in {ledger.ledger_id for ledger in topic.ledgers}:
        raise InputError(f"{where}: the id is one of the topic's ledgers; a compacted ledger has its own id")
    if len(spec.messages) != spec.entries:
        raise InputError(f"{where}: entries={spec.entries} but {len(spec.messages)} messages are given")
    horizon = cursor.mark_delete
    previous: tuple[int, int] | None = None
    keys: set[str] = set()
    for message in spec.messages:
        position = (message["ledgerId"], message["entryId"])
        at = f"{where} message {format_position(position)}"
        if previous is not None and position <= previous:
            raise InputError(
                f"{at}: messages must be in publish order at increasing positions (after {format_position(previous)})"
            )
        previous = position
        if position > horizon:
            raise InputError(
                f"{at}: is after the compaction horizon {format_position(horizon)} ({COMPACTION_SUBSCRIPTION} cursor)"
            )
        key = message.get("key")
        if key is None:
            if not retain_null_key:
                raise InputError(
                    f"{at}: has no key; a compacted ledger holds keyed entries only (unless the broker sets "
                    "topicCompactionRetainNullKey=true)"
                )
            continue
        if key in keys:
            raise InputError(
                f"{at}: key {key!r} appears twice; a compacted ledger holds the latest entry per key"
            )
        keys.add(key)


# --- manifest -> content --------------------------------------------------------------------


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

    from housekeeping.entries import ENTRY_SCHEMA

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
        from housekeeping.entries import write_ledger

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


# --- content -> store -----------------------------------------------------------------------


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


def _replace_metadata(store: Store, content: StoreContent) -> None:
    with write_transaction(store.engine) as conn:
        for table in (
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
        ):
            conn.execute(delete(table))
        conn.execute(
            insert(t.store_settings),
            [
                {"key": "broker", "value": json.dumps(content.broker, sort_keys=True)},
                {"key": "manifestVersion", "value": json.dumps(MANIFEST_VERSION)},
            ],
        )
        if content.namespaces:
            conn.execute(
                insert(t.namespaces),
                [
                    {"name": name, "policies": json.dumps(policies, sort_keys=True)}
                    for name, policies in content.namespaces.items()
                ],
            )
        if content.topics:
            conn.execute(
                insert(t.topics),
                [
                    {
                        "name": topic.name,
                        "namespace": topic.namespace,
                        "policies": json.dumps(topic.policies, sort_keys=True),
                        "version": 1,
                        "producers": topic.producers,
                        "consumers": topic.consumers,
                        "last_active_ms": topic.last_active_ms,
                    }
                    for topic in content.topics
                ],
            )
        if content.partitioned_topics:
            conn.execute(
                insert(t.partitioned_topics),
                [
                    {
                        "name": name,
                        "namespace": str(TopicName.parse(name).namespace_name),
                        "partitions": partitions,
                    }
                    for name, partitions in sorted(content.partitioned_topics.items())
                ],
            )
        ledger_rows = [
            {
                "topic": topic.name,
                "ledger_id": ledger.ledger_id,
                "entries": ledger.entries,
                "size_bytes": ledger.size_bytes,
                "closed_at_ms": ledger.closed_at_ms,
                "min_entry_ts_ms": ledger.min_entry_ts_ms,
                "max_entry_ts_ms": ledger.max_entry_ts_ms,
                "entries_stored": ledger.entries_stored,
            }
            for topic in content.topics
            for ledger in topic.ledgers
        ]
        for start in range(0, len(ledger_rows), 5000):
            conn.execute(insert(t.ledgers), ledger_rows[start : start + 5000])
        cursor_rows = [
            {
                "topic": topic.name,
                "name": cursor.name,
                "durable": cursor.durable,
                "mark_delete_ledger": cursor.mark_delete[0],
                "mark_delete_entry": cursor.mark_delete[1],
                "last_active_ms": cursor.last_active_ms,
                "consumers": cursor.consumers,
            }
            for topic in content.topics
            for cursor in topic.cursors
        ]
        for start in range(0, len(cursor_rows), 5000):
            conn.execute(insert(t.cursors), cursor_rows[start : start + 5000])
        compacted_rows = [row for topic in content.topics if (row := compacted_ledger_row(topic, "load"))]
        if compacted_rows:
            conn.execute(insert(t.compacted_ledgers), compacted_rows)


# --- store -> manifest ------------------------------------------------------------------------


def export_manifest(store: Store, *, with_messages: bool = False) -> dict[str, Any]:
    """The store's current state in the manifest's shape, plus facts of the store under ``store``."""
    with read_transaction(store.engine) as conn:
        broker_row = conn.execute(
            select(t.store_settings.c.value).where(t.store_settings.c.key == "broker")
        ).first()
        namespaces = {
            r.name: json.loads(r.policies)
            for r in conn.execute(select(t.namespaces).order_by(t.namespaces.c.name))
        }
        topics = list(conn.execute(select(t.topics).order_by(t.topics.c.name)))
        partitioned = {
            r.name: {"partitions": r.partitions}
            for r in conn.execute(select(t.partitioned_topics).order_by(t.partitioned_topics.c.name))
        }
        ledgers: dict[str, list] = {}
        for r in conn.execute(select(t.ledgers).order_by(t.ledgers.c.topic, t.ledgers.c.ledger_id)):
            ledgers.setdefault(r.topic, []).append(r)
        cursors: dict[str, list] = {}
        for r in conn.execute(select(t.cursors).order_by(t.cursors.c.topic, t.cursors.c.name)):
            cursors.setdefault(r.topic, []).append(r)
        compacted_rows = list(
            conn.execute(
                select(t.compacted_ledgers)
                .where(t.compacted_ledgers.c.status == "current")
                .order_by(t.compacted_ledgers.c.topic)
            )
        )
        compacted_generation = {r.topic: r.files_generation for r in compacted_rows}
        compacted = {
            r.topic: {
                "ledgerId": r.ledger_id,
                "horizon": f"{r.horizon_ledger}:{r.horizon_entry}",
                "entries": r.entries,
                "size": r.size_bytes,
                "compactedAsOfMs": r.compacted_as_of_ms,
            }
            for r in compacted_rows
        }
        quota_states = [
            {
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
            for r in conn.execute(
                select(t.backlog_quota_states).order_by(
                    t.backlog_quota_states.c.topic, t.backlog_quota_states.c.quota_type
                )
            )
        ]
    out_topics: dict[str, Any] = {}
    versions: dict[str, int] = {}
    for topic in topics:
        body: dict[str, Any] = {}
        policies = json.loads(topic.policies)
        if policies:
            body["policies"] = policies
        body["ledgers"] = [
            {
                "ledgerId": r.ledger_id,
                "entries": r.entries,
                "size": r.size_bytes,
                **({"timestamp": r.closed_at_ms} if r.closed_at_ms is not None else {}),
            }
            for r in ledgers.get(topic.name, [])
        ]
        body["cursors"] = {
            r.name: {
                "markDeletePosition": f"{r.mark_delete_ledger}:{r.mark_delete_entry}",
                "durable": bool(r.durable),
                **({"lastActive": r.last_active_ms} if r.last_active_ms is not None else {}),
                **({"consumers": r.consumers} if r.consumers else {}),
            }
            for r in cursors.get(topic.name, [])
        }
        body["producers"], body["consumers"] = topic.producers, topic.consumers
        if topic.last_active_ms is not None:
            body["lastActive"] = topic.last_active_ms
        if with_messages:
            body["messages"] = _read_messages(store, topic.name, ledgers.get(topic.name, []))
            if topic.name in compacted:
                # Loadable with its entries (docs/manifest.md); without them it stays a fact under `store`.
                facts = compacted[topic.name]
                body["compactedLedger"] = {
                    "ledgerId": facts["ledgerId"],
                    "entries": facts["entries"],
                    "size": facts["size"],
                    "compactedAt": facts["compactedAsOfMs"],
                    "messages": _ledger_messages(
                        store, topic.name, facts["ledgerId"], compacted_generation[topic.name]
                    ),
                }
        out_topics[topic.name] = body
        versions[topic.name] = topic.version
    return {
        "manifestVersion": MANIFEST_VERSION,
        "broker": json.loads(broker_row[0]) if broker_row else {},
        "namespaces": namespaces,
        "topics": out_topics,
        **({"partitionedTopics": partitioned} if partitioned else {}),
        # Facts of this store, not part of a cluster's description; `load` ignores them.
        "store": {
            "root": str(store.root),
            "metadata": store.safe_url,
            "topicVersions": versions,
            "backlogQuotaStates": quota_states,
            # Compacted ledgers in force (topic compaction); with --messages each is also under its topic's
            # compactedLedger, which load accepts.
            **({"compactedLedgers": compacted} if compacted else {}),
        },
    }


def _read_messages(store: Store, topic: str, ledger_rows: list) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in ledger_rows:
        if row.entries_stored and row.entries > 0:
            out += _ledger_messages(store, topic, row.ledger_id, row.files_generation)
    return out


def _ledger_messages(store: Store, topic: str, ledger_id: int, generation: int) -> list[dict[str, Any]]:
    """A ledger's entries as manifest messages (a compacted ledger's at their original positions)."""
    from housekeeping.entries import read_ledger

    ledger_dir = store.ledger_dir(topic, ledger_id, generation)
    if not ledger_dir.is_dir():
        raise InputError(f"topic {topic} ledger {ledger_id}: directory {ledger_dir} is missing")
    out: list[dict[str, Any]] = []
    for rec in read_ledger(ledger_dir).to_pylist():
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
