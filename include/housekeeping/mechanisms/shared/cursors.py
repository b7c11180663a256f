"""``move_cursor``: a subscription's mark-delete moved forward. Planned by consumed-ledger trim (readers and
subscriptions inside deleted ledgers are fast-forwarded), message expiry and backlog-quota eviction; declared here
once, applied the same way for all three.

Apply compare-and-sets each cursor on its own position: it moves only forward, only while the cursor is still
between the planned start and target; a consumer's newer ack is kept ("further"), a cursor reset behind the planned
start since the snapshot is left alone and reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, bindparam, not_, or_, select, update

from housekeeping.core.errors import InputError
from housekeeping.core.positions import parse_position
from housekeeping.core.topic_ledgers import Ledger, TopicLedgers
from housekeeping.engine.actions import ActionKind, Changes, Effect, PlanView, TopicTally, namespace_of
from housekeeping.store import metadata_schema as t
from housekeeping.store.clients import stamp_last_active


def _position_before(ledger_col: Any, entry_col: Any, position: tuple[Any, Any]) -> Any:
    """SQL: (ledger_col, entry_col) < position, portable (no row-value comparison)."""
    return or_(ledger_col < position[0], and_(ledger_col == position[0], entry_col < position[1]))


def move_cursor(conn: Any, topic: str, name: str, start: tuple[int, int], target: tuple[int, int]) -> str:
    """Move a mark-delete forward to ``target`` when it is at or after ``start`` and before ``target``: "moved",
    "further" (a consumer acknowledged to or past ``target`` since the snapshot: its newer position is kept), or
    why it was left alone (the cursor is gone, or was reset behind ``start``)."""
    key = {"cursor_topic": topic, "cursor_name": name}
    moved = conn.execute(
        _MOVE_FORWARD,
        {
            **key,
            "start_ledger": start[0],
            "start_entry": start[1],
            "target_ledger": target[0],
            "target_entry": target[1],
        },
    ).rowcount
    if moved == 1:
        return "moved"
    row = conn.execute(_POSITION, key).first()
    if row is None:
        return "cursor no longer exists"
    if (row.mark_delete_ledger, row.mark_delete_entry) >= target:
        return "further"
    return (
        f"cursor is at {row.mark_delete_ledger}:{row.mark_delete_entry}, before the planned start "
        f"{start[0]}:{start[1]} (reset since the snapshot)"
    )


# The compare-and-set and the re-read, compiled once (built per cursor they cost more than the database's work).
_C = t.cursors.c
_CURSOR_KEY = and_(_C.topic == bindparam("cursor_topic"), _C.name == bindparam("cursor_name"))
_MOVE_FORWARD = (
    update(t.cursors)
    .where(
        and_(
            _CURSOR_KEY,
            not_(
                _position_before(
                    _C.mark_delete_ledger,
                    _C.mark_delete_entry,
                    (bindparam("start_ledger"), bindparam("start_entry")),
                )
            ),
            _position_before(
                _C.mark_delete_ledger,
                _C.mark_delete_entry,
                (bindparam("target_ledger"), bindparam("target_entry")),
            ),
        )
    )
    .values(mark_delete_ledger=bindparam("target_ledger"), mark_delete_entry=bindparam("target_entry"))
)
_POSITION = select(_C.mark_delete_ledger, _C.mark_delete_entry).where(_CURSOR_KEY)


class MoveCursor(ActionKind):
    def effect(self, row: Mapping[str, Any], view: PlanView) -> Effect:
        """One cursor; the entries between its old and new mark-delete positions; the backlog bytes acknowledged."""
        topic = row["topic"]
        ledgers = TopicLedgers(
            [Ledger(int(r["ledgerId"]), int(r["entries"]), int(r["size"]), None) for r in view.ledgers(topic)]
        )
        start, target = row.get("from"), row.get("to")
        entries = (
            ledgers.entries_between(parse_position(start, topic), parse_position(target, topic))
            if start and target
            else 0
        )
        return Effect(
            namespace_of(topic),
            (self.name, topic, row.get("subscription")),
            cursors=1,
            entries=entries,
            bytes=int(row.get("bytes") or 0),
        )

    def apply_in_topic(self, conn: Any, run: Any, tally: TopicTally, row: Mapping[str, Any]) -> None:
        topic, name = tally.topic, row["subscription"]
        where = f"topic {topic} cursor {name}"
        start, target = parse_position(row["from"], where), parse_position(row["to"], where)
        if target <= start:
            raise InputError(f"{where}: refusing to move backward")
        outcome = move_cursor(conn, topic, name, start, target)
        if outcome == "moved":
            tally.add("cursorsMoved")
            # The topic had a backlog until this move, so it was active (a GC run would have stamped it); record
            # that, so inactivity is measured from here.
            stamp_last_active(conn, topic, run.as_of_ms)
        elif outcome == "further":
            tally.add("cursorsAlreadyFurther")
        else:
            tally.add("cursorsSkipped", {f"{topic} {name}": outcome})


MOVE_CURSOR = MoveCursor(
    "move_cursor",
    "a subscription's mark-delete position moved forward (trim's fast-forward, expiry, backlog eviction)",
    Changes.CURSORS,
    result_keys={"cursorsMoved": 0, "cursorsAlreadyFurther": 0, "cursorsSkipped": {}},
)
