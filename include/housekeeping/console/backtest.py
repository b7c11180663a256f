"""The console's policy backtest (docs/semantics.md §12.5): what a policy change would have done since a date, over
the store's own history, beside the what-if's "what would it do now". It reads the store and changes nothing, so
a viewer may ask; bad input (a policy document that is not JSON or names what the store lacks, a period the record
cannot answer) is a 400 naming it on the API and a message on the page."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from housekeeping.console.access import Reader
from housekeeping.console.pages import render
from housekeeping.console.store import ConsoleStore
from housekeeping.core.errors import HousekeepingError, InputError
from housekeeping.core.timeutil import wall_clock_ms
from housekeeping.store.store import Store

router = APIRouter()
DEFAULT_DAYS = 7


def run_backtest(store: Store, policies: str, from_: str, to: str | None, now_ms: int) -> dict[str, Any]:
    """The backtest of ``policies`` (an overlay as JSON text) over ``[from_, to)``; ``to`` empty: ``now_ms`` (the
    console's clock: a default of the form, not a rule)."""
    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.observe.capacity.backtest import backtest_store
    from housekeeping.what_if.overlay import PolicyOverlay

    try:
        document = json.loads(policies)
    except json.JSONDecodeError as exc:
        raise InputError(f"policies: not JSON: {exc}") from None
    overlay = PolicyOverlay.from_document(document, "policies")
    if not (overlay.broker or overlay.namespaces or overlay.topics):
        raise InputError("policies: name at least one namespace's or topic's policies to change")
    try:
        from_ms = parse_as_of(from_)
    except InputError as exc:
        raise InputError(f"from: {exc}") from None
    try:
        to_ms = parse_as_of(to) if to else now_ms
    except InputError as exc:
        raise InputError(f"to: {exc}") from None
    grace_ms = Settings.from_env().purge_grace_seconds * 1000
    return backtest_store(store, overlay, from_ms=from_ms, to_ms=to_ms, purge_grace_ms=grace_ms)


@router.get("/api/v1/backtest")
def get_backtest(
    user: Reader,
    store: ConsoleStore,
    policies: str,
    from_: Annotated[str | None, Query(alias="from")] = None,
    to: str | None = None,
) -> dict[str, Any]:
    """The backtest document (``housekeeping backtest``'s JSON); ``from`` required."""
    if not from_:
        raise InputError("from: required (ISO 8601 with a timezone)")
    return run_backtest(store, policies, from_, to, wall_clock_ms())


@router.get("/backtest", response_class=HTMLResponse)
def backtest_page(request: Request, user: Reader, store: ConsoleStore) -> HTMLResponse:
    """The form, and with ``policies`` and ``from`` given the answer: the rows, the plot, the moved deletions."""
    from housekeeping.core.timeutil import format_ms
    from housekeeping.observe.capacity.report import policy_backtest_chart

    query = request.query_params
    policies, from_, to = query.get("policies", ""), query.get("from", ""), query.get("to", "")
    now = wall_clock_ms()
    asked = {
        "policies": policies,
        "from": from_ or format_ms(now - DEFAULT_DAYS * 86_400_000),
        "to": to,
    }
    result, error, charts = None, None, {}
    if policies and from_:
        try:
            result = run_backtest(store, policies, from_, to or None, now)
            charts = {
                tier: chart for tier in ("listed", "local") if (chart := policy_backtest_chart(result, tier))
            }
        except HousekeepingError as exc:
            error = str(exc)
    response = render("backtest.html", request, user, asked=asked, result=result, error=error, charts=charts)
    if error is not None:
        response.status_code = 400
    return response
