"""What a manifest describes: a store's broker settings, namespaces, topics with their ledgers, cursors and
compacted ledger, and partitioned-topic metadata (the generator builds the same content)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from housekeeping.core.names import COMPACTION_SUBSCRIPTION, TopicName

MANIFEST_VERSION = 1


@dataclass(frozen=True)
class OffloadSpec:
    """A ledger's offload context as a cluster has it (the manifest's ``offloadContext``): complete, when
    completion was recorded (None: not known, so the offload-deletion lag never fires for it), and whether the
    local copy is deleted (Pulsar's ``bookkeeperDeleted``). Its attempt's UUID is made by the load."""

    complete: bool
    offloaded_at_ms: int | None = None
    local_deleted: bool = False


@dataclass
class LedgerSpec:
    ledger_id: int
    entries: int
    size_bytes: int
    closed_at_ms: int | None
    min_entry_ts_ms: int | None = None
    max_entry_ts_ms: int | None = None
    entries_stored: bool = False
    offload: OffloadSpec | None = None
    offloaded: bool | None = None  # stats-internal's flag as the manifest gave it (checked against offload)
    offload_uuid: str | None = None  # the attempt's UUID, made by the load (or the generator)


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


def last_position(topic: TopicSpec) -> tuple[int, int]:
    """The topic's last entry; (currentLedger, -1) when nothing was ever written after the last closed ledger."""
    for ledger in reversed(topic.ledgers):
        if ledger.entries > 0:
            return ledger.ledger_id, ledger.entries - 1
    return topic.ledgers[-1].ledger_id, -1


def compaction_horizon(topic: TopicSpec) -> tuple[int, int] | None:
    """The ``__compaction`` cursor's mark-delete: the horizon of the topic's compacted ledger."""
    cursor = next((c for c in topic.cursors if c.name == COMPACTION_SUBSCRIPTION), None)
    return None if cursor is None else cursor.mark_delete
