"""``housekeeping journal``: who did what, when, why, with the plan rows each action came from.

Every apply, purge and restore writes the journal in the same transaction as the change it records, so the
journal is the store's own history. ``when`` is both the logical time the decision was made for (``asOf``)
and the wall-clock time it was recorded (``recordedAt``, audit only).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import or_, select

from housekeeping.core.names import NamespaceName, TopicName
from housekeeping.core.timeutil import format_ms
from housekeeping.store import metadata_schema as t


def _like(text: str) -> str:
    """``text`` escaped for a LIKE pattern (escape character ``\\``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@dataclass(frozen=True)
class JournalFilter:
    """Which journal rows to show, one definition for the CLI and the console (its query parameters), applied in
    SQL. ``topic``: that topic's rows; ``namespace``: its topics' rows; ``mechanism``: a mechanism (or ``purge``,
    ``restore``, ``hold``, ``admin``); ``run``: rows whose run id is ``run`` or contains it (an Airflow run id such as
    ``manual__2026-11-22T06:00:00+00:00`` finds its DAG run); ``actor``: rows whose actor contains it. An empty
    value (a form's empty field) is no filter; a topic or namespace is checked (bad input names it)."""

    topic: str | None = None
    namespace: str | None = None
    mechanism: str | None = None
    run: str | None = None
    actor: str | None = None

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            object.__setattr__(self, field.name, value.strip() or None if isinstance(value, str) else None)
        if self.topic is not None:
            object.__setattr__(self, "topic", str(TopicName.parse(self.topic)))
        if self.namespace is not None:
            object.__setattr__(self, "namespace", str(NamespaceName.parse(self.namespace)))

    def as_dict(self) -> dict[str, str]:
        """The filter as a form shows it (an unset field empty)."""
        return {field.name: getattr(self, field.name) or "" for field in fields(self)}

    def statement(self, *, newest_first: bool) -> Any:
        j = t.journal.c
        query = select(t.journal).order_by(j.id.desc() if newest_first else j.id)
        if self.topic is not None:
            query = query.where(j.topic == self.topic)
        if self.namespace is not None:  # a prefix in SQL; the exact namespace of each row in :meth:`keeps`
            query = query.where(j.topic.like(f"%://{_like(self.namespace)}/%", escape="\\"))
        if self.mechanism is not None:
            query = query.where(j.mechanism == self.mechanism)
        if self.run is not None:
            query = query.where(or_(j.run_id == self.run, j.run_id.like(f"%{_like(self.run)}%", escape="\\")))
        if self.actor is not None:
            query = query.where(j.actor.like(f"%{_like(self.actor)}%", escape="\\"))
        return query

    def keeps(self, row: Any) -> bool:
        """A row the SQL prefix matched is of the namespace itself (not of one whose name extends it)."""
        return self.namespace is None or str(TopicName.parse(row.topic).namespace_name) == self.namespace


def journal_entries(
    conn: Any,
    where: JournalFilter | None = None,
    *,
    limit: int | None = None,
    newest_first: bool = False,
    **filters: str | None,
) -> list[dict[str, Any]]:
    """Journal rows ``where`` (or a :class:`JournalFilter` of ``filters``) keeps: the newest ``limit`` of them, oldest
    first unless ``newest_first``. Read newest first and stopped at ``limit``, so a long journal is not read
    whole."""
    where = where if where is not None else JournalFilter(**filters)
    picked = []
    for row in _streamed(conn, where.statement(newest_first=True)):
        if where.keeps(row):
            picked.append(row)
            if limit is not None and len(picked) >= limit:
                break
    if not newest_first:
        picked.reverse()
    return [_entry(row) for row in picked]


def _streamed(conn: Any, statement: Any) -> Iterator[Any]:
    result = conn.execution_options(yield_per=500).execute(statement)
    try:
        yield from result
    finally:
        result.close()


def _target(row: Any, detail: Any) -> str | None:
    """What the entry acted on, for people: a hold's namespace or topic, the ledgers a restore brought back
    (``topic:ledger``), else its topic."""
    if not isinstance(detail, dict):
        return row.topic
    if row.mechanism in ("hold", "admin") and detail.get("target"):  # admin: a namespace's policies too
        return str(detail["target"])
    ledgers = detail.get("ledgers") if row.mechanism == "restore" else None
    if ledgers and row.topic:
        return ", ".join(f"{row.topic}:{ledger}" for ledger in ledgers)
    return row.topic


def _entry(row: Any) -> dict[str, Any]:
    detail = json.loads(row.detail)
    why = detail.get("why") or detail.get("reason") if isinstance(detail, dict) else None
    return {
        "id": row.id,
        "recordedAt": format_ms(row.recorded_at_ms),
        "asOf": format_ms(row.as_of_ms),
        "actor": row.actor or "unknown (recorded before actors were journaled)",
        "runId": row.run_id,
        "mechanism": row.mechanism,
        "topic": row.topic,
        "target": _target(row, detail),
        "action": row.action,
        "status": row.status,
        "why": why,
        "planRows": detail.pop("planRows", []) if isinstance(detail, dict) else [],
        "detail": detail,
    }


def format_text(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "no journal entries match"
    lines = []
    for e in entries:
        lines.append(
            f"{e['recordedAt']}  as-of {e['asOf']}  {e['actor']}  {e['mechanism']} {e['action']} "
            f"{e['status']}  {e['target'] or '(run)'}  run {e['runId']}"
        )
        if e["why"]:
            lines.append(f"    why: {e['why']}")
        for row in e["planRows"]:
            target = row.get("ledgerId", row.get("subscription", ""))
            moved = f" {row['from']} -> {row['to']}" if "from" in row and "to" in row else ""
            size = f" ({row['bytes']} bytes)" if "bytes" in row else ""
            lines.append(f"    plan: {row['action']} {target}{moved}{size}: {row.get('reason', '')}")
    return "\n".join(lines)
