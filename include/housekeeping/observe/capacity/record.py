"""The store's own record of its bytes over time (docs/semantics.md §12.1), read as it stood at an as-of.

Every ledger the store ever listed is in the metadata: the ledger lists hold the live ones, the pending-deletion
log the ones deleted since (purged or not, restored or not), with the whole ledger row. From them, per ledger:

- when its bytes arrived: linearly from its first entry's publish time to its last (its close time when entry
  times are missing; a step when they are equal);
- ``listed``: while it is in its topic's ledger list (what the policies see): until a deletion, again after a
  restore;
- ``local``: while its files are on the local disks: until the purge of its deletion or of its local copy's;
- ``tier``: while its object is in the object tier: from its offload's completion until the purge that deletes
  the object.

Events after the as-of are not seen: the answer at a past as-of is the answer a run at that as-of gave. A
compacted ledger counts on the local disks from its compaction until its purge; the replaced generation of a
key erasure counts there from the erasure until its purge.
"""

from __future__ import annotations

import json
import math
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
from sqlalchemy import select

from housekeeping.core.names import TopicName
from housekeeping.core.policies import BrokerConfig
from housekeeping.mechanisms.erasure.apply import ERASED_KIND
from housekeeping.store import metadata_schema as t
from housekeeping.store.compacted_ledgers import COMPACTED_KIND
from housekeeping.store.store import LOCAL_COPY_KIND, Store, read_transaction

TIERS = ("local", "tier", "listed")
# The views a piece is on: the three tiers, and ``ingest`` (every ledger ever, from its first entry on: what
# producers added).
PIECE_TIERS = ("ingest", "listed", "local", "tier")
INF = math.inf


@dataclass(frozen=True, slots=True)
class Piece:
    """One ledger's bytes on one tier over ``[start, end)``, arriving linearly from ``ramp_from`` to ``ramp_to``."""

    topic: str
    ledger: int  # -1: not a ledger of the topic's list (a compacted ledger, an erasure's replaced generation)
    tier: str  # one of PIECE_TIERS
    size: int
    ramp_from: float
    ramp_to: float
    start: float
    end: float


@dataclass(frozen=True)
class Pieces:
    """Every piece of the record as parallel arrays (a Python object a piece was most of the memory at 100,000
    topics): its topic (an index into ``topics``), its ledger, its tier (an index into ``PIECE_TIERS``), size and
    times."""

    topics: list[str]
    topic: np.ndarray  # int64
    ledger: np.ndarray  # int64, -1: not a ledger of the topic's list
    tier: np.ndarray  # int8
    size: np.ndarray  # float64, bytes
    ramp_from: np.ndarray
    ramp_to: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def on(self, tier: str) -> np.ndarray:
        """The mask of the pieces on ``tier``."""
        return self.tier == PIECE_TIERS.index(tier)

    def __len__(self) -> int:
        return len(self.topic)

    def __iter__(self) -> Iterator[Piece]:
        """Piece by piece (for tests and small records: the commands read the arrays)."""
        for i in range(len(self.topic)):
            yield Piece(
                self.topics[self.topic[i]],
                int(self.ledger[i]),
                PIECE_TIERS[self.tier[i]],
                int(self.size[i]),
                float(self.ramp_from[i]),
                float(self.ramp_to[i]),
                float(self.start[i]),
                float(self.end[i]),
            )


class _Columns:
    """Pieces as they are made, one column at a time (8 bytes an item, not a Python object)."""

    def __init__(self) -> None:
        self.topic_index: dict[str, int] = {}
        self.columns = [array("q"), array("q"), array("b"), *(array("d") for _ in range(5))]
        self.blocks: list[tuple[np.ndarray, ...]] = []

    def code(self, topic: str) -> int:
        return self.topic_index.setdefault(topic, len(self.topic_index))

    def add(
        self,
        topic: str,
        ledger: int,
        tier: str,
        size: float,
        ramp: tuple[float, float],
        start: float,
        end: float,
    ) -> None:
        values = (self.code(topic), ledger, PIECE_TIERS.index(tier), size, ramp[0], ramp[1], start, end)
        for column, value in zip(self.columns, values, strict=True):
            column.append(value)

    def add_block(self, *columns: np.ndarray) -> None:
        """Many pieces at once, as arrays in the pieces' column order (topic codes from :meth:`code`)."""
        self.blocks.append(columns)

    def pieces(self) -> Pieces:
        parts = [tuple(np.frombuffer(c, dtype=c.typecode) for c in self.columns), *self.blocks]
        merged = [np.concatenate([part[i] for part in parts]) for i in range(8)]
        topics = sorted(self.topic_index, key=self.topic_index.__getitem__)
        return Pieces(
            topics,
            merged[0].astype(np.int64),
            merged[1].astype(np.int64),
            merged[2].astype(np.int8),
            *(m.astype(np.float64) for m in merged[3:]),
        )


@dataclass
class Record:
    """What the capacity commands read, as of ``as_of_ms``."""

    as_of_ms: int
    pieces: Pieces
    namespace_of: dict[str, str]  # every topic the record names -> its namespace
    namespaces: dict[str, dict[str, Any]]  # namespace -> its policies
    topics: dict[str, Any]  # the topics listed now: name -> row
    ledgers: dict[str, list[Any]] = field(default_factory=dict)  # topic -> its listed ledger rows
    cursors: dict[str, list[Any]] = field(default_factory=dict)  # topic -> its cursor rows
    broker: BrokerConfig | None = None
    unplaced: int = 0  # ledgers with neither entry times nor a close time (not placed in time)

    def tenants(self) -> set[str]:
        return {namespace.split("/", 1)[0] for namespace in self.namespaces}


def ramp_of(row: Mapping[str, Any]) -> tuple[float, float] | None:
    """When a ledger's bytes arrive: from its first entry's publish time to its last (its close time where they are
    unknown); None: neither is known."""
    first, last, closed = row.get("min_entry_ts_ms"), row.get("max_entry_ts_ms"), row.get("closed_at_ms")
    start = first if first is not None else closed
    if start is None:
        return None
    end = last if last is not None else (closed if closed is not None else start)
    return float(start), float(max(end, start))


def _seen(value: Any, as_of_ms: int) -> bool:
    return value is not None and value <= as_of_ms


def _listed_intervals(deletions: list[Any], as_of_ms: int) -> list[tuple[float, float]]:
    """From the beginning until the first deletion, and from each restore until the next deletion."""
    intervals: list[tuple[float, float]] = []
    since: float | None = -INF
    for row in sorted(deletions, key=lambda r: r.deleted_as_of_ms):
        if since is None:
            break
        intervals.append((since, float(row.deleted_as_of_ms)))
        restored = row.status == "restored" and _seen(row.finished_as_of_ms, as_of_ms)
        since = float(row.finished_as_of_ms) if restored else None
    if since is not None:
        intervals.append((since, INF))
    return intervals


def _ledger_pieces(
    out: _Columns, key: tuple[str, int], current: Any | None, history: list[Any], as_of_ms: int
) -> bool:
    """A ledger with a deletion history: its pieces on the three tiers (False when it cannot be placed in time)."""
    row = current._mapping if current is not None else json.loads(history[-1].ledger_row)
    ramp = ramp_of(row)
    if ramp is None:
        return False
    size = int(row["size_bytes"])
    topic, ledger = key
    deletions = [r for r in history if r.kind == "ledger"]
    out.add(topic, ledger, "ingest", size, ramp, -INF, INF)
    for start, end in _listed_intervals(deletions, as_of_ms):
        out.add(topic, ledger, "listed", size, ramp, start, end)
    purged = [
        float(r.finished_as_of_ms)
        for r in history
        if r.kind in ("ledger", LOCAL_COPY_KIND) and r.status == "purged" and r.path
    ]
    out.add(topic, ledger, "local", size, ramp, -INF, min(purged, default=INF))
    offloaded_at = row.get("offloaded_at_ms")
    if row.get("offload_complete") and _seen(offloaded_at, as_of_ms):
        object_purged = [
            float(r.finished_as_of_ms)
            for r in history
            if r.kind == "ledger" and r.status == "purged" and r.tier_key
        ]
        out.add(topic, ledger, "tier", size, ramp, float(offloaded_at), min(object_purged, default=INF))
    return True


def _listed_ledger_pieces(out: _Columns, rows: list[Any], as_of_ms: int) -> int:
    """The ledgers listed now that were never deleted (most of a store), all at once: on ``ingest`` and ``listed``
    and on the local disks forever, in the tier from their offload's completion. Returns how many cannot be placed
    in time."""
    if not rows:
        return 0

    def column(name: str) -> np.ndarray:
        return np.array([getattr(r, name) for r in rows], dtype=np.float64)  # None -> nan

    first, last, closed = column("min_entry_ts_ms"), column("max_entry_ts_ms"), column("closed_at_ms")
    start = np.where(np.isnan(first), closed, first)
    end = np.where(np.isnan(last), np.where(np.isnan(closed), start, closed), last)
    placed = ~np.isnan(start)
    end = np.maximum(end, start)
    topic = np.array([out.code(r.topic) for r in rows], dtype=np.int64)[placed]
    ledger = np.array([r.ledger_id for r in rows], dtype=np.int64)[placed]
    size = column("size_bytes")[placed]
    ramp_from, ramp_to = start[placed], end[placed]
    n = len(topic)
    forever = (np.full(n, -INF), np.full(n, INF))
    for tier in ("ingest", "listed", "local"):
        out.add_block(topic, ledger, np.full(n, PIECE_TIERS.index(tier)), size, ramp_from, ramp_to, *forever)
    offloaded_at = column("offloaded_at_ms")[placed]
    complete = np.array([bool(r.offload_complete) for r in rows], dtype=bool)[placed]
    tiered = complete & (offloaded_at <= as_of_ms)  # nan compares false: never offloaded
    out.add_block(
        topic[tiered],
        ledger[tiered],
        np.full(int(tiered.sum()), PIECE_TIERS.index("tier")),
        size[tiered],
        ramp_from[tiered],
        ramp_to[tiered],
        offloaded_at[tiered],
        np.full(int(tiered.sum()), INF),
    )
    return int((~placed).sum())


def _visible(rows: Iterable[Any], as_of_ms: int) -> list[Any]:
    """Pending-deletion rows as of ``as_of_ms``: deleted by then, their purge or restore only if done by then."""
    seen = []
    for row in rows:
        if row.deleted_as_of_ms > as_of_ms:
            continue
        if row.status != "pending" and not _seen(row.finished_as_of_ms, as_of_ms):
            row = _Pending(row, status="pending")
        seen.append(row)
    return seen


class _Pending:
    """A pending-deletion row with its status as it stood at an earlier as-of."""

    def __init__(self, row: Any, *, status: str) -> None:
        self._row, self.status = row, status

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, name)


def read_record(store: Store, as_of_ms: int) -> Record:
    """The record as of ``as_of_ms``, in one read transaction."""
    with read_transaction(store.engine) as conn:
        namespaces = {r.name: json.loads(r.policies) for r in conn.execute(select(t.namespaces))}
        topics = {r.name: r for r in conn.execute(select(t.topics))}
        current = list(conn.execute(select(t.ledgers)))
        every_pending = list(conn.execute(select(t.pending_deletions)))
        pending = _visible(every_pending, as_of_ms)
        compacted = list(conn.execute(select(t.compacted_ledgers)))
        cursors = list(conn.execute(select(t.cursors)))
        broker = store.broker_config()
    namespace_of = {name: row.namespace for name, row in topics.items()}
    history: dict[tuple[str, int], list[Any]] = defaultdict(list)
    out = _Columns()
    for row in pending:
        namespace_of.setdefault(row.topic, str(TopicName.parse(row.topic).namespace_name))
        if row.kind in ("ledger", LOCAL_COPY_KIND):
            history[(row.topic, row.ledger_id)].append(row)
        elif row.kind in (COMPACTED_KIND, ERASED_KIND) and row.path:
            # Files of their own on the local disks from their deletion (compacted: from their compaction) on.
            saved = json.loads(row.ledger_row)
            since = saved.get("compacted_as_of_ms", row.deleted_as_of_ms)
            purged = row.finished_as_of_ms if row.status == "purged" else None
            size = int(row.size_bytes)
            out.add(row.topic, -1, "local", size, (since, since), since, purged if purged else INF)
    listed_now = {(r.topic, r.ledger_id): r for r in current}
    # A ledger deleted after the as-of was listed then, whatever became of it.
    for row in every_pending:
        key = (row.topic, row.ledger_id)
        if (
            row.kind == "ledger"
            and row.deleted_as_of_ms > as_of_ms
            and key not in history
            and key not in listed_now
        ):
            listed_now[key] = SimpleNamespace(**json.loads(row.ledger_row))
            namespace_of.setdefault(row.topic, str(TopicName.parse(row.topic).namespace_name))
    unplaced = _listed_ledger_pieces(
        out, [r for key, r in listed_now.items() if key not in history], as_of_ms
    )
    for key in sorted(history):
        unplaced += not _ledger_pieces(out, key, listed_now.get(key), history[key], as_of_ms)
    for row in compacted:
        if row.compacted_as_of_ms <= as_of_ms:
            since = float(row.compacted_as_of_ms)
            out.add(row.topic, -1, "local", int(row.size_bytes), (since, since), since, INF)
    ledgers: dict[str, list[Any]] = defaultdict(list)
    for row in current:
        ledgers[row.topic].append(row)
    cursors_of: dict[str, list[Any]] = defaultdict(list)
    for row in cursors:
        cursors_of[row.topic].append(row)
    return Record(
        as_of_ms,
        out.pieces(),
        namespace_of,
        namespaces,
        topics,
        dict(ledgers),
        dict(cursors_of),
        broker,
        unplaced,
    )
