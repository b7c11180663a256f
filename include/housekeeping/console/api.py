"""The console's JSON API, ``/housekeeping/api/v1`` (a public interface: docs/console.md). Reads need read access to
the housekeeping DAGs, changes edit access; a change is journaled with the Airflow user. Bad input is a 4xx naming
what is wrong (400; 404 for a run or file that does not exist) and changes nothing."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated, Any, Literal

from airflow.api_fastapi.common.db.common import SessionDep
from fastapi import APIRouter, Body, Depends, Query
from pydantic import BaseModel, Field

from housekeeping.console.access import Editor, Reader, actor_of
from housekeeping.console.runs import MAX_RUNS
from housekeeping.console.store import ConsoleSettings, ConsoleStore
from housekeeping.core.timeutil import wall_clock_ms
from housekeeping.observe.journal_view import JournalFilter
from housekeeping.observe.run_states import RunState

if TYPE_CHECKING:
    from housekeeping.store.store import Store

router = APIRouter(prefix="/api/v1")


class RestoreBody(BaseModel):
    """One topic's deletions (or one ledger of it), or every deletion of one run still pending."""

    topic: str | None = Field(default=None, description="persistent://tenant/namespace/topic")
    ledgerId: int | None = Field(
        default=None, ge=0, description="only this ledger (default: all of the topic)"
    )
    runId: str | None = Field(
        default=None, description="every deletion of this run still waiting for purge (as GET runs names it)"
    )


class ApprovalBody(BaseModel):
    """A person's answer to a housekeeping run waiting for approval (its DAG's approval step)."""

    dagId: str = Field(min_length=1, max_length=250)
    dagRunId: str = Field(min_length=1, max_length=250)
    decision: Literal["approve", "reject"]


class CursorResetBody(BaseModel):
    """``pulsar-admin topics reset-cursor``: to a position or a publish time, one of the two."""

    topic: str = Field(min_length=1, description="persistent://tenant/namespace/topic")
    subscription: str = Field(min_length=1, max_length=500)
    messageId: str | None = Field(default=None, description="ledgerId:entryId, the next message read")
    time: str | None = Field(
        default=None,
        description="an ISO 8601 time, or a time back from now (10m, 3h, 2d): the next message read is the "
        "first published at or after it",
    )


class HoldBody(BaseModel):
    target: str = Field(description="tenant/namespace or persistent://tenant/namespace/topic")
    reason: str = Field(min_length=1, max_length=2000)


@router.get("/namespaces")
def get_namespaces(user: Reader, store: ConsoleStore, settings: ConsoleSettings) -> dict[str, Any]:
    from housekeeping.observe.console import namespaces

    return {
        "asOf": wall_clock_ms(),
        "namespaces": namespaces(store, wall_clock_ms(), settings.deletion_lag_objectives),
    }


@router.get("/namespaces/{tenant}/{namespace}")
def get_namespace(
    user: Reader,
    store: ConsoleStore,
    tenant: str,
    namespace: str,
    search: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """One namespace: its policies in force and their sources, a page of its topics (ledgers, subscriptions), the
    holds on it, the runs that touched it."""
    from housekeeping.observe.browse import namespace_view

    return namespace_view(store, f"{tenant}/{namespace}", search=search or None, offset=offset, limit=limit)


@router.get("/topics/{tenant}/{namespace}/{topic}")
def get_topic(user: Reader, store: ConsoleStore, tenant: str, namespace: str, topic: str) -> dict[str, Any]:
    """One topic (``persistent://tenant/namespace/topic``): its ledgers with their times, tier and pending deletions,
    its subscriptions, the policies in force and their sources, the holds covering it, the runs that touched it."""
    from housekeeping.observe.browse import topic_view

    return topic_view(store, f"persistent://{tenant}/{namespace}/{topic}")


@router.get("/pending-deletions")
def get_pending_deletions(
    user: Reader,
    store: ConsoleStore,
    topic: str | None = None,
    namespace: str | None = None,
    run: str | None = None,
) -> dict[str, Any]:
    from housekeeping.observe.console import pending_deletions

    return {"pendingDeletions": pending_deletions(store, topic=topic, namespace=namespace, run=run or None)}


@router.post("/restore")
def post_restore(user: Editor, store: ConsoleStore, body: Annotated[RestoreBody, Body()]) -> dict[str, Any]:
    from housekeeping.core.errors import InputError
    from housekeeping.engine.restore import restore, restore_run
    from housekeeping.observe.console import check_run_name, check_topic

    if (body.topic is None) == (body.runId is None):
        raise InputError("restore takes a topic (and optionally its ledgerId) or a runId, one of the two")
    facts = {
        "as_of_ms": wall_clock_ms(),  # a person's action: its time is when it was done
        "run_id": f"console-restore-{uuid.uuid4().hex[:8]}",
        "actor": actor_of(user),
    }
    if body.runId is not None:
        if body.ledgerId is not None:
            raise InputError("ledgerId restores one ledger of a topic: give the topic, not a runId")
        done = restore_run(store, check_run_name(body.runId), **facts)
        count = sum(len(ledgers) for ledgers in done["restored"].values())
        summary = f"restored {count} ledgers of {len(done['restored'])} topics deleted by {body.runId}"
        if done["failed"]:
            summary += f"; {len(done['failed'])} could not be restored (see failed)"
        return {"runId": body.runId, **done, "summary": summary}
    topic = check_topic(body.topic)
    restored = restore(store, topic, ledger_id=body.ledgerId, **facts)
    return {
        "topic": topic,
        "restoredLedgers": restored,
        "summary": f"restored {len(restored)} ledgers of {topic}",
    }


@router.post("/approvals")
def post_approval(user: Editor, session: SessionDep, body: Annotated[ApprovalBody, Body()]) -> dict[str, Any]:
    """Approve or reject a run waiting at its approval step, as Airflow's Required Actions page does (the same
    Airflow code answers; the approval step then journals who decided)."""
    from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
    from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    from housekeeping.core.errors import InputError
    from housekeeping.mechanisms.registry import MECHANISMS

    spec = next((m for m in MECHANISMS.values() if m.dag_id == body.dagId), None)
    if spec is None:
        raise InputError(f"dagId {body.dagId!r} is not a housekeeping DAG with an approval step")
    option = ApprovalOperator.APPROVE if body.decision == "approve" else ApprovalOperator.REJECT
    update_hitl_detail(
        dag_id=spec.dag_id,
        dag_run_id=body.dagRunId,
        task_id=spec.task_ids.approve,
        update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=[option]),
        user=user,
        session=session,
    )
    what = "approved: apply runs" if body.decision == "approve" else "rejected: nothing is applied"
    return {**body.model_dump(), "summary": f"{spec.dag_id} run {body.dagRunId} {what}"}


PoliciesDocument = Annotated[
    dict[str, Any],
    Body(
        description="the level's own policies, whole, under the manifest's (Pulsar's) names: retention_policies, "
        "message_ttl_in_seconds, backlog_quota_map, ...; a policy left out is removed (the level below applies)"
    ),
]


def _policies(store: Store, target: str) -> dict[str, Any]:
    from housekeeping.store.admin import policies_of

    return policies_of(store, target)


def _put_policies(store: Store, user: Any, target: str, wanted: dict[str, Any]) -> dict[str, Any]:
    """Replace the level's own policies with ``wanted``: each policy that differs set, each left out removed,
    checked as a manifest's are before anything is written and journaled with the user; nothing written or
    journaled when nothing differs."""
    from housekeeping.store.admin import policies_of, set_policies

    own = policies_of(store, target)["policies"]
    changes = {k: wanted.get(k) for k in sorted(set(own) | set(wanted)) if own.get(k) != wanted.get(k)}
    if not changes:
        return {"target": target, "changes": {}, "policies": own, "summary": f"{target}: unchanged"}
    done = set_policies(store, target, changes, now_ms=wall_clock_ms(), actor=actor_of(user))
    return {**done, "summary": f"{done['scope']} {target}: changed {', '.join(done['changes'])}"}


@router.get("/policies/{tenant}/{namespace}")
def get_namespace_policies(user: Reader, store: ConsoleStore, tenant: str, namespace: str) -> dict[str, Any]:
    """A namespace's own policies as stored (``housekeeping namespaces policies``)."""
    return _policies(store, f"{tenant}/{namespace}")


@router.put("/policies/{tenant}/{namespace}")
def put_namespace_policies(
    user: Editor, store: ConsoleStore, tenant: str, namespace: str, body: PoliciesDocument
) -> dict[str, Any]:
    """Replace a namespace's own policies (the command line's ``namespaces set-*`` / ``remove-*``)."""
    return _put_policies(store, user, f"{tenant}/{namespace}", body)


@router.get("/policies/{tenant}/{namespace}/{topic}")
def get_topic_policies(
    user: Reader, store: ConsoleStore, tenant: str, namespace: str, topic: str
) -> dict[str, Any]:
    """A topic's own policies as stored and the ones in force (``housekeeping topic-policies get``)."""
    return _policies(store, f"persistent://{tenant}/{namespace}/{topic}")


@router.put("/policies/{tenant}/{namespace}/{topic}")
def put_topic_policies(
    user: Editor, store: ConsoleStore, tenant: str, namespace: str, topic: str, body: PoliciesDocument
) -> dict[str, Any]:
    """Replace a topic's own policies (the command line's ``topic-policies set-*`` / ``remove-*``)."""
    return _put_policies(store, user, f"persistent://{tenant}/{namespace}/{topic}", body)


@router.post("/cursors/reset")
def post_cursor_reset(
    user: Editor, store: ConsoleStore, body: Annotated[CursorResetBody, Body()]
) -> dict[str, Any]:
    """Move a subscription's cursor backward or forward, journaled with the user (``admin`` / ``reset-cursor``)."""
    from housekeeping.core.admin_units import parse_seconds
    from housekeeping.core.errors import InputError
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.observe.console import check_topic
    from housekeeping.store.admin import reset_cursor

    topic = check_topic(body.topic)
    if (body.messageId is None) == (body.time is None):
        raise InputError(
            f"topic {topic} subscription {body.subscription!r}: give messageId or time, one of them"
        )
    now = wall_clock_ms()
    time_ms = None
    if body.time is not None:
        back = None if "T" in body.time else parse_seconds(body.time, "time")
        if back is not None and back < 0:
            raise InputError(f"time {body.time!r}: a time back from now (10m, 3h, 2d) or an ISO 8601 time")
        time_ms = parse_as_of(body.time) if back is None else now - back * 1000
    done = reset_cursor(
        store,
        topic,
        body.subscription,
        position=body.messageId,
        time_ms=time_ms,
        now_ms=now,
        actor=actor_of(user),
    )
    return {
        **done,
        "summary": f"{topic} subscription {body.subscription!r}: cursor moved {done['direction']} from "
        f"{done['from']} to {done['to']}",
    }


@router.get("/holds")
def get_holds(user: Reader, store: ConsoleStore) -> dict[str, Any]:
    from housekeeping.store.holds import list_holds

    return {"holds": list_holds(store)}


@router.post("/holds", status_code=201)
def post_hold(user: Editor, store: ConsoleStore, body: Annotated[HoldBody, Body()]) -> dict[str, Any]:
    from housekeeping.store.holds import place_hold

    hold = place_hold(store, body.target, reason=body.reason, actor=actor_of(user)).to_json()
    return {
        **hold,
        "summary": f"held {hold['target']}: nothing there is deleted or purged until it is removed",
    }


@router.delete("/holds")
def delete_hold(
    user: Editor, store: ConsoleStore, target: Annotated[str, Query(min_length=1)]
) -> dict[str, Any]:
    from housekeeping.store.holds import lift_hold

    hold = lift_hold(store, target, actor=actor_of(user)).to_json()
    return {**hold, "summary": f"removed the hold on {hold['target']}"}


@router.get("/journal")
def get_journal(
    user: Reader,
    store: ConsoleStore,
    where: Annotated[JournalFilter, Depends()],
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> dict[str, Any]:
    from housekeeping.observe.console import journal

    return {"journal": journal(store, where, limit=limit)}


@router.get("/runs")
def get_runs(
    user: Reader,
    store: ConsoleStore,
    session: SessionDep,
    mechanism: str | None = None,
    state: RunState | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 100,
) -> dict[str, Any]:
    """Every run of every housekeeping DAG Airflow knows (refused and failed ones too) and the command line's runs,
    newest first, each with its state and, when it did not do its work, why."""
    from housekeeping.console.runs import RunsQuery, run_rows

    return {"runs": run_rows(store, session, RunsQuery(mechanism or None, state, limit))}


@router.get("/runs/{mechanism}/{run_id}")
def get_run(user: Reader, store: ConsoleStore, mechanism: str, run_id: str) -> dict[str, Any]:
    from housekeeping.observe.console import run_detail

    return run_detail(store, mechanism, run_id)


@router.get("/runs/{mechanism}/{run_id}/actions")
def get_run_actions(
    user: Reader,
    store: ConsoleStore,
    mechanism: str,
    run_id: str,
    topic: str | None = None,
    kind: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    from housekeeping.observe.console import run_actions

    return run_actions(store, mechanism, run_id, topic=topic, kind=kind, offset=offset, limit=limit)


@router.get("/forecast")
def get_forecast(
    user: Reader,
    store: ConsoleStore,
    settings: ConsoleSettings,
    as_of: str | None = None,
    horizon: str = "30d",
    window: str = "28d",
    backtest: str = "7d",
) -> dict[str, Any]:
    """``housekeeping forecast`` at ``as_of`` (default: now), computed from the record as it stands."""
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.observe.capacity.forecast import ForecastOptions, forecast, kept_cursors
    from housekeeping.observe.capacity.record import read_record

    options = ForecastOptions.parse(horizon, window, backtest, name=lambda option: option)
    record = read_record(store, parse_as_of(as_of) if as_of else wall_clock_ms())
    return forecast(
        record,
        horizon_s=options.horizon_s,
        window_days=options.window_days,
        backtest_days=options.backtest_days,
        budgets=settings.capacity_budgets,
        cursor_history=kept_cursors(store),
    )


@router.get("/usage")
def get_usage(
    user: Reader,
    store: ConsoleStore,
    from_: Annotated[str, Query(alias="from")],
    to: str,
    by: str = "namespace",
    tier: str | None = None,
    tenant: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """``housekeeping usage`` over ``[from, to)``, from the record as of ``to``."""
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.observe.capacity.record import read_record
    from housekeeping.observe.capacity.usage import usage

    from_ms, to_ms = parse_as_of(from_), parse_as_of(to)
    record = read_record(store, to_ms)
    return usage(record, from_ms=from_ms, to_ms=to_ms, by=by, tier=tier, tenant=tenant, namespace=namespace)


@router.get("/capacity-report")
def get_capacity_report(user: Reader, store: ConsoleStore) -> dict[str, Any]:
    """The newest capacity report's as-of, usage and forecast (404 before the capacity_report DAG wrote one)."""
    from housekeeping.core.errors import NotFound
    from housekeeping.observe.capacity.report import read_latest

    latest = read_latest(store)
    if latest is None:
        raise NotFound("no capacity report yet: the capacity_report DAG writes one daily")
    return {"asOf": latest["asOf"], "usage": latest["usage"], "forecast": latest["forecast"]}
