"""``housekeeping journal``: who did what, when, why, with the plan rows each action came from.

Every apply, purge and restore writes the journal in the same transaction as the change it records, so the
journal is the store's own history. ``when`` is both the logical time the decision was made for (``asOf``)
and the wall-clock time it was recorded (``recordedAt``, audit only).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import or_, select

from housekeeping.core.names import TopicName
from housekeeping.core.timeutil import format_ms
from housekeeping.store import metadata_schema as t


def journal_entries(
    conn: Any, *, topic: str | None = None, run: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Journal rows, oldest first. ``topic``: that topic's rows; ``run``: rows whose run id is ``run`` or
    contains it (an Airflow run id such as ``manual__2026-11-22T06:00:00+00:00`` finds its DAG run)."""
    query = select(t.journal).order_by(t.journal.c.id)
    if topic is not None:
        query = query.where(t.journal.c.topic == str(TopicName.parse(topic)))
    if run is not None:
        escaped = run.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(
            or_(t.journal.c.run_id == run, t.journal.c.run_id.like(f"%{escaped}%", escape="\\"))
        )
    rows = list(conn.execute(query))
    if limit is not None:
        rows = rows[-limit:]
    return [_entry(row) for row in rows]


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
            f"{e['status']}  {e['topic'] or '(run)'}  run {e['runId']}"
        )
        if e["why"]:
            lines.append(f"    why: {e['why']}")
        for row in e["planRows"]:
            target = row.get("ledgerId", row.get("subscription", ""))
            moved = f" {row['from']} -> {row['to']}" if "from" in row and "to" in row else ""
            size = f" ({row['bytes']} bytes)" if "bytes" in row else ""
            lines.append(f"    plan: {row['action']} {target}{moved}{size}: {row.get('reason', '')}")
    return "\n".join(lines)
