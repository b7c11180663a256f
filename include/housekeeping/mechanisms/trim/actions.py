"""Consumed-ledger trim's actions. ``delete_ledger``: a ledger leaves its topic's ledger list and waits in the
pending-deletion log for purge (restorable until then), from both tiers when it was offloaded; the topic's version is
compare-and-set first. ``delete_local_copy``: an offloaded ledger's local copy goes once the offload-deletion lag has
passed (Pulsar's ``isOffloadedNeedsDelete``: ``bookkeeperDeleted``); the ledger stays listed and is read from the
tier."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, bindparam, select, tuple_, update

from housekeeping.core.errors import InputError
from housekeeping.engine.actions import ActionKind, Changes, Effect, Frees, PlanView, TopicTally, namespace_of
from housekeeping.store import metadata_schema as t
from housekeeping.store.store import LOCAL_COPY_KIND, record_pending_deletion, record_pending_deletions

# Planned ledgers by (topic, ledgerId), as a statement compiled once (built per ledger, it costs more than the
# database's work), the keys bound as one expanding list of at most _LEDGERS_PER_STATEMENT (under every database's
# parameter limit). Their topics are named apart too: SQLite finds a row-value list's rows by scanning the table, a
# topic's through the primary key. The rows deleted come back whole for the pending-deletion log: one statement,
# not a read then a delete (RETURNING: SQLite 3.35 or later, PostgreSQL).
_DELETE_LEDGERS = (
    t.ledgers.delete()
    .where(
        and_(
            t.ledgers.c.topic.in_(bindparam("ledger_topics", expanding=True)),
            tuple_(t.ledgers.c.topic, t.ledgers.c.ledger_id).in_(bindparam("ledger_keys", expanding=True)),
        )
    )
    .returning(*t.ledgers.c)
)
_LEDGERS_PER_STATEMENT = 500


def _delete_planned_ledgers(
    conn: Any, run: Any, planned: list[tuple[str, str | None, dict[int, int]]]
) -> None:
    """The planned ledgers of a batch's topics, each ``(topic, its incarnation, {ledgerId: bytes the plan says})``,
    leave the ledger list and go to the pending-deletion log (kept whole for restore, under the topic's incarnation),
    in the topics' and the plan's order.
    A planned ledger missing from the metadata, or holding other bytes than the plan says, raises, and the caller's
    transaction rolls the batch back (neither can happen with a matching topic version; refuse rather than guess)."""
    keys = [(topic, ledger_id) for topic, _, ledgers in planned for ledger_id in ledgers]
    stored = {}
    for start in range(0, len(keys), _LEDGERS_PER_STATEMENT):
        chunk = keys[start : start + _LEDGERS_PER_STATEMENT]
        bound = {"ledger_topics": sorted({topic for topic, _ in chunk}), "ledger_keys": chunk}
        stored.update({(r.topic, r.ledger_id): r for r in conn.execute(_DELETE_LEDGERS, bound)})
    for topic, _, ledgers in planned:
        for ledger_id, size in ledgers.items():
            row = stored.get((topic, ledger_id))
            if row is None:
                raise InputError(f"topic {topic}: planned ledger {ledger_id} is not in the metadata")
            if row.size_bytes != size:
                raise InputError(
                    f"topic {topic}: ledger {ledger_id} holds {row.size_bytes} bytes, the plan says {size}"
                )
    incarnations = {topic: incarnation for topic, incarnation, _ in planned}
    record_pending_deletions(
        conn,
        [dict(stored[key]._mapping) for key in keys],
        run_id=run.run_id,
        as_of_ms=run.as_of_ms,
        purge_after_ms=run.purge_after_ms,
        incarnations=incarnations,
    )


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
        """The topic's planned ledgers, deleted with the batch's other topics' at the end of its transaction
        (:func:`_delete_planned_ledgers` through ``run.at_batch_end``). The topic's tally counts them from the
        plan; the deletion checks the metadata holds exactly those rows."""
        topic, ledgers = tally.topic, {int(row["ledgerId"]): int(row["bytes"]) for row in rows}
        if len(ledgers) != len(rows):
            ledger_ids = sorted(int(row["ledgerId"]) for row in rows)
            raise InputError(f"topic {topic}: the plan deletes a ledger twice ({ledger_ids})")
        run.at_batch_end(conn, _delete_planned_ledgers, (topic, tally.incarnation, ledgers))
        tally.ledgers_deleted.extend(ledgers)
        tally.bytes_deleted += sum(ledgers.values())


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
