"""The journal: who did what to the store, when (logical and wall-clock time) and why, with the plan rows each
applied action came from. One row per topic an apply touched, per run start and finish, per purge, restore and
hold change; ``housekeeping journal`` reads it back (``housekeeping.observe.journal_view``)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import and_, insert, select

from housekeeping.core.actor import current_actor
from housekeeping.core.timeutil import wall_clock_ms
from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store, read_transaction, write_transaction

# quotaType: which backlog quota a cursor move (an eviction) or a quota flag was for; bytesReplaced: the compacted
# ledger a rewrite replaced (with ``bytes``, what it frees: ``ActionKind.freed_bytes`` counts journaled rows too).
PLAN_ROW_KEYS = (
    "action",
    "ledgerId",
    "subscription",
    "from",
    "to",
    "bytes",
    "bytesReplaced",
    "reason",
    "quotaType",
)


def plan_rows(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan rows a journal entry came from (its ``why``), without the mechanism-specific extras."""
    return [{k: a.get(k) for k in PLAN_ROW_KEYS if a.get(k) is not None} for a in actions]


def journal(conn: Any, **fields: Any) -> None:
    """One journal row, in the caller's transaction; ``fields`` as :func:`journal_row` takes them."""
    journal_rows(conn, [journal_row(**fields)])


def journal_row(
    *,
    run_id: str,
    mechanism: str,
    topic: str | None,
    action: str,
    status: str,
    detail: dict[str, Any],
    as_of_ms: int,
    actor: str | None = None,
) -> dict[str, Any]:
    """A journal row recorded now, to write with :func:`journal_rows`. ``actor``: who (default: this process's
    user)."""
    return {
        "actor": actor or current_actor(),
        "run_id": run_id,
        "mechanism": mechanism,
        "topic": topic,
        "action": action,
        "status": status,
        "detail": json.dumps(detail, sort_keys=True, default=str),
        "as_of_ms": as_of_ms,
        "recorded_at_ms": wall_clock_ms(),  # audit column only; never used in a decision
    }


def journal_rows(conn: Any, rows: list[dict[str, Any]]) -> None:
    """Journal rows (:func:`journal_row`) in the caller's transaction, in their order, as one statement executed
    for each (one statement object, values as parameters: compiled once, as store.record_pending_deletion)."""
    if rows:
        conn.execute(_INSERT_JOURNAL, rows)


_INSERT_JOURNAL = insert(t.journal)


def begin_run(
    store: Store, *, run_id: str, mechanism: str, as_of_ms: int, actor: str, detail: dict[str, Any]
) -> set[str]:
    """Journal the run as started (once: a retry finds it) and return the topics it already applied, which a
    retried apply skips."""
    with write_transaction(store.engine) as conn:
        done = {
            row.topic
            for row in conn.execute(
                select(t.journal.c.topic).where(
                    and_(t.journal.c.run_id == run_id, t.journal.c.status == "applied")
                )
            )
        }
        started = conn.execute(
            select(t.journal.c.id).where(and_(t.journal.c.run_id == run_id, t.journal.c.status == "started"))
        ).first()
        if started is None:
            _journal_run(conn, "started", run_id, mechanism, as_of_ms, actor, detail)
    return done


def _journal_run(
    conn: Any, status: str, run_id: str, mechanism: str, as_of_ms: int, actor: str, detail: dict
) -> None:
    """A run-level journal row (no topic): the run's ``started`` or ``finished`` entry."""
    journal(
        conn,
        run_id=run_id,
        mechanism=mechanism,
        topic=None,
        action="apply",
        status=status,
        detail=detail,
        as_of_ms=as_of_ms,
        actor=actor,
    )


def has_finished_apply(store: Store, mechanism: str) -> bool:
    """Whether an apply of ``mechanism`` ever finished on this store (its run's ``finished`` journal row)."""
    with read_transaction(store.engine) as conn:
        found = conn.execute(
            select(t.journal.c.id)
            .where(
                and_(
                    t.journal.c.mechanism == mechanism,
                    t.journal.c.action == "apply",
                    t.journal.c.status == "finished",
                    t.journal.c.topic.is_(None),
                )
            )
            .limit(1)
        ).first()
    return found is not None


def finish_run(
    store: Store, *, run_id: str, mechanism: str, as_of_ms: int, actor: str, detail: dict[str, Any]
) -> None:
    """Journal the run as finished, with its result (the pair of ``begin_run``)."""
    with write_transaction(store.engine) as conn:
        _journal_run(conn, "finished", run_id, mechanism, as_of_ms, actor, detail)
