"""Consumed-ledger trim's actions. ``delete_ledger``: a ledger leaves its topic's ledger list and waits in the
pending-deletion log for purge (restorable until then), from both tiers when it was offloaded; the topic's version is
compare-and-set first. ``delete_local_copy``: an offloaded ledger's local copy goes once the offload-deletion lag has
passed (Pulsar's ``isOffloadedNeedsDelete``: ``bookkeeperDeleted``); the ledger stays listed and is read from the
tier."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, bindparam, select, update

from housekeeping.core.errors import InputError
from housekeeping.engine.actions import ActionKind, Changes, Effect, Frees, PlanView, TopicTally, namespace_of
from housekeeping.store import metadata_schema as t
from housekeeping.store.store import LOCAL_COPY_KIND, record_pending_deletion, record_pending_deletions

# A topic's ledger rows by id, as statements compiled once (built per ledger, they cost more than SQLite's work);
# the ids bound as one expanding list, at most _LEDGERS_PER_STATEMENT (under every database's parameter limit).
_LEDGERS_KEY = and_(
    t.ledgers.c.topic == bindparam("ledger_topic"),
    t.ledgers.c.ledger_id.in_(bindparam("ledger_ids", expanding=True)),
)
# The rows deleted come back whole for the pending-deletion log: one statement, not a read then a delete
# (RETURNING: SQLite 3.35 or later, PostgreSQL).
_DELETE_LEDGERS = t.ledgers.delete().where(_LEDGERS_KEY).returning(*t.ledgers.c)
_LEDGERS_PER_STATEMENT = 500


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
        self.apply_rows_in_topic(conn, run, tally, [row])

    def apply_rows_in_topic(
        self, conn: Any, run: Any, tally: TopicTally, rows: list[Mapping[str, Any]]
    ) -> None:
        """The topic's planned ledgers in two statements per chunk (delete returning the rows, log), not three per
        ledger: at 100,000 topics SQLAlchemy's work per statement was most of trim's apply. A planned ledger not in
        the metadata raises, and the caller's transaction rolls the deletion back."""
        topic, ledger_ids = tally.topic, [int(row["ledgerId"]) for row in rows]
        if len(set(ledger_ids)) != len(ledger_ids):
            raise InputError(f"topic {topic}: the plan deletes a ledger twice ({sorted(ledger_ids)})")
        for start in range(0, len(ledger_ids), _LEDGERS_PER_STATEMENT):
            chunk = ledger_ids[start : start + _LEDGERS_PER_STATEMENT]
            key = {"ledger_topic": topic, "ledger_ids": chunk}
            stored = {row.ledger_id: row for row in conn.execute(_DELETE_LEDGERS, key)}
            missing = [ledger_id for ledger_id in chunk if ledger_id not in stored]
            if missing:
                # Cannot happen with a matching topic version; refuse rather than guess.
                raise InputError(f"topic {topic}: planned ledger {missing[0]} is not in the metadata")
            record_pending_deletions(
                conn,
                [dict(stored[ledger_id]._mapping) for ledger_id in chunk],
                run_id=run.run_id,
                as_of_ms=run.as_of_ms,
                purge_after_ms=run.purge_after_ms,
            )
            tally.ledgers_deleted.extend(chunk)
            tally.bytes_deleted += sum(stored[ledger_id].size_bytes for ledger_id in chunk)


DELETE_LEDGER = DeleteLedger(
    "delete_ledger",
    "a consumed ledger whose retention ran out leaves the ledger list (purged after the grace period)",
    Changes.LEDGERS,
    Frees.DATA,
)


class DeleteLocalCopy(ActionKind):
    """Compare-and-set on the ledger row: still listed, its offload complete at the time the plan saw, the local
    copy not deleted yet; otherwise the row is left alone and counted as skipped."""

    def apply_in_topic(self, conn: Any, run: Any, tally: TopicTally, row: Mapping[str, Any]) -> None:
        topic, ledger_id = tally.topic, int(row["ledgerId"])
        where = and_(
            t.ledgers.c.topic == topic,
            t.ledgers.c.ledger_id == ledger_id,
            t.ledgers.c.offload_complete,
            ~t.ledgers.c.local_deleted,
            t.ledgers.c.offloaded_at_ms == int(row["offloadedAtMs"]),
        )
        stored = conn.execute(select(t.ledgers).where(where)).first()
        if stored is None:
            tally.add("localCopiesSkipped", [f"{topic}:{ledger_id}"])
            return
        conn.execute(update(t.ledgers).where(where).values(local_deleted=True))
        record_pending_deletion(
            conn,
            dict(stored._mapping),
            run_id=run.run_id,
            as_of_ms=run.as_of_ms,
            purge_after_ms=run.purge_after_ms,
            kind=LOCAL_COPY_KIND,
            local=True,
        )
        tally.add("localCopiesDeleted")
        tally.add("localBytesDeleted", int(stored.size_bytes))


DELETE_LOCAL_COPY = DeleteLocalCopy(
    "delete_local_copy",
    "an offloaded ledger's local copy deleted once the offload-deletion lag passed (it stays listed, read from the tier)",
    Changes.FILES,
    Frees.LOCAL_COPY,
    result_keys={"localCopiesDeleted": 0, "localBytesDeleted": 0, "localCopiesSkipped": []},
)
