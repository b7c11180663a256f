"""A topic's ledger list with Pulsar's position arithmetic (``ManagedLedgerImpl``): entries acknowledged at a
mark-delete, the backlog from it, its estimated size. One definition for the backlog-quota rules
(``spark_apps.backlog.quota``, per topic in the planner's one pass) and the store's metrics (``housekeeping.observe.metrics``)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

Position = tuple[int, int]


@dataclass(frozen=True)
class Ledger:
    ledger_id: int
    entries: int
    size: int
    closed_at_ms: int | None


class TopicLedgers:
    """A topic's ledger list with Pulsar's position arithmetic."""

    def __init__(self, ledgers: list[Ledger]) -> None:
        self.ledgers = sorted(ledgers, key=lambda ledger: ledger.ledger_id)
        self.ids = [ledger.ledger_id for ledger in self.ledgers]
        self.by_id = {ledger.ledger_id: ledger for ledger in self.ledgers}
        self.start: list[int] = []
        total = 0
        for ledger in self.ledgers:
            self.start.append(total)
            total += ledger.entries
        self.total_entries = total
        self.total_size = sum(ledger.size for ledger in self.ledgers)
        self.current_id = self.ids[-1] if self.ids else None

    def acked(self, position: Position) -> int:
        """Entries at or before ``position``."""
        ledger_id, entry_id = position
        index = bisect.bisect_left(self.ids, ledger_id)
        below = self.start[index] if index < len(self.ids) else self.total_entries
        own = self.by_id.get(ledger_id)
        return below + (min(entry_id + 1, own.entries) if own is not None else 0)

    def entries_between(self, after: Position, upto: Position) -> int:
        """Entries at positions in (after, upto]: what moving a mark-delete from ``after`` to ``upto``
        acknowledges."""
        return max(0, self.acked(upto) - self.acked(after))

    def backlog_entries(self, position: Position) -> int:
        return self.total_entries - self.acked(position)

    def position_of(self, acked: int) -> Position:
        """The mark-delete that acknowledges exactly ``acked`` (>= 1) entries."""
        acked = min(acked, self.total_entries)
        for ledger, start in zip(self.ledgers, self.start, strict=True):
            if ledger.entries > 0 and start < acked <= start + ledger.entries:
                return ledger.ledger_id, acked - 1 - start
        raise ValueError(f"no entry at ordinal {acked - 1}")

    def estimated_backlog_bytes(self, position: Position) -> int:
        """``ManagedLedgerImpl#getEstimatedBacklogSize`` from a mark-delete position."""
        ledger_id, entry_id = position
        size = self.total_size - sum(ledger.size for ledger in self.ledgers if ledger.ledger_id < ledger_id)
        own = self.by_id.get(ledger_id)
        if own is None:
            return size
        return size - consumed_ledger_size(own.size, own.entries, entry_id)

    def next_valid_ledger(self, ledger_id: int) -> int | None:
        index = bisect.bisect_left(self.ids, ledger_id + 1)
        return self.ids[index] if index < len(self.ids) else None

    def last_entry(self) -> Position | None:
        """The topic's last confirmed entry (``ManagedLedgerImpl#getLastConfirmedEntry``): the last entry of the newest
        ledger holding one (None: no entry was ever written)."""
        for ledger in reversed(self.ledgers):
            if ledger.entries > 0:
                return ledger.ledger_id, ledger.entries - 1
        return None

    def accepts_mark_delete(self, current: Position, new: Position) -> bool:
        """``ManagedCursorImpl#asyncMarkDelete``: a position past the last confirmed entry is refused, unless the
        cursor has consumed all of its own (listed) ledger and the position is in the ledger right after the last
        confirmed entry's (``shouldCursorMoveForward``)."""
        last = self.last_entry()
        if last is None:
            return False
        if new <= last:
            return True
        own = self.by_id.get(current[0])
        return own is not None and current[1] + 1 >= own.entries and new[0] == self.next_valid_ledger(last[0])

    def first_unacked_ledger(self, position: Position) -> Ledger | None:
        """The ledger holding the first entry after ``position`` (None when there is none)."""
        acked = self.acked(position)
        if acked >= self.total_entries:
            return None
        for ledger, start in zip(self.ledgers, self.start, strict=True):
            if start <= acked < start + ledger.entries:
                return ledger
        return None


def consumed_ledger_size(size: int, entries: int, entry_id: int) -> int:
    """``ManagedLedgerImpl#consumedLedgerSize``."""
    if entries <= 0:
        return 0
    if entries == entry_id + 1:
        return size
    return (entry_id + 1) * (size // entries) if entry_id >= 0 else 0
