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
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from housekeeping.core.names import TopicName
from housekeeping.core.policies import BrokerConfig
from housekeeping.mechanisms.erasure.apply import ERASED_KIND
from housekeeping.store import metadata_schema as t
from housekeeping.store.compacted_ledgers import COMPACTED_KIND
from housekeeping.store.store import LOCAL_COPY_KIND, Store, read_transaction

TIERS = ("local", "tier", "listed")
INF = math.inf


@dataclass(frozen=True, slots=True)
class Piece:
    """One ledger's bytes on one tier over ``[start, end)``, arriving linearly from ``ramp_from`` to ``ramp_to``."""

    topic: str
    tier: str  # local | tier | listed | ingest (every ledger ever, from its first entry on: what producers added)
    size: int
    ramp_from: float
    ramp_to: float
    start: float
    end: float


@dataclass
class Record:
    """What the capacity commands read, as of ``as_of_ms``."""

    as_of_ms: int
    pieces: list[Piece]
    namespace_of: dict[str, str]  # every topic the record names -> its namespace
    namespaces: dict[str, dict[str, Any]]  # namespace -> its policies
    topics: dict[str, Any]  # the topics listed now: name -> row
    ledgers: dict[str, list[Any]] = field(default_factory=dict)  # topic -> its listed ledger rows
    cursors: dict[str, list[Any]] = field(default_factory=dict)  # topic -> its cursor rows
    broker: BrokerConfig | None = None
    unplaced: int = 0  # ledgers with neither entry times nor a close time (not placed in time)

    def tenants(self) -> set[str]:
        return {namespace.split("/", 1)[0] for namespace in self.namespaces}


def _ramp(row: Mapping[str, Any]) -> tuple[float, float] | None:
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
    topic: str, current: Any | None, history: list[Any], as_of_ms: int
) -> tuple[list[Piece], bool]:
    """A ledger's pieces on the three tiers (False when it cannot be placed in time)."""
    row = current._mapping if current is not None else json.loads(history[-1].ledger_row)
    ramp = _ramp(row)
    if ramp is None:
        return [], False
    size = int(row["size_bytes"])
    deletions = [r for r in history if r.kind == "ledger"]
    pieces = [Piece(topic, "ingest", size, *ramp, -INF, INF)]
    pieces += [
        Piece(topic, "listed", size, *ramp, start, end)
        for start, end in _listed_intervals(deletions, as_of_ms)
    ]
    purged = [
        float(r.finished_as_of_ms)
        for r in history
        if r.kind in ("ledger", LOCAL_COPY_KIND) and r.status == "purged" and r.path
    ]
    pieces.append(Piece(topic, "local", size, *ramp, -INF, min(purged, default=INF)))
    offloaded_at = row.get("offloaded_at_ms")
    if row.get("offload_complete") and _seen(offloaded_at, as_of_ms):
        object_purged = [
            float(r.finished_as_of_ms)
            for r in history
            if r.kind == "ledger" and r.status == "purged" and r.tier_key
        ]
        pieces.append(Piece(topic, "tier", size, *ramp, float(offloaded_at), min(object_purged, default=INF)))
    return pieces, True


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
        pending = _visible(conn.execute(select(t.pending_deletions)), as_of_ms)
        compacted = list(conn.execute(select(t.compacted_ledgers)))
        cursors = list(conn.execute(select(t.cursors)))
        broker = store.broker_config()
    namespace_of = {name: row.namespace for name, row in topics.items()}
    history: dict[tuple[str, int], list[Any]] = defaultdict(list)
    extra: list[Piece] = []
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
            extra.append(Piece(row.topic, "local", size, since, since, since, purged if purged else INF))
    listed_now = {(r.topic, r.ledger_id): r for r in current}
    pieces, unplaced = list(extra), 0
    for key in sorted(set(listed_now) | set(history)):
        made, placed = _ledger_pieces(key[0], listed_now.get(key), history.get(key, []), as_of_ms)
        pieces.extend(made)
        unplaced += not placed
    for row in compacted:
        if row.compacted_as_of_ms <= as_of_ms:
            since = float(row.compacted_as_of_ms)
            pieces.append(Piece(row.topic, "local", int(row.size_bytes), since, since, since, INF))
    ledgers: dict[str, list[Any]] = defaultdict(list)
    for row in current:
        ledgers[row.topic].append(row)
    cursors_of: dict[str, list[Any]] = defaultdict(list)
    for row in cursors:
        cursors_of[row.topic].append(row)
    return Record(
        as_of_ms, pieces, namespace_of, namespaces, topics, dict(ledgers), dict(cursors_of), broker, unplaced
    )
