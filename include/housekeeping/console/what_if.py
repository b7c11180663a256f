"""The console's policy what-if: a form whose request is checked against the store by the rules the DAG's first task
uses (bad input is a 400 naming it, before anything runs), then a run of the ``policy_what_if`` DAG (which changes
nothing) on the user's behalf, and a page that follows the run and shows its report when written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Request, status
from fastapi.responses import FileResponse, HTMLResponse
from pydantic import BaseModel, Field

from housekeeping.console.access import Reader, actor_of, may_trigger
from housekeeping.console.pages import render
from housekeeping.console.store import ConsoleStore

if TYPE_CHECKING:
    from housekeeping.store.store import Store

router = APIRouter()
WHAT_IF_DAG = "policy_what_if"


class WhatIfBody(BaseModel):
    mechanism: str = Field(default="trim")
    policies: dict[str, Any] = Field(default_factory=dict)
    sweep: str | None = None
    asOf: str | None = None
    scope: str | None = None


@router.post("/api/v1/what-if", status_code=201)
def post_what_if(user: Reader, store: ConsoleStore, body: Annotated[WhatIfBody, Body()]) -> dict[str, Any]:
    """Check the request against the store, then run the policy_what_if DAG with it: ``{"runId", "page"}``."""
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.utils.types import DagRunTriggeredByType

    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.what_if.overlay import PolicyOverlay
    from housekeeping.what_if.what_if import check_against_store

    may_trigger(user, WHAT_IF_DAG)
    if body.asOf:
        parse_as_of(body.asOf)
    overlay = PolicyOverlay.from_document(body.policies, "the policies") if body.policies else None
    check_against_store(store, body.mechanism, overlay, body.sweep or None, body.scope or None)
    conf = {
        "mechanism": body.mechanism,
        "policies": body.policies,
        "sweep": body.sweep or None,
        "as_of": body.asOf or None,
        "scope": body.scope or None,
    }
    run = trigger_dag(
        WHAT_IF_DAG,
        triggered_by=DagRunTriggeredByType.UI,
        triggering_user_name=actor_of(user),
        conf=conf,
    )
    if run is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, f"{WHAT_IF_DAG} is not in Airflow (yet)")
    return {"runId": run.run_id, "page": f"what-if/{run.run_id}"}


def _run_state(run_id: str) -> tuple[str | None, bool]:
    """The DAG run's state, and whether its DAG is paused (a paused DAG runs nothing)."""
    from airflow.models import DagModel, DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        found = (
            session.query(DagRun).filter(DagRun.dag_id == WHAT_IF_DAG, DagRun.run_id == run_id).one_or_none()
        )
        model = session.get(DagModel, WHAT_IF_DAG)
        return (None if found is None else str(found.state)), bool(model is not None and model.is_paused)


def _reports(store: Store) -> list[dict[str, Any]]:
    from housekeeping.what_if.report import REPORTS_DIR

    found = []
    for page in sorted((store.root / REPORTS_DIR).glob("*/report.json"), reverse=True)[:50]:
        document = json.loads(page.read_text(encoding="utf-8"))
        request = (
            json.loads((page.parent / "request.json").read_text())
            if (page.parent / "request.json").is_file()
            else {}
        )
        found.append({"directory": page.parent.name, "asOf": document.get("asOf"), "request": request})
    return found


@router.get("/what-if", response_class=HTMLResponse)
def what_if_page(request: Request, user: Reader, store: ConsoleStore) -> HTMLResponse:
    from housekeeping.mechanisms.registry import what_if_mechanisms
    from housekeeping.what_if.sweep import KNOBS

    return render(
        "what_if.html", request, user, mechanisms=[*what_if_mechanisms(), "all"], knobs=list(KNOBS),
        reports=_reports(store),
    )  # fmt: skip


@router.get("/what-if/{run_id}", response_class=HTMLResponse)
def what_if_result(request: Request, user: Reader, store: ConsoleStore, run_id: str) -> HTMLResponse:
    from housekeeping.what_if.report import report_dir_of

    state, paused = _run_state(run_id)
    directory = report_dir_of(store.root, run_id)
    ready = (directory / "index.html").is_file()
    return render(
        "what_if_result.html", request, user, run_id=run_id, state=state, paused=paused, ready=ready,
        directory=directory.name,
    )  # fmt: skip


@router.get("/what-if-reports/{directory}/{name}")
def what_if_file(user: Reader, store: ConsoleStore, directory: str, name: str) -> FileResponse:
    """A what-if report's page or data, only from its own directory under the store's what-if reports."""
    from housekeeping.core.errors import NotFound
    from housekeeping.what_if.report import REPORTS_DIR

    base = (store.root / REPORTS_DIR).resolve()
    path = (base / directory / name).resolve()
    if path.parent.parent != base or name not in ("index.html", "report.json") or not path.is_file():
        raise NotFound(f"no what-if report file {directory}/{name}")
    return FileResponse(Path(path))
