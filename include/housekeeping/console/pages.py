"""The console's pages, server-rendered from ``templates/`` (offline: no CDN, the charts inline SVG). Each page reads
what the API reads; the forms (Restore, hold add and remove) call the API from the page with the CSRF token the
console's cookie carries, so a page changes nothing by itself and a forged cross-site request is refused."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from airflow.api_fastapi.common.db.common import SessionDep
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, HTMLResponse
from markupsafe import Markup

from housekeeping.console.access import Reader, actor_of, may_edit
from housekeeping.console.store import ConsoleSettings, ConsoleStore
from housekeeping.observe.journal_view import JournalFilter
from housekeeping.observe.run_states import RunState

if TYPE_CHECKING:
    from housekeeping.store.store import Store

router = APIRouter()
TEMPLATES = Path(__file__).with_name("templates")
# A duration the plans write in seconds ("closed 3074513 s before as-of"), as a person reads it beside the figure.
SECONDS = re.compile(r"\b(\d{2,}) s\b")


def human_seconds(text: str) -> str:
    """``text`` with each duration of ten seconds or more written in seconds followed by its days and hours:
    "3074513 s" -> "3074513 s (35d 13h)". For the page only: the plan's reasons stay as the plan wrote them."""
    from housekeeping.core.timeutil import format_duration_ms

    return SECONDS.sub(
        lambda found: f"{found.group(0)} ({format_duration_ms(int(found.group(1)) * 1000)})", text
    )


def markdown_html(text: str) -> Markup:
    """A report's Markdown as HTML (CommonMark and tables; raw HTML in it is shown as text, never run)."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(human_seconds(text))
    # Under the page's own headings: the report's h1 is the page's h3.
    return Markup(re.sub(r"<(/?)h([1-4])>", lambda m: f"<{m.group(1)}h{int(m.group(2)) + 2}>", html))


def render(name: str, request: Request, user: Any, **context: Any) -> HTMLResponse:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    from housekeeping.core.timeutil import format_duration_ms, format_ms
    from housekeeping.engine.pages import byte_hours
    from housekeeping.engine.report import human_bytes

    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        undefined=StrictUndefined,
        autoescape=select_autoescape(["html"]),
    )
    env.filters["human"] = lambda value: "-" if value is None else human_bytes(value)
    env.filters["duration"] = lambda seconds: (
        "-" if seconds is None else format_duration_ms(int(seconds * 1000))
    )
    env.filters["ms"] = format_ms
    env.filters["seconds"] = human_seconds
    env.filters["byte_hours"] = byte_hours
    env.filters["without"] = lambda mapping, *keys: {k: v for k, v in mapping.items() if k not in keys}
    base = str(request.url_for("store_page")).rstrip("/") + "/"
    page = env.get_template(name).render(
        base=base, page=name.removesuffix(".html"), user=actor_of(user), may_edit=may_edit(user), **context
    )
    return HTMLResponse(page)


def _now_ms() -> int:
    return int(time.time() * 1000)


@router.get("/", response_class=HTMLResponse, name="store_page")
def store_page(
    request: Request, user: Reader, store: ConsoleStore, settings: ConsoleSettings
) -> HTMLResponse:
    """The store now: bytes per namespace and tier, backlog, quotas, deletion lag, what waits for purge, the latest
    run of each mechanism, and the storage report's charts drawn from the store as it is."""
    from housekeeping.observe.console import namespaces, pending_deletions, runs
    from housekeeping.observe.storage_report import collect, plots

    now = _now_ms()
    data = collect(store, now, settings.deletion_lag_objectives)
    pending = pending_deletions(store)
    latest: dict[str, Any] = {}
    for run in runs(store, limit=1000):
        latest.setdefault(run["mechanism"], run)
    return render(
        "store.html",
        request,
        user,
        now=now,
        namespaces=namespaces(store, now, settings.deletion_lag_objectives),
        pending=pending[:20],
        pending_total=len(pending),
        pending_bytes=sum(p["bytes"] or 0 for p in pending),
        latest=sorted(latest.values(), key=lambda r: r["mechanism"]),
        charts=plots(data),
        lag=data["deletionLag"],
        capacity=_capacity_summary(store),
    )


def _capacity_summary(store: Store) -> dict[str, Any] | None:
    """The newest capacity report's nearest limits and its tenants' chargeback (None before the first)."""
    from housekeeping.observe.capacity.report import nearest_limits, read_latest

    latest = read_latest(store)
    if latest is None:
        return None
    return {"asOf": latest["asOf"], "limits": nearest_limits(latest, 15), "usage": latest["usage"]["tenant"]}


CAPACITY_FILES = ("index.html", "usage.json", "usage-tenant.csv", "usage-namespace.csv", "forecast.json")


@router.get("/capacity", response_class=HTMLResponse)
def capacity_page(
    request: Request, user: Reader, store: ConsoleStore, report: str | None = None
) -> HTMLResponse:
    """Every capacity report the store holds (a day's, a backfill's), newest first, one of them shown (the newest
    unless ``report`` names another); before the first, what writes one."""
    from housekeeping.observe.capacity.report import list_reports

    reports = list_reports(store)
    chosen = (
        next((r for r in reports if r["dir"] == report), None)
        if report
        else (reports[0] if reports else None)
    )
    if report and chosen is None:
        from housekeeping.core.errors import NotFound

        raise NotFound(
            f"no capacity report {report!r} (the reports: {', '.join(r['dir'] for r in reports[:5])} ...)"
        )
    return render("capacity.html", request, user, reports=reports, chosen=chosen)


@router.get("/capacity/{report}/{name}")
def capacity_report_file(user: Reader, store: ConsoleStore, report: str, name: str) -> FileResponse:
    """A file of one capacity report (its page, JSON and CSV), by the report's directory."""
    from housekeeping.core.errors import NotFound
    from housekeeping.observe.capacity.report import REPORT_DIR, list_reports

    if name not in CAPACITY_FILES or report not in {r["dir"] for r in list_reports(store)}:
        raise NotFound(f"no capacity report file {report}/{name}")
    return FileResponse(store.root / REPORT_DIR / report / name)


@router.get("/capacity/{name}")
def capacity_file(user: Reader, store: ConsoleStore, name: str) -> FileResponse:
    """A file of the newest capacity report (its page, JSON and CSV); no other name is served."""
    from housekeeping.core.errors import NotFound
    from housekeeping.observe.capacity.report import REPORT_DIR, read_latest

    if name not in CAPACITY_FILES:
        raise NotFound(f"{name!r} is not a file of the capacity report ({', '.join(CAPACITY_FILES)})")
    latest = read_latest(store)
    if latest is None:
        raise NotFound("no capacity report yet: the capacity_report DAG writes one daily")
    return FileResponse(store.root / REPORT_DIR / latest["dir"] / name)


@router.get("/namespaces/{tenant}/{namespace}", response_class=HTMLResponse)
def namespace_page(
    request: Request,
    user: Reader,
    store: ConsoleStore,
    tenant: str,
    namespace: str,
    search: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> HTMLResponse:
    from housekeeping.observe.browse import namespace_view

    view = namespace_view(store, f"{tenant}/{namespace}", search=search or None, offset=offset, limit=100)
    return render("namespace.html", request, user, view=view, search=search or "")


@router.get("/topics/{tenant}/{namespace}/{topic}", response_class=HTMLResponse)
def topic_page(
    request: Request, user: Reader, store: ConsoleStore, tenant: str, namespace: str, topic: str
) -> HTMLResponse:
    from housekeeping.observe.browse import topic_view

    view = topic_view(store, f"persistent://{tenant}/{namespace}/{topic}")
    return render("topic.html", request, user, view=view)


@router.get("/runs", response_class=HTMLResponse)
def runs_page(
    request: Request,
    user: Reader,
    store: ConsoleStore,
    session: SessionDep,
    mechanism: str | None = None,
    state: str | None = None,
) -> HTMLResponse:
    """Every run of every housekeeping DAG with its state (refused and failed ones with why) and the command
    line's runs."""
    from housekeeping.console.next_run import next_slot
    from housekeeping.console.runs import RunsQuery, run_rows
    from housekeeping.core.errors import InputError
    from housekeeping.mechanisms.registry import get_mechanism, mechanism_names

    try:
        wanted = RunState(state) if state else None
    except ValueError:
        raise InputError(f"state {state!r} is not one of {', '.join(RunState)}") from None
    rows = run_rows(store, session, RunsQuery(mechanism or None, wanted, 200))
    upcoming = next_slot(get_mechanism(mechanism).dag_id) if mechanism else None
    return render(
        "runs.html", request, user, runs=rows, mechanisms=mechanism_names(), mechanism=mechanism or "",
        states=list(RunState), state=state or "", upcoming=upcoming,
    )  # fmt: skip


@router.get("/runs/{mechanism}/{run_id}", response_class=HTMLResponse)
def run_page(
    request: Request,
    user: Reader,
    store: ConsoleStore,
    mechanism: str,
    run_id: str,
    topic: str | None = None,
    kind: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> HTMLResponse:
    """A run: its plan per namespace, the actions (paged, by topic and kind) with their reasons, why the rest was
    kept (the report), the gate's expectations, the approval, what purge was to remove and what apply and purge did,
    and links to the Airflow task logs."""
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.observe.console import run_actions, run_detail

    detail = run_detail(store, mechanism, run_id)
    spec = get_mechanism(mechanism)
    actions = run_actions(store, mechanism, run_id, topic=topic or None, kind=kind or None, offset=offset)
    from housekeeping.observe.console import pending_deletions

    report = store.run_dir(mechanism, run_id) / "report" / "report.md"
    pending = [p for p in pending_deletions(store, run=detail["runId"]) if p["restorable"]]
    airflow_run = (
        detail["runId"].removeprefix(f"{spec.dag_id}__")
        if detail["runId"].startswith(f"{spec.dag_id}__")
        else None
    )
    return render(
        "run.html",
        request,
        user,
        run=detail,
        spec=spec,
        actions=actions,
        topic=topic or "",
        kind=kind or "",
        report=markdown_html(report.read_text(encoding="utf-8")) if report.is_file() else None,
        airflow_run=airflow_run,
        pending=pending,
    )


@router.get("/dag-runs/{dag_id}/{run_id}", response_class=HTMLResponse)
def dag_run_page(
    request: Request, user: Reader, store: ConsoleStore, dag_id: str, run_id: str
) -> HTMLResponse:
    """The view on a DAG run in the Airflow UI: the housekeeping run it made, if it is a housekeeping DAG's."""
    from housekeeping.mechanisms.registry import MECHANISMS

    spec = next((m for m in MECHANISMS.values() if m.dag_id == dag_id), None)
    if spec is None:
        return render("message.html", request, user, title="Not a housekeeping DAG",
                       message=f"{dag_id} is not a housekeeping DAG: nothing of the store to show.")  # fmt: skip
    directory = store.run_dir(spec.name, f"{dag_id}__{run_id}").name
    if not (store.run_dir(spec.name, f"{dag_id}__{run_id}") / "snapshot" / "run.json").is_file():
        from housekeeping.engine.documents import read_step_failures

        failures = read_step_failures(store.run_dir(spec.name, f"{dag_id}__{run_id}"))
        if failures:
            failure = failures[-1]
            return render("message.html", request, user,
                          title=f"{'Refused' if failure.refused else 'Failed'} before its snapshot",
                          message=f"{dag_id} run {run_id}: {failure.step}: {failure.message}")  # fmt: skip
        return render("message.html", request, user, title="No run directory yet",
                       message=f"{dag_id} run {run_id} has not taken its snapshot (yet).")  # fmt: skip
    return run_page(request, user, store, spec.name, directory, topic=None, kind=None, offset=0)


@router.get("/runs/{mechanism}/{run_id}/files/{relative:path}")
def run_file(user: Reader, store: ConsoleStore, mechanism: str, run_id: str, relative: str) -> FileResponse:
    """A file of the run's report or Great Expectations Data Docs, only from inside the run directory."""
    from housekeeping.observe.console import run_file as resolve

    return FileResponse(resolve(store, mechanism, run_id, relative))


@router.get("/pending", response_class=HTMLResponse)
def pending_page(
    request: Request,
    user: Reader,
    store: ConsoleStore,
    topic: str | None = None,
    namespace: str | None = None,
    run: str | None = None,
) -> HTMLResponse:
    from housekeeping.observe.console import pending_deletions

    rows = pending_deletions(store, topic=topic or None, namespace=namespace or None, run=run or None)
    return render(
        "pending.html", request, user, rows=rows, topic=topic or "", namespace=namespace or "", run=run or "",
        restorable=[r for r in rows if r["restorable"]],
    )  # fmt: skip


@router.get("/holds", response_class=HTMLResponse)
def holds_page(request: Request, user: Reader, store: ConsoleStore) -> HTMLResponse:
    from housekeeping.store.holds import list_holds

    return render("holds.html", request, user, holds=list_holds(store))


@router.get("/journal", response_class=HTMLResponse)
def journal_page(
    request: Request, user: Reader, store: ConsoleStore, where: Annotated[JournalFilter, Depends()]
) -> HTMLResponse:
    from housekeeping.observe.console import journal

    entries = journal(store, where, limit=300)
    return render("journal.html", request, user, entries=entries, filters=where.as_dict())
