"""Every run of every housekeeping DAG Airflow knows, refused and failed ones included, joined with the run directory
it wrote (if it got that far) and classified (``housekeeping.observe.run_states``); then the store's runs Airflow
did not start (the command line's). Read from Airflow's metadata database in the api-server's session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from housekeeping.engine.run_dir import RunDir
from housekeeping.observe.run_states import AirflowRun, RunRecord, RunState, classify

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from housekeeping.engine.mechanism import Mechanism
    from housekeeping.store.store import Store

MAX_RUNS = 500


@dataclass(frozen=True)
class RunsQuery:
    """Which runs: one mechanism's or all; one state; at most ``limit``, newest first."""

    mechanism: str | None = None
    state: RunState | None = None
    limit: int = 100


def _ms(moment: Any) -> int | None:
    return int(moment.timestamp() * 1000) if moment is not None else None


def airflow_runs(session: Session, dag_ids: list[str], limit: int) -> list[AirflowRun]:
    """The newest DAG runs of ``dag_ids`` (by when they were due), each with its tasks' states."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    rows = session.execute(
        select(
            DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.run_type, DagRun.start_date, DagRun.end_date
        )
        .where(DagRun.dag_id.in_(dag_ids))
        .order_by(DagRun.run_after.desc(), DagRun.id.desc())
        .limit(limit)
    ).all()
    keys = {(row.dag_id, row.run_id) for row in rows}
    tasks: dict[tuple[str, str], dict[str, str]] = {key: {} for key in keys}
    if keys:
        for ti in session.execute(
            select(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id, TaskInstance.state).where(
                TaskInstance.dag_id.in_({dag for dag, _ in keys}),
                TaskInstance.run_id.in_({run for _, run in keys}),
            )
        ).all():
            if (ti.dag_id, ti.run_id) in tasks:
                tasks[(ti.dag_id, ti.run_id)][ti.task_id] = str(ti.state) if ti.state is not None else None
    return [
        AirflowRun(
            dag_id=row.dag_id,
            run_id=row.run_id,
            state=str(row.state),
            run_type=str(row.run_type),
            start_ms=_ms(row.start_date),
            end_ms=_ms(row.end_date),
            tasks=tasks[(row.dag_id, row.run_id)],
        )
        for row in rows
    ]


def run_rows(store: Store, session: Session, query: RunsQuery) -> list[dict[str, Any]]:
    """The runs as the API gives them (docs/console.md, ``GET runs``): each run directory's row as before (for a
    run that took its snapshot), with Airflow's view and the classification added."""
    from housekeeping.mechanisms.registry import MECHANISMS, get_mechanism
    from housekeeping.observe.console import runs as store_runs

    specs = [get_mechanism(query.mechanism)] if query.mechanism else list(MECHANISMS.values())
    by_dag = {spec.dag_id: spec for spec in specs}
    limit = max(1, min(query.limit, MAX_RUNS))
    rows, seen = [], set()
    for run in airflow_runs(session, list(by_dag), limit):
        spec = by_dag[run.dag_id]
        path = store.run_dir(spec.name, f"{run.dag_id}__{run.run_id}")
        seen.add((spec.name, path.name))
        rows.append(_row(spec, RunDir(path), run))
    for found in store_runs(store, query.mechanism, limit):
        if (found["mechanism"], found["directory"]) in seen or found["directory"].startswith("warm-up"):
            continue
        spec = get_mechanism(found["mechanism"])
        rows.append(_row(spec, RunDir(store.run_dir(spec.name, found["directory"])), None, found))
    # Newest first; a run not started yet (queued) first of all.
    rows.sort(key=lambda row: row["startedMs"] if row["startedMs"] is not None else 2**62, reverse=True)
    if query.state is not None:
        rows = [row for row in rows if row["state"] == query.state]
    return rows[:limit]


def _row(
    spec: Mechanism, run_dir: RunDir, run: AirflowRun | None, listed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``listed``: the run directory's row when the store's listing read it already."""
    from housekeeping.observe.console import run_row

    record = RunRecord.read(run_dir)
    verdict = classify(run, record, spec.task_ids.approve, spec.task_ids.apply)
    if listed is not None:
        row = listed
    elif record.snapshot:
        row = run_row(run_dir)
    else:  # refused or failed before its snapshot: the run id it would have had
        row = {"mechanism": spec.name, "runId": f"{run.dag_id}__{run.run_id}" if run else run_dir.path.name,
               "directory": None, "asOf": None, "asOfMs": None, "takenAtMs": None, "actor": None, "gate": None,
               "approval": None, "applied": False, "report": False}  # fmt: skip
    started = run.start_ms if run is not None else row["takenAtMs"]
    ended = run.end_ms if run is not None else None
    return {
        **row,
        "dagId": run.dag_id if run is not None else None,
        "dagRunId": run.run_id if run is not None else None,
        "runType": run.run_type if run is not None else None,
        "state": str(verdict.state),
        "reason": verdict.reason,
        "dryRun": verdict.dry_run,
        "intent": str(record.intent) if record.intent is not None else None,
        "startedMs": started or None,
        "durationSeconds": (ended - started) / 1000 if started and ended else None,
        "bytesReclaimed": record.bytes_reclaimed,
    }
