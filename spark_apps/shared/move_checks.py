"""The gate checks every ``move_cursor`` of a cursor mechanism (message expiry; backlog quota) must pass, over one
topic's snapshot rows: plain Python, re-derived apart from the planners (``spark_apps.shared.cursor_rule`` is the
planners' arithmetic; nothing of it is used here), each check a boolean expected true.

Common to every move: the cursor exists and is durable, is not the compaction subscription, its topic is not a
system topic (read from the name here, ``topic_names``), ``from`` is its mark-delete in the snapshot, ``to`` is
strictly after ``from``, is a real entry and not past the topic's last entry. Unknowns (a topic, ledger or cursor
the snapshot lacks, a position that does not parse, a null the plan holds) fail the check that needs them: each
check is a plain boolean, true only when what it needs is known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.contract import table
from spark_apps.shared.rows import Row, struct_key
from spark_apps.shared.topic_names import name_facts

MOVE_COMMON_CHECKS = (
    "cursor_in_snapshot",
    "cursor_is_durable",
    "not_compaction_subscription",
    "not_system_topic",
    "from_is_current_mark_delete",
    "moves_forward",
    "to_is_an_entry_of_a_listed_ledger",
    "not_past_last_entry",
)

# The planner's count of cursors to move against the moves the gate checked.
SUMMARY_CHECKS = table("summary", "planned bigint, counted bigint, summary_reconciles boolean")

# (ledger id, payload bytes) -> the ledger's entries (entryId, publishTime, entryTs).
Entries = Callable[[int, int], list[Row]]


def position(text: str | None) -> tuple[int | None, int | None]:
    """(ledger, entry) of an ``"L:E"`` text; a part that is not there or not a number is None."""
    parts = [] if text is None else text.split(":")

    def part(index: int) -> int | None:
        try:
            return int(parts[index]) if index < len(parts) else None
        except ValueError:
            return None

    return part(0), part(1)


class TopicFacts:
    """What the move checks read of one topic in the snapshot: its row, its ledgers in id order with the ordinal
    each starts at, its cursors by name, its last entry."""

    def __init__(self, topic: Row | None, ledgers: list[Row], cursors: list[Row]) -> None:
        self.topic = topic
        self.ledgers = sorted(ledgers, key=lambda r: r["ledgerId"])
        self.by_id = {r["ledgerId"]: r for r in self.ledgers}
        self.cursors = {c["name"]: c for c in cursors}
        self.starts: dict[int, int] = {}
        total = 0
        for ledger in self.ledgers:
            self.starts[ledger["ledgerId"]] = total
            total += ledger["entries"]
        self.entries = total
        written = [r for r in self.ledgers if r["entries"] > 0]
        self.last = (written[-1]["ledgerId"], written[-1]["entries"] - 1) if written else (None, None)

    def value(self, column: str):
        return None if self.topic is None else self.topic.get(column)

    def entries_at_or_before(self, ledger_id: int | None, entry_id: int | None) -> int | None:
        """How many of the topic's entries are at or before a position (None: the topic has no ledger)."""
        if not self.ledgers:
            return None
        count = 0
        for ledger in self.ledgers if ledger_id is not None else ():
            if ledger["ledgerId"] < ledger_id:
                count += ledger["entries"]
            elif ledger["ledgerId"] == ledger_id:
                count += ledger["entries"] if entry_id is None else min(entry_id + 1, ledger["entries"])
        return count

    def entry_at(self, ordinal: int) -> tuple[Row, int] | None:
        """The ledger holding the topic's entry at 0-based ``ordinal``, and that entry's id."""
        for ledger in self.ledgers:
            start = self.starts[ledger["ledgerId"]]
            if start <= ordinal < start + ledger["entries"]:
                return ledger, ordinal - start
        return None


def common_move_checks(facts: TopicFacts, move: Row, *, allow_ledger_start: bool) -> Row:
    """``allow_ledger_start``: a ``(L, -1)`` target is legal (the time eviction's mark-delete)."""
    cursor = facts.cursors.get(move["subscription"])
    (from_l, from_e), (to_l, to_e) = position(move["from"]), position(move["to"])
    to_ledger = facts.by_id.get(to_l)
    to_entries = None if to_ledger is None else to_ledger["entries"]
    valid_entry = to_e is not None and to_entries is not None and 0 <= to_e < to_entries
    # (L, -1) acknowledges only entries of ledgers before L, all written, so it is never past the end while L is
    # one of the topic's ledgers, even an empty current ledger after a roll.
    before_a_listed_ledger = allow_ledger_start and to_e == -1 and to_ledger is not None
    durable = None if cursor is None else cursor["durable"]
    mark_delete = (None, None) if cursor is None else (cursor["markDeleteLedger"], cursor["markDeleteEntry"])
    return {
        "cursor_in_snapshot": durable is not None,
        "cursor_is_durable": durable is True,
        "not_compaction_subscription": move["subscription"] not in (None, COMPACTION_SUBSCRIPTION),
        "not_system_topic": name_facts(move["topic"])["isSystemTopic"] is False,
        "from_is_current_mark_delete": cursor is not None and (from_l, from_e) == mark_delete,
        "moves_forward": struct_key(to_l, to_e) > struct_key(from_l, from_e),
        "to_is_an_entry_of_a_listed_ledger": valid_entry or before_a_listed_ledger,
        "not_past_last_entry": struct_key(to_l, to_e) <= struct_key(*facts.last) or before_a_listed_ledger,
    }


def entries_expired(facts: TopicFacts, move: Row, cutoff_ms: int | None, read: Entries) -> bool:
    """Is every entry in (from, to] expired? A ledger closed before the cutoff, or whose newest entry is before it,
    passes as a whole; any other ledger in the range is read, and each of its entries in the range must be there
    with a timestamp before the cutoff."""
    (from_l, from_e), (to_l, to_e) = position(move["from"]), position(move["to"])
    if cutoff_ms is None or None in (from_l, from_e, to_l, to_e):
        return False
    verdicts = []
    for ledger in facts.ledgers:
        ledger_id = ledger["ledgerId"]
        if not (from_l <= ledger_id <= to_l) or ledger["entries"] <= 0:
            continue
        lo = from_e + 1 if ledger_id == from_l else 0
        hi = to_e if ledger_id == to_l else ledger["entries"] - 1
        if lo > hi:
            continue
        closed, newest = ledger["closedAtMs"], ledger["maxEntryTsMs"]
        if (closed is not None and closed < cutoff_ms) or (newest is not None and newest < cutoff_ms):
            verdicts.append(True)
            continue
        read_entries = read(ledger_id, ledger["size"]) if ledger["entriesStored"] else []
        in_range = [e for e in read_entries if lo <= e["entryId"] <= hi]
        verdicts.append(len(in_range) == hi - lo + 1 and all(e["entryTs"] < cutoff_ms for e in in_range))
    return bool(verdicts) and all(verdicts)


def summary_rows(summary: Mapping[str, Any], moves_checked: int) -> list[Row]:
    """The :data:`SUMMARY_CHECKS` row: the summary's ``cursorsToMove`` is the number of moves checked."""
    planned = int(summary.get("cursorsToMove", 0))
    return [{"planned": planned, "counted": moves_checked, "summary_reconciles": planned == moves_checked}]
