"""What the cursor mechanisms (message expiry, backlog quota) share in their per-topic rules: a topic's positions as
ordinals, the backlog a mark-delete leaves, and the TTL search (backlog's precise time eviction is that search with
ttl = 0.9 x limit). Plain Python over one topic's rows (``spark_apps.shared.topic_pass``); docs/semantics.md §4.

Positions are handled as *ordinals*: a topic's entries are numbered 0..N-1 in ledger order, and a mark-delete
position (L, e) is summarised by ``acked`` = how many of the topic's stored entries are at or before it (entries of
ledgers below L, plus e + 1 of L when L is still in the ledger list). A cursor moving to ordinal ``k`` acknowledges
entries ``acked .. k-1``; the new mark-delete is the entry at ordinal ``k - 1``.

Message expiry rule (our deliberately safer variant of the entry search): an entry is expired when its timestamp
(broker timestamp when stored, else publish time) is strictly before ``cutoff = asOf - ttl``. A ledger is wholly
expired without reading it when it was closed before the cutoff (Pulsar's ledger-closure shortcut) or when its
newest entry timestamp is before the cutoff. The cursor moves to the end of the run of expired entries that starts
right after its mark-delete and never past the first unexpired entry: only the first ledger that is not wholly
expired (and, when that is the partially acknowledged mark-delete ledger, the next one) is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from housekeeping.core.topic_ledgers import consumed_ledger_size
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from spark_apps.shared.rows import Row, keep_held, position_text, text

WHOLLY_EXPIRED = ("closed_before_cutoff", "all_entries_before_cutoff")

# (ledger id, payload bytes) -> the ledger's entries as (entryId, publishTime, entry timestamp) rows, read once.
EntryReader = Callable[[int, int], list[Row]]


@dataclass(frozen=True)
class Span:
    """One ledger of a topic with its ordinal range [start, end) and the bytes of the ledgers before it."""

    ledger: Row
    start: int
    end: int

    @property
    def id(self) -> int:
        return self.ledger["ledgerId"]


@dataclass
class Layout:
    """A topic's ledgers in id order as ordinal spans, and its totals."""

    spans: list[Span]
    entries: int = 0
    size: int = 0
    by_id: dict[int, Span] = field(default_factory=dict)

    @classmethod
    def of(cls, ledgers: list[Row]) -> Layout:
        spans, start = [], 0
        for ledger in sorted(ledgers, key=lambda r: r["ledgerId"]):
            spans.append(Span(ledger, start, start + ledger["entries"]))
            start += ledger["entries"]
        return cls(spans, start, sum(r["size"] for r in ledgers), {s.id: s for s in spans})

    def holding(self, ordinal: int) -> Span | None:
        """The span (with entries) holding the entry at ``ordinal``."""
        return next((s for s in self.spans if s.ledger["entries"] > 0 and s.start <= ordinal < s.end), None)

    def position_of(self, ordinal: int) -> tuple[int, int] | None:
        """The position of the entry at ``ordinal - 1``: the mark-delete that acknowledges ``ordinal`` entries."""
        span = next((s for s in self.spans if s.ledger["entries"] > 0 and s.start < ordinal <= s.end), None)
        return None if span is None else (span.id, ordinal - 1 - span.start)


@dataclass(frozen=True)
class PositionFacts:
    """What a mark-delete (L, e) leaves: ``acked`` entries at or before it, the ``backlogEntries`` after it, Pulsar's
    ``getEstimatedBacklogSize`` from it (total size, minus ledgers below it, minus the consumed part of its ledger by
    average entry size), and the oldest entry timestamp of the ledgers still holding unacknowledged entries
    (per-ledger minimum from the snapshot, no entry read)."""

    acked: int
    backlog_entries: int
    backlog_bytes: int
    oldest_backlog_ledger_ts: int | None
    ledger_exists: bool


def position_facts(layout: Layout, ledger_id: int, entry_id: int) -> PositionFacts:
    entries_below = sum(s.ledger["entries"] for s in layout.spans if s.id < ledger_id)
    size_below = sum(s.ledger["size"] for s in layout.spans if s.id < ledger_id)
    own = layout.by_id.get(ledger_id)
    own_acked = 0 if own is None else min(entry_id + 1, own.ledger["entries"])
    consumed = 0 if own is None else consumed_ledger_size(own.ledger["size"], own.ledger["entries"], entry_id)
    backlog_ts = [
        s.ledger["minEntryTsMs"]
        for s in layout.spans
        if (s.id > ledger_id or (s.id == ledger_id and entry_id + 1 < s.ledger["entries"]))
        and s.ledger["minEntryTsMs"] is not None
    ]
    return PositionFacts(
        entries_below + own_acked,
        layout.entries - entries_below - own_acked,
        layout.size - size_below - consumed,
        min(backlog_ts, default=None),
        own is not None,
    )


def ledger_class(ledger: Row, cutoff_ms: int) -> str:
    """How a ledger compares with the cutoff, from metadata only."""
    closed, newest, oldest = ledger["closedAtMs"], ledger["maxEntryTsMs"], ledger["minEntryTsMs"]
    if closed is not None and closed < cutoff_ms:
        return "closed_before_cutoff"
    if newest is not None and newest < cutoff_ms:
        return "all_entries_before_cutoff"
    if oldest is not None and oldest >= cutoff_ms:
        return "no_entry_before_cutoff"
    return "straddles_cutoff" if ledger["entriesStored"] else "timestamps_unknown"


@dataclass(frozen=True)
class ExpiryTarget:
    """Where the TTL search stops: the ordinal the cursor may move to (``acked``: no move), what ended the run of
    expired entries (kind, and detail for a person), and the timestamp of the oldest entry left when known."""

    target_acked: int
    stop_kind: str
    stop_detail: str
    oldest_remaining_ts: int | None


def _stop_at(
    stop: tuple[Span, str], first: Row | None, cutoff_ms: int
) -> tuple[int | None, str, str, int | None]:
    """Where the run of expired entries stops in the blocking ledger ``stop`` given its first unexpired entry."""
    span, cls = stop
    if cls == "straddles_cutoff":
        entry_id, ts = (None, None) if first is None else (first["entryId"], first["entryTs"])
        detail = (
            f"entry {text(position_text(span.id, entry_id))} has timestamp {text(ts)} >= cutoff {cutoff_ms} "
            "(not expired)"
        )
        return None if entry_id is None else span.start + entry_id, "unexpired_entry", detail, ts
    if cls == "no_entry_before_cutoff":
        detail = (
            f"ledger {span.id}: oldest entry timestamp {span.ledger['minEntryTsMs']} >= cutoff {cutoff_ms}"
        )
        return span.start, "ledger_not_expired", detail, span.ledger["minEntryTsMs"]
    detail = (
        f"ledger {span.id}: entry timestamps unknown (entries not stored) and not closed before the cutoff"
    )
    return span.start, "timestamps_unknown", detail, span.ledger["minEntryTsMs"]


def _first_unexpired(entries: list[Row], from_entry: int, cutoff_ms: int) -> Row | None:
    hits = [e for e in entries if e["entryId"] >= from_entry and e["entryTs"] >= cutoff_ms]
    return min(hits, key=lambda e: e["entryId"], default=None)


def expiry_stops(layout: Layout, acked: int, cutoff_ms: int) -> list[tuple[Span, str]]:
    """The backlog's first two ledgers that are not wholly expired (``s``, ``s2``), with their class."""
    blocking = []
    for span in layout.spans:
        if span.end > acked and span.ledger["entries"] > 0:
            cls = ledger_class(span.ledger, cutoff_ms)
            if cls not in WHOLLY_EXPIRED:
                blocking.append((span, cls))
                if len(blocking) == 2:
                    break
    return blocking


def expiry_reads(layout: Layout, acked: int, cutoff_ms: int) -> list[Span]:
    """The ledgers the entry-level search must read: the straddling stop ledger, and the one after it when the
    stop is the mark-delete ledger itself (its acknowledged part may be what straddles)."""
    stops = expiry_stops(layout, acked, cutoff_ms)
    if not stops or stops[0][1] != "straddles_cutoff":
        return []
    reads = [stops[0][0]]
    if stops[0][0].start < acked and len(stops) > 1 and stops[1][1] == "straddles_cutoff":
        reads.append(stops[1][0])
    return reads


def expire(layout: Layout, acked: int, cutoff_ms: int, read: EntryReader) -> ExpiryTarget:
    """The TTL search of one subscription at ``acked``: reads only the stop ledgers (:func:`expiry_reads`)."""
    stops = expiry_stops(layout, acked, cutoff_ms)
    whole = ExpiryTarget(
        layout.entries, "whole_backlog_expired", "every entry after the mark-delete is expired", None
    )
    if not stops:
        return _at_least(whole, acked)
    # Every ledger the search needs is read, whether or not the first one decides (the run's read cost).
    read_entries = {
        span.id: read(span.id, span.ledger["size"]) for span in expiry_reads(layout, acked, cutoff_ms)
    }
    s = stops[0]
    s_entries = read_entries.get(s[0].id, [])
    s_first = _first_unexpired(s_entries, max(acked - s[0].start, 0), cutoff_ms)
    if s[1] == "straddles_cutoff" and s_first is None:  # the rest of the mark-delete ledger is expired too
        if len(stops) == 1:
            return _at_least(whole, acked)
        s2 = stops[1]
        s2_entries = read_entries.get(s2[0].id, [])
        s2_first = _first_unexpired(s2_entries, 0, cutoff_ms)
        target, kind, detail, oldest = _stop_at(s2, s2_first, cutoff_ms)
        if s2[1] == "straddles_cutoff" and s2_first is None:
            # A straddling s2 always holds an unexpired entry (its newest timestamp is >= cutoff); should its
            # entries disagree with its recorded timestamps, stop at its end rather than search further.
            target = s2[0].end
        return _at_least(ExpiryTarget(target, kind, detail, oldest), acked)  # type: ignore[arg-type]
    target, kind, detail, oldest = _stop_at(s, s_first, cutoff_ms)
    return _at_least(ExpiryTarget(target, kind, detail, oldest), acked)  # type: ignore[arg-type]


def _at_least(target: ExpiryTarget, acked: int) -> ExpiryTarget:
    """Never behind the mark-delete (Spark's ``greatest``, a null target read as none)."""
    moved = acked if target.target_acked is None else max(target.target_acked, acked)
    return ExpiryTarget(moved, target.stop_kind, target.stop_detail, target.oldest_remaining_ts)


@dataclass
class CursorMove:
    """A subscription's move to ``target_acked``: the new mark-delete and what the backlog is after it."""

    to_ledger: int
    to_entry: int
    backlog_bytes_after: int
    oldest_ledger_ts_after: int | None


def move_to(layout: Layout, target_acked: int) -> CursorMove | None:
    position = layout.position_of(target_acked)
    if position is None:
        return None
    after = position_facts(layout, *position)
    return CursorMove(position[0], position[1], after.backlog_bytes, after.oldest_backlog_ledger_ts)


def keep_cursor(row: Row, held_by: str | None, entries_col: str, bytes_col: str) -> Row:
    """A held topic's subscription keeps its mark-delete: nothing acknowledged (``entries_col``, ``bytes_col``),
    the backlog as it was; the reason names the hold (``spark_apps.shared.rows.keep_held``)."""
    if held_by is None or row["decision"] == "keep":
        return row
    kept = {**row, "to": None, entries_col: 0, bytes_col: 0, "backlogBytesAfter": row["backlogBytes"]}
    return keep_held(kept, held_by, decision="decision", keep="keep")


def move_actions(
    subscriptions: list[Row], bytes_col: str, extra: Callable[[Row], Row] = lambda row: {}
) -> list[Row]:
    """A ``move_cursor`` action per subscription moved (``bytes``: what it acknowledges, ``bytes_col``; ``extra``:
    the mechanism's own action columns of the row)."""
    return [
        {
            "topic": row["topic"],
            "action": MOVE_CURSOR.name,
            "subscription": row["subscription"],
            "from": row["from"],
            "to": row["to"],
            "bytes": row[bytes_col],
            "reason": row["reason"],
            **extra(row),
        }
        for row in subscriptions
        if row["decision"] == "move"
    ]


def cursor_blocker(subscription: Row) -> Row | None:
    """A kept subscription with a backlog: why nothing (more) moved."""
    if subscription["decision"] != "keep" or not (subscription["backlogEntries"] or 0) > 0:
        return None
    return {
        "topic": subscription["topic"],
        "subscription": subscription["subscription"],
        "kind": subscription["kind"],
        "detail": subscription["reason"],
        "bytes": subscription["backlogBytesAfter"],
        "entries": subscription["backlogEntries"],
    }


def cursor_tally(subscriptions: list[Row], entries_col: str, bytes_col: str) -> dict[str, Any]:
    """A bucket's share of a cursor plan's summary: the cursors moved, entries and bytes acknowledged per
    namespace."""
    per_namespace: dict[str, dict[str, int]] = {}
    for row in subscriptions:
        if row["decision"] == "move":
            counts = per_namespace.setdefault(row["namespace"], {"cursors": 0, "entries": 0, "bytes": 0})
            counts["cursors"] += 1
            counts["entries"] += row[entries_col]
            counts["bytes"] += row[bytes_col]
    return {"perNamespace": per_namespace}


def cursor_summary(per_namespace: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {
        "cursorsToMove": sum(v["cursors"] for v in per_namespace.values()),
        "entriesToAcknowledge": sum(v["entries"] for v in per_namespace.values()),
        "bytesToAcknowledge": sum(v["bytes"] for v in per_namespace.values()),
        "perNamespace": per_namespace,
    }
