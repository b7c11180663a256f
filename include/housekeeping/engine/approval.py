"""A person's approval before an unusual deletion.

After the gate passes, a plan is measured against the approval thresholds (``HOUSEKEEPING_APPROVAL_*`` settings,
tightened by a run's params): bytes it deletes, the largest share of one namespace's stored bytes it deletes,
topics it deletes, cursors it moves. Under every threshold it proceeds as before. Over one, the DAG's approval
step asks in Airflow's human-in-the-loop UI (Required Actions), showing :func:`request_markdown`; apply runs only
on "Approve". "Reject", or no answer within ``HOUSEKEEPING_APPROVAL_TIMEOUT_SECONDS``, applies nothing and the run
ends without error. The decision (who, when, which thresholds) is journaled and written to the run directory,
and the report shows it.

This module is the rules and the record (no Airflow); ``housekeeping.orchestration.approval_operator`` is the DAG step.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from housekeeping.engine.actions import Changes, PlanView
from housekeeping.engine.contract import ACTIONS, NAMESPACES
from housekeeping.engine.documents import (
    ApprovalDecision,
    ApprovalRequest,
    read_document,
    read_run_info,
    write_document,
)
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import table_batches
from housekeeping.engine.purge import due_for_purge, record_purge_due
from housekeeping.engine.report import human_bytes, sparse_batch_rows
from housekeeping.engine.run_dir import RunDir, write_json
from housekeeping.engine.snapshot_reads import read_snapshot_table
from housekeeping.store.journal import journal
from housekeeping.store.store import Store, write_transaction

APPROVED, REJECTED, TIMED_OUT = "approved", "rejected", "timed_out"


@dataclass(frozen=True)
class ApprovalThresholds:
    """None: no threshold. A plan *over* a threshold (strictly greater) needs approval."""

    bytes: int | None = None
    namespace_share: float | None = None
    topics: int | None = None
    cursors: int | None = None
    # The first apply of the mechanism on the store that would change anything asks a person.
    first_apply: bool = False

    @classmethod
    def of(cls, settings: Any, params: dict[str, Any] | None = None) -> ApprovalThresholds:
        """The deployment's thresholds (settings), tightened by a run's params: a param may only lower a
        threshold (or set one the settings leave unset), so a manual run can ask for review, never skip it."""
        params = params or {}

        def pick(setting: Any, param: Any) -> Any:
            if param is None:
                return setting
            return param if setting is None else min(setting, param)

        return cls(
            bytes=pick(settings.approval_bytes, params.get("approval_bytes")),
            namespace_share=pick(settings.approval_namespace_share, params.get("approval_namespace_share")),
            topics=pick(settings.approval_topics, params.get("approval_topics")),
            cursors=pick(settings.approval_cursors, params.get("approval_cursors")),
            first_apply=bool(getattr(settings, "approval_first_apply", False)),
        )


@dataclass(frozen=True)
class PlanMeasures:
    bytes: int
    namespace_bytes: dict[str, int]
    namespace_share: dict[str, float]
    topics: int
    cursors: int
    ledgers: int
    # Local copies of data kept in the object tier (tiered storage): counted apart, never among deleted bytes
    # (no threshold applies to them: the data stays readable).
    local_copy_bytes: int = 0
    local_copies: int = 0


def measure_plan(run_dir: str | Path, spec: Mechanism) -> PlanMeasures:
    """What the run's (checked) plan would delete and move, each action measured by its kind
    (``ActionKind.effect``: the bytes it frees if it deletes data, the topics it deletes, the cursors it moves),
    and the snapshot's namespace sizes."""
    run = RunDir(run_dir)
    stored = {row["namespace"]: row["storedBytes"] for row in read_snapshot_table(run, NAMESPACES)}
    view = PlanView(run)
    per_namespace: dict[str, int] = defaultdict(int)
    topics = cursors = ledgers = local_copy = local_copies = 0
    # Streamed a batch at a time, not one list of dicts (1.8 million actions at a million topics).
    for row in sparse_batch_rows(table_batches(run.path, ACTIONS)):
        kind = spec.action(row["action"], where=f"plan in {run}")
        effect = kind.effect(row, view)
        if effect is None:
            continue
        if kind.deletes_data:
            per_namespace[effect.namespace] += effect.freed
        ledgers += effect.ledgers
        topics += effect.topics if kind.changes is Changes.TOPICS else 0
        cursors += effect.cursors
        local_copy += effect.local_copy
        local_copies += effect.local_copy > 0
    shares = {ns: (b / stored[ns] if stored.get(ns) else 0.0) for ns, b in per_namespace.items()}
    return PlanMeasures(
        bytes=sum(per_namespace.values()),
        namespace_bytes=dict(sorted(per_namespace.items())),
        namespace_share=dict(sorted(shares.items())),
        topics=topics,
        cursors=cursors,
        ledgers=ledgers,
        local_copy_bytes=local_copy,
        local_copies=local_copies,
    )


def over_thresholds(measures: PlanMeasures, thresholds: ApprovalThresholds) -> list[str]:
    """Why the plan needs approval (empty: it does not), one sentence per threshold it is over."""
    reasons = []
    if thresholds.bytes is not None and measures.bytes > thresholds.bytes:
        reasons.append(
            f"deletes {human_bytes(measures.bytes)} ({measures.bytes} bytes), over the threshold of "
            f"{human_bytes(thresholds.bytes)}"
        )
    if thresholds.namespace_share is not None:
        for namespace, share in measures.namespace_share.items():
            if share > thresholds.namespace_share:
                reasons.append(
                    f"deletes {share:.1%} of {namespace}'s stored bytes, over the threshold of "
                    f"{thresholds.namespace_share:.1%}"
                )
    if thresholds.topics is not None and measures.topics > thresholds.topics:
        reasons.append(f"deletes {measures.topics} topics, over the threshold of {thresholds.topics}")
    if thresholds.cursors is not None and measures.cursors > thresholds.cursors:
        reasons.append(f"moves {measures.cursors} cursors, over the threshold of {thresholds.cursors}")
    return reasons


def preview_purge(store: Store, run_dir: str | Path, *, dry_run: bool) -> dict[str, Any]:
    """What the run's purge is about to remove (``engine.purge.due_for_purge`` at the run's as-of), written to
    ``approval/purge-due.json`` before apply and, unless a dry run, journaled topic by topic."""
    run = RunDir(run_dir)
    info = read_run_info(run)
    due = due_for_purge(store, int(info.as_of_ms))
    write_json(run.purge_due, due)
    if not dry_run:
        record_purge_due(store, due, run_id=info.run_id, as_of_ms=int(info.as_of_ms), actor=info.actor)
    return due


def first_apply_reasons(
    measures: PlanMeasures, thresholds: ApprovalThresholds, mechanism: str, applied_before: bool
) -> list[str]:
    """Why a first apply needs approval: the setting asks for it, the mechanism never finished an apply on this
    store, and this plan would change something (an empty first plan asks nobody)."""
    changes = (
        measures.ledgers or measures.topics or measures.cursors or measures.bytes or measures.local_copies
    )
    if not thresholds.first_apply or applied_before or not changes:
        return []
    return [
        f"the first {mechanism} apply on this store (HOUSEKEEPING_APPROVAL_FIRST_APPLY): a person looks at what it "
        "will do before it first deletes or moves anything"
    ]


def purge_over_thresholds(due: dict[str, Any], thresholds: ApprovalThresholds) -> list[str]:
    """Why the purge needs approval: it removes more bytes than the bytes threshold."""
    if thresholds.bytes is not None and due["bytes"] > thresholds.bytes:
        return [
            f"its purge removes {human_bytes(due['bytes'])} ({due['files']} files of {due['topics']} topics past "
            f"their grace period), over the threshold of {human_bytes(thresholds.bytes)}"
        ]
    return []


def request_approval(
    run_dir: str | Path,
    spec: Mechanism,
    thresholds: ApprovalThresholds,
    purge_due: dict[str, Any] | None = None,
    *,
    applied_before: bool = True,
) -> ApprovalRequest:
    """Measure the plan (and, given, what its purge removes), write ``approval/request.json`` (and ``request.md``
    when approval is needed); returns the request (``required`` False: proceed). ``applied_before``: whether the
    mechanism finished an apply on this store before (``store.journal.has_finished_apply``)."""
    run = RunDir(run_dir)
    info = read_run_info(run)
    measures = measure_plan(run, spec)
    reasons = (
        first_apply_reasons(measures, thresholds, info.mechanism, applied_before)
        + over_thresholds(measures, thresholds)
        + purge_over_thresholds(purge_due or {"bytes": 0, "files": 0, "topics": 0}, thresholds)
    )
    request = ApprovalRequest(
        run_id=info.run_id,
        mechanism=info.mechanism,
        as_of=info.as_of,
        required=bool(reasons),
        reasons=tuple(reasons),
        thresholds=asdict(thresholds),
        measures=asdict(measures),
        purge={k: int((purge_due or {}).get(k, 0)) for k in ("files", "bytes", "topics")},
        data_docs=str(run.data_docs_index) if run.data_docs_index.is_file() else None,
        plan_summary=str(run.plan_summary),
        request_page=str(run.approval_request_md) if reasons else None,
    )
    write_document(run.approval_request, request)
    if reasons:
        run.approval_request_md.write_text(request_markdown(request), encoding="utf-8")
    return request


def request_markdown(request: ApprovalRequest, console: str | None = None) -> str:
    """What the person sees in Airflow's Required Actions (and ``approval/request.md``). ``console``: the
    console's URL path (``/housekeeping``); the gate report, the plan and the run are then links to it, else the
    files' paths on the server."""
    m = request.measures
    if console is not None:
        run = (
            f"{console.rstrip('/')}/runs/{request.mechanism}/{Path(request.plan_summary).parent.parent.name}"
        )
        where = [
            f"[The run in the housekeeping console]({run}): its plan per namespace, every action with its reason, "
            f"the gate's expectations. [Gate report (Great Expectations Data Docs)]({run}/files/gate/data_docs/"
            f"index.html), [plan summary]({run}/files/plan/summary.json).",
        ]
    else:
        where = [
            f"Gate report (Great Expectations Data Docs): `{request.data_docs}`  ",
            f"Plan summary: `{request.plan_summary}`",
        ]
    lines = [
        f"**{request.mechanism}** run `{request.run_id}` as of {request.as_of} passed the gate and is over "
        "the approval thresholds:",
        "",
        *[f"- {reason}" for reason in request.reasons],
        "",
        f"Plan: {m['ledgers']} ledgers and {m['topics']} topics deleted ({human_bytes(m['bytes'])}), "
        f"{m['cursors']} cursors moved.",
        *(
            [
                f"Apart from that: {m['local_copies']} local copies of offloaded ledgers deleted "
                f"({human_bytes(m['local_copy_bytes'])}); their data stays in the object tier.",
            ]
            if m.get("local_copies")
            else []
        ),
        *(
            [
                f"Purge after apply: {request.purge['files']} files of {request.purge['topics']} topics "
                f"({human_bytes(request.purge['bytes'])}) whose grace period has passed, listed in "
                "`approval/purge-due.json`; purged files cannot be restored."
            ]
            if request.purge.get("files")
            else []
        ),
        "",
        "| namespace | bytes deleted | share of its stored bytes |",
        "|---|---:|---:|",
        *[
            f"| {ns} | {human_bytes(b)} | {m['namespace_share'][ns]:.1%} |"
            for ns, b in m["namespace_bytes"].items()
        ],
        "",
        *where,
        "",
        "**Approve** applies the plan (deleted ledgers stay restorable until purge). **Reject** applies nothing; "
        "the run ends and the next run plans again. No answer in time counts as Reject.",
    ]
    return "\n".join(lines) + "\n"


def record_decision(
    store: Store, run_dir: str | Path, *, approved: bool, decided_by: str | None, decided_at_ms: int
) -> ApprovalDecision:
    """Journal the decision (in the store, with the run) and write ``approval/decision.json``. ``decided_by``
    None: nobody answered before the timeout (rejected)."""
    run = RunDir(run_dir)
    info = read_run_info(run)
    request = read_document(ApprovalRequest, run.approval_request)
    status = APPROVED if approved else (REJECTED if decided_by is not None else TIMED_OUT)
    decision = ApprovalDecision(
        run_id=info.run_id,
        mechanism=info.mechanism,
        decision=status,
        decided_by=decided_by or "nobody (timed out)",
        decided_at_ms=decided_at_ms,
        reasons=request.reasons if request is not None else (),
    )
    with write_transaction(store.engine) as conn:
        journal(
            conn,
            run_id=info.run_id,
            mechanism=info.mechanism,
            topic=None,
            action="approval",
            status=status,
            detail=decision.as_json(),
            as_of_ms=info.as_of_ms,
            actor=decided_by or "approval timeout",
        )
    write_document(run.approval_decision, decision)
    return decision
