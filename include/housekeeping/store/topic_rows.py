"""A topic's metadata removed as a whole, kept for restore: what inactive-topic GC does to an inactive topic and
what ``housekeeping topics delete`` does by hand. Every ledger (and compacted ledger) goes to the pending-deletion
log, every other row is saved in ``deleted_topics``; no file is touched (purge does that after the grace period,
and restore brings the topic back whole until then)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import bindparam, insert, select

from housekeeping.store import metadata_schema as t
from housekeeping.store.compacted_ledgers import COMPACTED_KIND
from housekeeping.store.store import record_pending_deletion

# A topic's rows of each table, selected and deleted by statements compiled once (GC deletes tens of thousands of
# topics in one apply; built per topic, the statements cost more than the database's work).
_TOPIC_TABLES = (
    (t.compacted_ledgers, t.compacted_ledgers.c.topic),
    (t.backlog_quota_states, t.backlog_quota_states.c.topic),
    (t.cursors, t.cursors.c.topic),
    (t.ledgers, t.ledgers.c.topic),
    (t.topics, t.topics.c.name),
)
_SELECT = {table: select(table).where(column == bindparam("rows_topic")) for table, column in _TOPIC_TABLES}
_DELETE = {table: table.delete().where(column == bindparam("rows_topic")) for table, column in _TOPIC_TABLES}
_INSERT_DELETED_TOPIC = insert(t.deleted_topics)


def _rows(conn: Any, table: Any, topic: str) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in conn.execute(_SELECT[table], {"rows_topic": topic})]


def delete_topic_rows(
    conn: Any, topic: str, *, run_id: str, as_of_ms: int, purge_after_ms: int
) -> tuple[list[int], int]:
    """Remove the topic's metadata in the caller's transaction (see the module docstring), under ``run_id`` at
    ``as_of_ms``, purgeable from ``purge_after_ms``: the ledger ids it logged and their bytes."""
    topic_row = dict(conn.execute(_SELECT[t.topics], {"rows_topic": topic}).one()._mapping)
    cursor_rows = _rows(conn, t.cursors, topic)
    quota_rows = _rows(conn, t.backlog_quota_states, topic)
    ledger_rows = sorted(_rows(conn, t.ledgers, topic), key=lambda r: r["ledger_id"])
    # The topic's compacted ledgers (current, or staged by a compaction that never switched) go the same way.
    compacted_rows = _rows(conn, t.compacted_ledgers, topic)
    for rows, kind in ((ledger_rows, "ledger"), (compacted_rows, COMPACTED_KIND)):
        for row in rows:
            record_pending_deletion(
                conn, row, run_id=run_id, as_of_ms=as_of_ms, purge_after_ms=purge_after_ms, kind=kind
            )
    for table, _ in _TOPIC_TABLES:  # children first (foreign keys), the topic last
        conn.execute(_DELETE[table], {"rows_topic": topic})
    conn.execute(
        _INSERT_DELETED_TOPIC,
        dict(
            topic=topic,
            kind="topic",
            saved_rows=json.dumps(
                {
                    "topic": topic_row,
                    "cursors": cursor_rows,
                    "quotaStates": quota_rows,
                    "ledgerIds": [r["ledger_id"] for r in ledger_rows],
                    "compactedLedgerIds": [r["ledger_id"] for r in compacted_rows],
                },
                sort_keys=True,
            ),
            run_id=run_id,
            deleted_as_of_ms=as_of_ms,
            purge_after_ms=purge_after_ms,
            status="pending",
        ),
    )
    deleted = ledger_rows + compacted_rows
    return [r["ledger_id"] for r in deleted], sum(r["size_bytes"] for r in deleted)
