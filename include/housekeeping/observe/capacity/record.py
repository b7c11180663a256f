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
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np
from sqlalchemy import Connection, Table, select

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
            merged[0].astype(np.int64, copy=False),
            merged[1].astype(np.int64, copy=False),
            merged[2].astype(np.int8, copy=False),
            *(m.astype(np.float64, copy=False) for m in merged[3:]),
        )


class LedgerRow(NamedTuple):
    """A listed ledger as the capacity commands read it (times None where unknown)."""

    ledger_id: int
    entries: int
    size_bytes: int
    closed_at_ms: int | None
    min_entry_ts_ms: int | None
    max_entry_ts_ms: int | None
    offloaded_at_ms: int | None
    offload_complete: bool


class CursorRow(NamedTuple):
    """A subscription's cursor as the capacity commands read it."""

    name: str
    durable: bool
    mark_delete_ledger: int
    mark_delete_entry: int


R = TypeVar("R", LedgerRow, CursorRow)
# How each field is held as a column: nullable integers as float64 with nan (times in ms stay exact below 2**53).
_DTYPES: dict[str, Any] = {"bool": np.bool_, "int": np.int64, "nullable": np.float64, "str": object}
_KINDS = {
    "ledger_id": "int",
    "entries": "int",
    "size_bytes": "int",
    "closed_at_ms": "nullable",
    "min_entry_ts_ms": "nullable",
    "max_entry_ts_ms": "nullable",
    "offloaded_at_ms": "nullable",
    "offload_complete": "bool",
    "name": "str",
    "durable": "bool",
    "mark_delete_ledger": "int",
    "mark_delete_entry": "int",
}
# Rows a database fetch brings at a time: their Python objects live only until they are columns.
_CHUNK = 50_000


@dataclass(frozen=True)
class TopicRows(Generic[R]):
    """The rows of one table grouped by topic, as columns (a database row object a ledger was most of the record's
    memory at 100,000 topics). Sorted by topic code, then by the row's first field; ``get`` makes one topic's rows
    when asked."""

    row: type[R]
    codes: dict[str, int]  # topic -> its code (the pieces' codes)
    topic: np.ndarray  # int64 codes, ascending
    columns: tuple[np.ndarray, ...]  # in the row's field order

    def span(self, topic: str) -> tuple[int, int]:
        code = self.codes.get(topic)
        if code is None:
            return 0, 0
        return (
            int(np.searchsorted(self.topic, code, "left")),
            int(np.searchsorted(self.topic, code, "right")),
        )

    def get(self, topic: str, default: Any = ()) -> list[R]:
        start, end = self.span(topic)
        if start == end:
            return list(default)
        return self._rows(start, end)

    def find(self, topic: str, first: Any) -> int | None:
        """The index of ``topic``'s row whose first field is ``first`` (a ledger id), or None."""
        start, end = self.span(topic)
        at = start + int(np.searchsorted(self.columns[0][start:end], first))
        return at if at < end and self.columns[0][at] == first else None

    def get_at(self, i: int) -> R:
        return self._rows(i, i + 1)[0]

    def topics_where(self, mask: np.ndarray) -> set[str]:
        names = {code: name for name, code in self.codes.items()}
        return {names[int(code)] for code in np.unique(self.topic[mask])}

    def column(self, name: str) -> np.ndarray:
        return self.columns[self.row._fields.index(name)]

    def _rows(self, start: int, end: int) -> list[R]:
        fields = []
        for name, column in zip(self.row._fields, self.columns, strict=True):
            values = column[start:end].tolist()  # Python ints, floats, bools and strs
            if _KINDS[name] == "nullable":  # nan (the one value not equal to itself) was None
                values = [None if v != v else int(v) for v in values]
            fields.append(values)
        return [self.row(*values) for values in zip(*fields, strict=True)]

    def __len__(self) -> int:
        return len(self.topic)

    @classmethod
    def of(cls, row: type[R], codes: _Columns, topics: list[str], parts: list[list[Any]]) -> TopicRows[R]:
        """From the topics of rows and their fields' values (one list per field), sorted."""
        topic = np.fromiter(map(codes.code, topics), dtype=np.int64, count=len(topics))
        columns = [
            np.array(values, dtype=_DTYPES[_KINDS[name]])
            for name, values in zip(row._fields, parts, strict=True)
        ]
        return cls._sorted(row, codes, [topic], [[c] for c in columns])

    @classmethod
    def read(cls, conn: Connection, table: Table, row: type[R], codes: _Columns) -> TopicRows[R]:
        """Every row of ``table``, a chunk at a time."""
        query = select(table.c.topic, *(table.c[name] for name in row._fields))
        topics: list[np.ndarray] = []
        parts: list[list[np.ndarray]] = [[] for _ in row._fields]
        for chunk in conn.execute(query, execution_options={"yield_per": _CHUNK}).partitions():
            values = list(zip(*chunk, strict=True))
            topics.append(np.fromiter(map(codes.code, values[0]), dtype=np.int64, count=len(chunk)))
            for part, name, column in zip(parts, row._fields, values[1:], strict=True):
                part.append(np.array(column, dtype=_DTYPES[_KINDS[name]]))
        return cls._sorted(row, codes, topics, parts)

    @classmethod
    def _sorted(
        cls, row: type[R], codes: _Columns, topics: list[np.ndarray], parts: list[list[np.ndarray]]
    ) -> TopicRows[R]:
        dtypes = [_DTYPES[_KINDS[name]] for name in row._fields]
        topic = np.concatenate(topics) if topics else np.empty(0, np.int64)
        columns = [
            np.concatenate(part) if part else np.empty(0, dtype)
            for part, dtype in zip(parts, dtypes, strict=True)
        ]
        order = np.lexsort((columns[0], topic)) if row is LedgerRow else np.argsort(topic, kind="stable")
        return cls(row, codes.topic_index, topic[order], tuple(c[order] for c in columns))


@dataclass
class Record:
    """What the capacity commands read, as of ``as_of_ms``."""

    as_of_ms: int
    pieces: Pieces
    namespace_of: dict[str, str]  # every topic the record names -> its namespace
    namespaces: dict[str, dict[str, Any]]  # namespace -> its policies
    topics: dict[str, Any]  # the topics listed now: name -> row (name, namespace, policies)
    ledgers: TopicRows[LedgerRow]  # the ledgers listed now
    cursors: TopicRows[CursorRow]
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
    out: _Columns, key: tuple[str, int], current: LedgerRow | None, history: list[Any], as_of_ms: int
) -> bool:
    """A ledger with a deletion history: its pieces on the three tiers (False when it cannot be placed in time)."""
    row = current._asdict() if current is not None else json.loads(history[-1].ledger_row)
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


def _listed_ledger_pieces(out: _Columns, rows: TopicRows[LedgerRow], keep: np.ndarray, as_of_ms: int) -> int:
    """The ledgers listed now that were never deleted (most of a store, the rows ``keep`` selects), all at once: on
    ``ingest`` and ``listed`` and on the local disks forever, in the tier from their offload's completion. Returns
    how many cannot be placed in time."""
    if not keep.any():
        return 0
    first, last = rows.column("min_entry_ts_ms")[keep], rows.column("max_entry_ts_ms")[keep]
    closed = rows.column("closed_at_ms")[keep]
    start = np.where(np.isnan(first), closed, first)
    end = np.where(np.isnan(last), np.where(np.isnan(closed), start, closed), last)
    placed = ~np.isnan(start)
    end = np.maximum(end, start)
    topic = rows.topic[keep][placed]
    ledger = rows.column("ledger_id")[keep][placed]
    size = rows.column("size_bytes")[keep][placed].astype(np.float64)
    ramp_from, ramp_to = start[placed], end[placed]
    n = len(topic)
    forever = (np.full(n, -INF), np.full(n, INF))
    for tier in ("ingest", "listed", "local"):
        out.add_block(topic, ledger, np.full(n, PIECE_TIERS.index(tier)), size, ramp_from, ramp_to, *forever)
    offloaded_at = rows.column("offloaded_at_ms")[keep][placed]
    complete = rows.column("offload_complete")[keep][placed]
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
    out = _Columns()
    with read_transaction(store.engine) as conn:
        namespaces = {r.name: json.loads(r.policies) for r in conn.execute(select(t.namespaces))}
        topics = {
            r.name: r
            for r in conn.execute(select(t.topics.c.name, t.topics.c.namespace, t.topics.c.policies))
        }
        current = TopicRows.read(conn, t.ledgers, LedgerRow, out)
        every_pending = list(conn.execute(select(t.pending_deletions)))
        pending = _visible(every_pending, as_of_ms)
        compacted = list(conn.execute(select(t.compacted_ledgers)))
        cursors = TopicRows.read(conn, t.cursors, CursorRow, out)
        broker = store.broker_config()
    namespace_of = {name: row.namespace for name, row in topics.items()}
    history: dict[tuple[str, int], list[Any]] = defaultdict(list)
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
    # A ledger deleted after the as-of was listed then, whatever became of it.
    then: dict[tuple[str, int], LedgerRow] = {}
    for row in every_pending:
        key = (row.topic, row.ledger_id)
        if (
            row.kind == "ledger"
            and row.deleted_as_of_ms > as_of_ms
            and key not in history
            and key not in then
            and current.find(*key) is None
        ):
            saved = json.loads(row.ledger_row)
            then[key] = LedgerRow(*(saved.get(name) for name in LedgerRow._fields))
            namespace_of.setdefault(row.topic, str(TopicName.parse(row.topic).namespace_name))
    keep = np.ones(len(current), dtype=bool)
    listed: dict[tuple[str, int], LedgerRow] = {}
    for key in history:
        at = current.find(*key)
        if at is not None:
            keep[at] = False
            listed[key] = current.get_at(at)
    unplaced = _listed_ledger_pieces(out, current, keep, as_of_ms)
    if then:
        deleted_later = TopicRows.of(
            LedgerRow,
            out,
            [topic for topic, _ in then],
            [list(values) for values in zip(*then.values(), strict=True)],
        )
        unplaced += _listed_ledger_pieces(out, deleted_later, np.ones(len(then), dtype=bool), as_of_ms)
    for key in sorted(history):
        unplaced += not _ledger_pieces(out, key, listed.get(key), history[key], as_of_ms)
    for row in compacted:
        if row.compacted_as_of_ms <= as_of_ms:
            since = float(row.compacted_as_of_ms)
            out.add(row.topic, -1, "local", int(row.size_bytes), (since, since), since, INF)
    return Record(
        as_of_ms, out.pieces(), namespace_of, namespaces, topics, current, cursors, broker, unplaced
    )
