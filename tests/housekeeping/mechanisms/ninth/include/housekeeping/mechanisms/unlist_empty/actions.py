"""Empty-ledger unlisting's one action kind: a closed, empty ledger leaves its topic's ledger list (its row kept in
the pending-deletion log until purge, restorable as any deleted ledger)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, select

from housekeeping.engine.actions import ActionKind, Changes, Frees, TopicTally
from housekeeping.store import metadata_schema as t
from housekeeping.store.store import record_pending_deletion


class ForgetEmptyLedger(ActionKind):
    def apply_in_topic(self, conn: Any, run: Any, tally: TopicTally, row: Mapping[str, Any]) -> None:
        where = and_(t.ledgers.c.topic == tally.topic, t.ledgers.c.ledger_id == int(row["ledgerId"]))
        stored = conn.execute(select(t.ledgers).where(where)).one()
        conn.execute(t.ledgers.delete().where(where))
        record_pending_deletion(
            conn,
            dict(stored._mapping),
            run_id=run.run_id,
            as_of_ms=run.as_of_ms,
            purge_after_ms=run.purge_after_ms,
        )
        tally.ledgers_deleted.append(int(row["ledgerId"]))
        tally.add("emptyLedgersForgotten")


FORGET_EMPTY_LEDGER = ForgetEmptyLedger(
    "forget_empty_ledger",
    "a closed ledger without entries leaves the ledger list",
    Changes.LEDGERS,
    Frees.DATA,
    result_keys={"emptyLedgersForgotten": 0},
)
