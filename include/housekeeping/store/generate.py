"""Deterministic synthetic stores for demos, tests and benchmarks (``housekeeping generate``).

Same ``--topics``/``--seed``/options => the same store, byte for byte in metadata and entry values. Time is
relative to ``reference_ms`` (default 2026-11-01T00:00:00Z), never the wall clock. Memory stays bounded:
entries are generated and written one ledger at a time; only metadata rows are kept in memory.

What a generated store holds:
- tenants/namespaces with different policies (broker default 0/0; time-only; size-only; time+size;
  infinite, with an offload threshold; TTL; backlog quotas; compaction threshold and compacted retention);
- skewed topic sizes (Pareto-distributed ledger counts), Pulsar-like rollover (10 min .. 4 h);
- a durable subscription on most topics, ~15% of them stale (far behind, idle for days), ~10% topics with
  no durable subscription, readers (non-durable cursors) on ~30%;
- inactive topics (no clients, no subscriptions, idle for days) and system topics (``__change_events``);
- a partitioned topic (``public/default/sensor-feed``, 3 partitions: one idle, two in use);
- keyed topics with a small key space and ~5% tombstones; ~2% out-of-order publish times; broker
  timestamps in the ``acme`` tenant (as with AppendBrokerTimestampMetadataInterceptor).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from housekeeping.core.errors import InputError
from housekeeping.core.timeutil import parse_as_of
from housekeeping.store.manifest.load import write_store
from housekeeping.store.manifest.model import CursorSpec, LedgerSpec, StoreContent, TopicSpec
from housekeeping.store.manifest.validate import validate_content
from housekeeping.store.store import Store

DEFAULT_REFERENCE = "2026-11-01T00:00:00Z"
PARTITIONED_TOPIC = "persistent://public/default/sensor-feed"
MINUTE = 60_000

NAMESPACE_POLICIES: dict[str, dict] = {
    "public/default": {},
    "public/retained": {
        "retention_policies": {"retentionTimeInMinutes": 180, "retentionSizeInMB": 1},
        "backlog_quota_map": {
            "destination_storage": {"limitSize": 16384, "limitTime": -1, "policy": "producer_request_hold"},
            "message_age": {"limitSize": -1, "limitTime": 3600, "policy": "producer_exception"},
        },
    },
    "acme/orders": {
        "retention_policies": {"retentionTimeInMinutes": 1440, "retentionSizeInMB": -1},
        "message_ttl_in_seconds": 86400,
    },
    # Kept forever: the classic case for tiered storage (closed ledgers to the object tier after an hour).
    "acme/audit": {
        "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
        "offload_policies": {"managedLedgerOffloadThresholdInSeconds": 3600},
    },
    "acme/metrics": {
        "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 2},
        "message_ttl_in_seconds": 3600,
        "backlog_quota_map": {
            "destination_storage": {
                "limitSize": 65536,
                "limitTime": -1,
                "policy": "consumer_backlog_eviction",
            },
            "message_age": {"limitSize": -1, "limitTime": 1800, "policy": "consumer_backlog_eviction"},
        },
    },
    "globex/events": {
        "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": 1},
        "inactive_topic_policies": {
            "inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
            "maxInactiveDurationSeconds": 3600,
            "deleteWhileInactive": True,
        },
    },
    "globex/tables": {
        "compaction_threshold": 65536,
        "compacted_retention": {"retentionTimeInMinutes": 10080, "retentionSizeInMB": 64},
    },
}


@dataclass(frozen=True)
class GenerateOptions:
    topics: int
    seed: int
    entries_per_ledger: int = 200
    max_ledgers_per_topic: int = 12
    payload_bytes: int = 120
    reference: str = DEFAULT_REFERENCE
    progress: bool = False
    # 0: the generator's own rollovers; N: the same rollovers stretched so each topic's closed ledgers span N days
    # before the reference (a store with a history the capacity forecast can fit and backtest).
    history_days: int = 0
    # Ledgers described in the metadata only (entries_stored false, no Parquet file): sizes and entry time spans
    # drawn as the entries would be, for planning at sizes whose entries would not fit the disk. The mechanisms
    # that read entries treat such ledgers as Pulsar treats unreadable ones (docs/semantics.md).
    metadata_only: bool = False

    def validate(self) -> None:
        if self.topics < 1:
            raise InputError(f"--topics must be >= 1, got {self.topics}")
        if self.history_days < 0 or self.history_days > 3650:
            raise InputError(f"--history-days must be between 0 and 3650, got {self.history_days}")
        if self.entries_per_ledger < 1 or self.max_ledgers_per_topic < 2 or self.payload_bytes < 1:
            raise InputError(
                "--entries-per-ledger >= 1, --max-ledgers-per-topic >= 2 and --payload-bytes >= 1 required"
            )


def _topic_plan(index: int, rng: np.random.Generator, opts: GenerateOptions, reference_ms: int) -> dict:
    namespaces = list(NAMESPACE_POLICIES)
    namespace = namespaces[index % len(namespaces)]
    name = f"persistent://{namespace}/t-{index:05d}"
    ledger_count = int(min(opts.max_ledgers_per_topic, 2 + np.floor(rng.pareto(1.3) * 2)))
    first_id = int(rng.integers(1, 1000)) * 10
    ledger_ids = [first_id + k * int(rng.integers(1, 4)) for k in range(ledger_count)]
    ledger_ids = sorted(set(ledger_ids))
    while len(ledger_ids) < ledger_count:
        ledger_ids.append(ledger_ids[-1] + 1)
    rollovers = rng.integers(10, 240, size=ledger_count) * MINUTE
    stretch = 1.0
    if opts.history_days:
        # The same draws, stretched: the seed's store keeps its shape, over a longer time.
        stretch = opts.history_days * 1440 * MINUTE / int(rollovers[: ledger_count - 1].sum())
        rollovers = rollovers * stretch
    # The newest closed ledger closed a few minutes to a few hours before the reference time (with a history: the
    # current ledger has been open for a rollover of its own).
    close_times: list[int | None] = []
    t = reference_ms - int(rng.integers(5, 600)) * MINUTE
    if stretch != 1.0:
        t = reference_ms - int(min(rollovers[ledger_count - 1], rollovers[: ledger_count - 1].mean()))
    for k in range(ledger_count - 2, -1, -1):
        close_times.insert(0, t)
        t -= int(rollovers[k])
    close_times.append(None)
    entries = [int(opts.entries_per_ledger * rng.uniform(0.5, 1.5)) for _ in range(ledger_count - 1)]
    entries.append(int(rng.integers(0, opts.entries_per_ledger)))
    role = rng.random()
    return {
        "name": name,
        "namespace": namespace,
        "ledger_ids": ledger_ids,
        "close_times": close_times,
        # When the first ledger opened (with a history: its entries span its whole rollover, not an hour).
        "first_open": t if opts.history_days else None,
        "entries": entries,
        "role": role,
        "keyed": namespace == "globex/tables",
        "broker_ts": namespace.startswith("acme/"),
    }


def _ledger_table(
    topic: dict, k: int, rng: np.random.Generator, opts: GenerateOptions, start_ms: int, end_ms: int
):
    """One ledger's entries, built column-wise (no per-entry Python objects, so benchmark sizes stay fast)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from housekeeping.store.entries import ENTRY_SCHEMA

    count = topic["entries"][k]
    ledger_id = topic["ledger_ids"][k]
    publish = (
        np.linspace(start_ms, end_ms, num=count, dtype=np.int64) if count else np.zeros(0, dtype=np.int64)
    )
    broker_ts = publish + rng.integers(0, 50, size=count) if topic["broker_ts"] else None
    out_of_order = rng.random(count) < 0.02
    publish = np.where(out_of_order, publish - rng.integers(1, 120, size=count) * MINUTE, publish)
    lengths = rng.integers(max(1, opts.payload_bytes // 2), opts.payload_bytes * 2, size=count)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
    blob = alphabet[rng.integers(0, len(alphabet), size=int(lengths.sum()))].tobytes()
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = pa.Array.from_buffers(
        pa.binary(), count, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(blob)]
    )
    sizes = lengths.astype(np.int32)
    if topic["keyed"]:
        key_ids = rng.integers(0, max(4, count // 5), size=count)
        keys = pc.binary_join_element_wise(
            "key-", pc.utf8_lpad(pa.array(key_ids).cast(pa.string()), 4, "0"), ""
        )
        tombstones = rng.random(count) < 0.05
        values = pc.if_else(pa.array(tombstones), pa.scalar(None, pa.binary()), values)
        sizes = np.where(tombstones, 0, sizes).astype(np.int32)
    else:
        keys = pa.nulls(count, pa.string())
    no_properties = pa.MapArray.from_arrays(
        pa.array(np.zeros(count + 1, dtype=np.int32)), pa.array([], pa.string()), pa.array([], pa.string())
    )
    table = pa.table(
        {
            "topic": pa.repeat(pa.scalar(topic["name"]), count),
            "ledgerId": pa.array(np.full(count, ledger_id, dtype=np.int64)),
            "entryId": pa.array(np.arange(count, dtype=np.int64)),
            "publishTime": pa.array(publish),
            "brokerTimestamp": pa.array(broker_ts) if broker_ts is not None else pa.nulls(count, pa.int64()),
            "key": keys,
            "value": values,
            "size": pa.array(sizes),
            "properties": no_properties,
        },
        schema=ENTRY_SCHEMA,
    )
    ts = broker_ts if broker_ts is not None else publish
    return table, int(sizes.sum()), (int(ts.min()) if count else None), (int(ts.max()) if count else None)


def _ledger_metadata(
    count: int, rng: np.random.Generator, opts: GenerateOptions, start_ms: int, end_ms: int
) -> tuple[int, int | None, int | None]:
    """A metadata-only ledger's size and entry time span: payload lengths drawn as :func:`_ledger_table` draws
    them, the entries spread over the ledger's life (no out-of-order or broker timestamps: nothing is read)."""
    size = int(rng.integers(max(1, opts.payload_bytes // 2), opts.payload_bytes * 2, size=count).sum())
    return size, (start_ms if count else None), (end_ms if count else None)


def _ledger_specs(plan: dict, *, stored: bool) -> list[LedgerSpec]:
    """A topic's ledgers before their sizes and entry times are drawn."""
    return [
        LedgerSpec(lid, plan["entries"][k], 0, plan["close_times"][k], entries_stored=stored)
        for k, lid in enumerate(plan["ledger_ids"])
    ]


def _cursors(
    topic: dict, rng: np.random.Generator, reference_ms: int
) -> tuple[list[CursorSpec], int, int, int]:
    """Cursors, producers, consumers, lastActive for a topic by its role."""
    ids, entries, role = topic["ledger_ids"], topic["entries"], topic["role"]
    last_l, last_e = ids[-1], entries[-1] - 1
    day = 24 * 60 * MINUTE
    cursors: list[CursorSpec] = []
    if role < 0.10:  # inactive: no clients, no subscriptions, idle for days
        return [], 0, 0, reference_ms - int(rng.integers(2, 30)) * day
    if role < 0.20:  # no durable subscription at all; only a reader
        cursors.append(
            CursorSpec(
                "reader-1",
                False,
                (ids[0], int(rng.integers(-1, max(0, entries[0] - 1)))),
                reference_ms - 5 * MINUTE,
            )
        )
        return cursors, 1, 0, reference_ms - 5 * MINUTE
    if role < 0.35:  # a stale durable subscription far behind, idle for days
        k = int(rng.integers(0, max(1, len(ids) // 3)))
        cursors.append(
            CursorSpec(
                "analytics-legacy",
                True,
                (ids[k], int(rng.integers(-1, max(0, entries[k] - 1)))),
                reference_ms - int(rng.integers(3, 60)) * day,
            )
        )
    # the main subscription: caught up to somewhere in the last two ledgers, often at a ledger's last entry
    k = len(ids) - 2 if len(ids) >= 2 else 0
    if rng.random() < 0.5:
        position = (ids[k], entries[k] - 1)
    else:
        position = (last_l, int(rng.integers(-1, max(0, last_e))) if last_e >= 0 else -1)
    cursors.append(CursorSpec("sub-main", True, position, reference_ms - int(rng.integers(1, 30)) * MINUTE))
    if rng.random() < 0.3:
        cursors.append(CursorSpec("reader-dash", False, (ids[0], -1), reference_ms - 2 * MINUTE))
    producers, consumers = int(rng.integers(0, 3)), int(rng.integers(1, 4))
    for cursor in cursors:
        if cursor.name == "sub-main":
            cursor.consumers = consumers  # the live subscription's consumers are the topic's consumers
    return cursors, producers, consumers, reference_ms - MINUTE


def generate_store(store_root: Path, opts: GenerateOptions, metadata_url: str | None = None) -> Store:
    opts.validate()
    reference_ms = parse_as_of(opts.reference)
    rng = np.random.default_rng(opts.seed)
    plans = [_topic_plan(i, rng, opts, reference_ms) for i in range(opts.topics)]
    # Pulsar system topics exist in real namespaces; one per run keeps the GC/retention exemptions visible.
    system = _topic_plan(opts.topics, rng, opts, reference_ms)
    system.update(name="persistent://public/default/__change_events", namespace="public/default", keyed=False)
    plans.append(system)

    specs: list[TopicSpec] = []
    for plan in plans:
        cursors, producers, consumers, last_active = _cursors(plan, rng, reference_ms)
        ledgers = _ledger_specs(plan, stored=not opts.metadata_only)
        specs.append(TopicSpec(plan["name"], {}, ledgers, cursors, producers, consumers, last_active))

    # A partitioned topic whose partitions live differently: one idle for days with no subscription (GC
    # deletes it; the metadata stays, brokerDeleteInactivePartitionedTopicMetadataEnabled being off), two in
    # use. Drawn from its own generator so the topics above stay what they were before it was added.
    partition_rng = np.random.default_rng(opts.seed + 2)
    for index, role in enumerate((0.05, 0.5, 0.5)):
        plan = _topic_plan(opts.topics + 1 + index, partition_rng, opts, reference_ms)
        plan.update(
            name=f"{PARTITIONED_TOPIC}-partition-{index}", namespace="public/default", keyed=False, role=role
        )
        plans.append(plan)
        cursors, producers, consumers, last_active = _cursors(plan, partition_rng, reference_ms)
        ledgers = _ledger_specs(plan, stored=not opts.metadata_only)
        specs.append(TopicSpec(plan["name"], {}, ledgers, cursors, producers, consumers, last_active))

    def write_entries(staging: Store) -> None:
        from housekeeping.store.entries import write_ledger

        entry_rng = np.random.default_rng(opts.seed + 1)
        iterator = zip(plans, specs, strict=True)
        if opts.progress:
            from tqdm import tqdm

            iterator = tqdm(
                iterator, total=len(plans), desc="generating topics", unit="topic", file=sys.stderr
            )
        for plan, spec in iterator:
            for k, ledger in enumerate(spec.ledgers):
                end = plan["close_times"][k] if plan["close_times"][k] is not None else reference_ms - MINUTE
                start = plan["close_times"][k - 1] if k > 0 else (plan["first_open"] or end - 60 * MINUTE)
                if opts.metadata_only:
                    ledger.size_bytes, ledger.min_entry_ts_ms, ledger.max_entry_ts_ms = _ledger_metadata(
                        plan["entries"][k], entry_rng, opts, start, end
                    )
                    continue
                table, size, lo, hi = _ledger_table(plan, k, entry_rng, opts, start, end)
                ledger.size_bytes, ledger.min_entry_ts_ms, ledger.max_entry_ts_ms = size, lo, hi
                write_ledger(staging.ledger_dir(spec.name, ledger.ledger_id), table)

    content = StoreContent(
        broker={"brokerDeleteInactiveTopicsEnabled": True},
        namespaces={name: policies for name, policies in NAMESPACE_POLICIES.items()},
        topics=specs,
        partitioned_topics={PARTITIONED_TOPIC: 3},
    )
    validate_content(content)
    # The same options give the same metadata, the topics' incarnations included.
    load_id = f"generate/{dataclasses.replace(opts, progress=False)!r}"
    return write_store(store_root, content, write_entries, metadata_url, load_id=load_id)
