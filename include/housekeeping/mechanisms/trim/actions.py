"""``delete_ledger``: consumed-ledger trim's action. A ledger leaves its topic's ledger list and waits in the
pending-deletion log for purge (restorable until then); the topic's version is compare-and-set first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, select

from housekeeping.core.errors import InputError
from housekeeping.engine.actions import ActionKind, Changes, Effect, Frees, PlanView, TopicTally, namespace_of
from housekeeping.store import metadata_schema as t
from housekeeping.store.store import record_pending_deletion


class DeleteLedger(ActionKind):
    def effect(self, row: Mapping[str, Any], view: PlanView) -> Effect:
        topic, ledger_id = row["topic"], row["ledgerId"]
        ledger = next((r for r in view.ledgers(topic) if r["ledgerId"] == ledger_id), {})
        freed = self.freed_bytes(row)
        return Effect(
            namespace_of(topic),
            (self.name, topic, ledger_id),
            ledgers=1,
            entries=int(ledger.get("entries", 0)),
            bytes=freed,
            freed=freed,
        )

    def listed_deletions(self, row: Mapping[str, Any], listed: Mapping[int, int]) -> list[int]:
        ledger_id = int(row["ledgerId"])
        return [ledger_id] if ledger_id in listed else []

    def apply_in_topic(self, conn: Any, run: Any, tally: TopicTally, row: Mapping[str, Any]) -> None:
        topic, ledger_id = tally.topic, int(row["ledgerId"])
        where = and_(t.ledgers.c.topic == topic, t.ledgers.c.ledger_id == ledger_id)
        stored = conn.execute(select(t.ledgers).where(where)).first()
        if stored is None:
            # Cannot happen with a matching topic version; refuse rather than guess.
            raise InputError(f"topic {topic}: planned ledger {ledger_id} is not in the metadata")
        conn.execute(t.ledgers.delete().where(where))
        record_pending_deletion(
            conn,
            dict(stored._mapping),
            run_id=run.run_id,
            as_of_ms=run.as_of_ms,
            purge_after_ms=run.purge_after_ms,
        )
        tally.ledgers_deleted.append(ledger_id)
        tally.bytes_deleted += stored.size_bytes


DELETE_LEDGER = DeleteLedger(
    "delete_ledger",
    "a consumed ledger whose retention ran out leaves the ledger list (purged after the grace period)",
    Changes.LEDGERS,
    Frees.DATA,
)
