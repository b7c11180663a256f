"""``flag_backlog_quota``: backlog quota's recorded state. A topic's quota (per type) is recorded as exceeded or
cleared at the run's logical time, for the write path (producer_request_hold / producer_exception refuse new
producers while it is exceeded) and the alert; it deletes and moves nothing, so a hold does not forbid it. The
evictions are the shared ``move_cursor``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, insert, select, update

from housekeeping.engine.actions import ActionKind, Changes, TopicTally
from housekeeping.store import metadata_schema as t


def record_quota_state(conn: Any, topic: str, row: Mapping[str, Any], as_of_ms: int, run_id: str) -> int:
    """Upsert the topic's backlog-quota state, never over a state measured at a later logical time (a backfill
    of an older date must not undo a newer measurement). Returns how many states were recorded (0 or 1)."""
    q = t.backlog_quota_states.c
    key = and_(q.topic == topic, q.quota_type == row["quotaType"])
    exceeded = bool(row["exceeded"])
    values = {
        "policy": row["policy"],
        "exceeded": exceeded,
        "limit_value": int(row["limitValue"]),
        "measured_value": row.get("measuredValue"),
        "exceeded_since_ms": row.get("exceededSinceMs") if exceeded else None,
        "cleared_at_ms": None if exceeded else as_of_ms,
        "as_of_ms": as_of_ms,
        "run_id": run_id,
    }
    current = conn.execute(select(q.as_of_ms).where(key)).first()
    if current is None:
        conn.execute(
            insert(t.backlog_quota_states).values(topic=topic, quota_type=row["quotaType"], **values)
        )
        return 1
    if current.as_of_ms > as_of_ms:
        return 0
    return conn.execute(update(t.backlog_quota_states).where(key).values(**values)).rowcount


class FlagBacklogQuota(ActionKind):
    def apply_in_topic(self, conn: Any, run: Any, tally: TopicTally, row: Mapping[str, Any]) -> None:
        tally.add("quotaStatesRecorded", record_quota_state(conn, tally.topic, row, run.as_of_ms, run.run_id))


FLAG_BACKLOG_QUOTA = FlagBacklogQuota(
    "flag_backlog_quota",
    "a topic's backlog quota recorded as exceeded or cleared (producer policies block new producers)",
    Changes.STATE,
    held_forbidden=False,
    result_keys={"quotaStatesRecorded": 0},
)
