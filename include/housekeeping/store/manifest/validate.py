"""A manifest's validation: the JSON schema (``store/schemas/manifest.schema.json``), then Pulsar's semantic rules;
every message names the topic, namespace or cursor."""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib import resources
from typing import Any

from housekeeping.core.errors import InputError
from housekeeping.core.names import COMPACTION_SUBSCRIPTION, NamespaceName, TopicName
from housekeeping.core.policies import BrokerConfig, namespace_retention, resolve_policies, validate_policies
from housekeeping.core.positions import format_position
from housekeeping.store.manifest.model import LedgerSpec, StoreContent, TopicSpec, last_position


def manifest_schema() -> dict[str, Any]:
    """The manifest's JSON schema (its ``$defs`` also check one level's policies: ``housekeeping.store.admin``)."""
    return _schema()


def _schema() -> dict[str, Any]:
    text = (
        resources.files("housekeeping.store")
        .joinpath("schemas/manifest.schema.json")
        .read_text(encoding="utf-8")
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
        validate_policies(f"namespace {name}", policies, namespace_retention(policies, broker))
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
        _validate_offload(where, ledger, is_last)


def _validate_offload(where: str, ledger: LedgerSpec, is_last: bool) -> None:
    """A ledger's offload context as Pulsar can have it: never on the current ledger, ``offloaded`` (stats-internal)
    equal to ``complete``, the local copy deleted only after a completed offload, completed after the ledger
    closed."""
    spec = ledger.offload
    if ledger.offloaded and spec is None:
        raise InputError(f"{where}: offloaded is true but offloadContext is missing (complete, timestamp)")
    if spec is None:
        return
    if is_last:
        raise InputError(
            f"{where}: the current (open) ledger is never offloaded; it cannot have an offloadContext"
        )
    if ledger.offloaded is not None and ledger.offloaded != spec.complete:
        raise InputError(
            f"{where}: offloaded={str(ledger.offloaded).lower()} contradicts offloadContext.complete="
            f"{str(spec.complete).lower()} (stats-internal's offloaded is the context's complete)"
        )
    if spec.local_deleted and not spec.complete:
        raise InputError(
            f"{where}: offloadContext.bookkeeperDeleted needs complete=true (a local copy is deleted only after the "
            "offload completed)"
        )
    if not spec.complete and spec.offloaded_at_ms is not None:
        raise InputError(
            f"{where}: offloadContext.timestamp is when an offload completed; this one is not complete"
        )
    if (
        spec.offloaded_at_ms is not None
        and ledger.closed_at_ms is not None
        and spec.offloaded_at_ms < ledger.closed_at_ms
    ):
        raise InputError(
            f"{where}: offloadContext.timestamp {spec.offloaded_at_ms} is before the ledger closed "
            f"({ledger.closed_at_ms}); a ledger is offloaded after it closes"
        )


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
