"""What the next scheduled run of a mechanism will do (Delta's ``VACUUM DRY RUN``): a dry run of its DAG as of the
next slot's logical time, started from the console on the user's behalf. The store is read as it is now, at that
time: what the scheduled run would plan if nothing changed before it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, status
from pydantic import BaseModel, Field

from housekeeping.console.access import Reader, actor_of, may_trigger

router = APIRouter()


class NextRunBody(BaseModel):
    mechanism: str = Field(min_length=1, max_length=100)


def next_slot(dag_id: str) -> dict[str, Any] | None:
    """The DAG's next scheduled run as Airflow has it: ``{"dagId", "paused", "runAfter", "asOf"}`` (``asOf``: the
    run's logical "now", its data interval's end), or None when it has none (no schedule, or not parsed yet)."""
    from airflow.models import DagModel
    from airflow.utils.session import create_session

    from housekeeping.core.timeutil import format_ms

    with create_session() as session:
        model = session.get(DagModel, dag_id)
        if model is None or model.next_dagrun_data_interval_end is None:
            return None

        def iso(moment: datetime | None) -> str | None:
            return None if moment is None else format_ms(int(moment.timestamp() * 1000))

        return {
            "dagId": dag_id,
            "paused": bool(model.is_paused),
            "runAfter": iso(model.next_dagrun_create_after),
            "asOf": iso(model.next_dagrun_data_interval_end),
        }


@router.post("/api/v1/next-run", status_code=201)
def post_next_run(user: Reader, body: Annotated[NextRunBody, Body()]) -> dict[str, Any]:
    """Start a dry run of the mechanism's DAG as of its next scheduled slot: ``{"dagRunId", "asOf", "summary"}``."""
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.utils.types import DagRunTriggeredByType

    from housekeeping.core.errors import InputError
    from housekeeping.mechanisms.registry import get_mechanism

    spec = get_mechanism(body.mechanism)
    may_trigger(user, spec.dag_id)
    slot = next_slot(spec.dag_id)
    if slot is None:
        raise InputError(
            f"{spec.dag_id} has no next scheduled run (it has no schedule, or Airflow has not parsed it)"
        )
    run = trigger_dag(
        spec.dag_id,
        triggered_by=DagRunTriggeredByType.UI,
        triggering_user_name=actor_of(user),
        conf={"dry_run": True, "as_of": slot["asOf"]},
        note=f"what the scheduled run as of {slot['asOf']} will do (dry run, from the console)",
    )
    if run is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, f"{spec.dag_id} is not in Airflow (yet)")
    paused = " once the DAG is unpaused (it is paused)" if slot["paused"] else ""
    return {
        "dagRunId": run.run_id,
        "dagId": spec.dag_id,
        "asOf": slot["asOf"],
        "summary": f"{spec.dag_id}: a dry run as of {slot['asOf']} started{paused}: {run.run_id}",
    }
