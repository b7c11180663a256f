"""What the housekeeping console shows and its JSON API returns, read from the store (no Spark, no Airflow): the
namespaces' figures, the pending deletions and what restore can bring back, the runs and one run's plan, gate,
approval, apply and purge, and the journal filtered. Every name a caller gives is checked as the CLI checks it (bad
input names it); every path it returns is inside the store's run directories.

The namespaces' figures are the store's metrics (``observe.metrics``), one definition of each measure for
Prometheus, the console and its API."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import select

from housekeeping.core.errors import InputError, NotFound
from housekeeping.core.names import NamespaceName, TopicName
from housekeeping.core.scope import in_scope
from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import ACTIONS
from housekeeping.engine.documents import (
    ApprovalDecision,
    ApprovalRequest,
    Document,
    PlanSummary,
    read_applied_run,
    read_document,
    read_gate_result,
    read_purged_run,
    read_run_info,
)
from housekeeping.engine.plan import table_batches
from housekeeping.engine.report import sparse_batch_rows
from housekeeping.engine.run_dir import RunDir, read_json
from housekeeping.observe.journal_view import JournalFilter, journal_entries
from housekeeping.observe.metrics.exposition import store_metrics
from housekeeping.store import metadata_schema as t
from housekeeping.store.holds import hold_for, load_holds
from housekeeping.store.store import LOCAL_COPY_KIND, ORPHAN_KIND, RUNS_DIR, Store, read_transaction

# A namespace's figure -> (metric family, the tier label it takes or None): the metrics' own measures.
NAMESPACE_FIGURES: dict[str, tuple[str, str | None]] = {
    "storedBytes": ("pulsar_storage_size", None),
    "localBytes": ("housekeeping_storage_tier_size", "local"),
    "tierBytes": ("housekeeping_storage_tier_size", "offloaded"),
    "backlogBytes": ("pulsar_storage_backlog_size", None),
    "backlogAgeSeconds": ("pulsar_storage_backlog_age_seconds", None),
    "topics": ("housekeeping_topics", None),
    "ledgers": ("housekeeping_storage_ledgers", None),
    "entries": ("housekeeping_storage_entries", None),
    "quotaLimitBytes": ("pulsar_storage_backlog_quota_limit", None),
    "quotaLimitSeconds": ("pulsar_storage_backlog_quota_limit_time", None),
    "pendingPurgeBytes": ("housekeeping_pending_purge_bytes", None),
    "deletionLagSeconds": ("housekeeping_deletion_lag_seconds", None),
    "deletionLagObjectiveSeconds": ("housekeeping_deletion_lag_objective_seconds", None),
}
# Kinds of pending deletion restore puts back (a replaced compacted ledger or an abandoned tier object it does not).
RESTORABLE_KINDS = ("ledger", LOCAL_COPY_KIND, ORPHAN_KIND)
RUN_ID = re.compile(r"^[A-Za-z0-9_.+-]{1,300}$")
# A run's id as the journal and the pending deletions record it (an Airflow run id has ':' and '+'); compared, never
# made a path.
RUN_NAME = re.compile(r"^[A-Za-z0-9_.+:@-]{1,500}$")


def check_run_name(run: str) -> str:
    if not RUN_NAME.match(run):
        raise InputError(f"run {run!r} is not a run's id")
    return run


MAX_PAGE = 1000


def check_topic(text: str) -> str:
    return str(TopicName.parse(text))


def check_namespace(text: str) -> str:
    return str(NamespaceName.parse(text))


def namespaces(store: Store, as_of_ms: int, objectives: Mapping[str, int]) -> list[dict[str, Any]]:
    """Per namespace, its figures at ``as_of_ms`` (:data:`NAMESPACE_FIGURES`) and its exceeded backlog quotas."""
    rows: dict[str, dict[str, Any]] = defaultdict(dict)
    families = {
        family.name: family for family in store_metrics(store, as_of_ms=as_of_ms, objectives=objectives)
    }
    for field, (name, tier) in NAMESPACE_FIGURES.items():
        family = families.get(name)
        for labels, value in (family.samples if family else {}).items():
            named = dict(zip(family.labels, labels, strict=True))
            if "namespace" in named and (tier is None or named.get("tier") == tier):
                rows[named["namespace"]][field] = value
    # What the backlog_quota DAG recorded at its last check of each namespace's topics (the console does not judge
    # quotas itself: a backlog over its quota shows here once a run has measured it).
    q = t.backlog_quota_states.c
    with read_transaction(store.engine) as conn:
        states = conn.execute(
            select(t.topics.c.namespace, q.topic, q.quota_type, q.exceeded, q.exceeded_since_ms, q.as_of_ms)
            .join(t.topics, t.topics.c.name == q.topic)
            .order_by(q.topic, q.quota_type)
        ).all()
    quotas: dict[str, list[dict[str, Any]]] = defaultdict(list)
    checked = _backlog_checks(store, set(rows))
    for namespace, topic, quota_type, exceeded, since_ms, checked_ms in states:
        checked[namespace] = max(checked.get(namespace, checked_ms), checked_ms)
        if exceeded:
            since = format_ms(since_ms) if since_ms is not None else None
            quotas[namespace].append({"topic": topic, "quotaType": quota_type, "exceededSince": since})
    result = []
    for namespace in sorted(rows):
        figures = {field: _number(rows[namespace].get(field)) for field in NAMESPACE_FIGURES}
        result.append(
            {
                "namespace": namespace,
                "tenant": namespace.split("/", 1)[0],
                **figures,
                "exceededQuotas": quotas.get(namespace, []),
                "quotasCheckedAsOf": format_ms(checked[namespace]) if namespace in checked else None,
            }
        )
    return result


def _backlog_checks(store: Store, namespaces: set[str]) -> dict[str, int]:
    """Per namespace, the as-of of the newest backlog_quota run that applied over it (its scope read by the scope's
    own rule, a namespace counted when a topic of it is in scope; no scope: every namespace): an evicting quota
    leaves no exceeded state behind, so the run itself is the check."""
    folder = store.root / RUNS_DIR / "backlog"
    run_dirs = (
        (RunDir(p.parent.parent) for p in folder.glob("*/snapshot/run.json")) if folder.is_dir() else ()
    )
    applied = [read_run_info(run) for run in run_dirs if run.apply_result.is_file()]
    checked: dict[str, int] = {}
    topics_of: dict[str, list[str]] | None = None
    for info in sorted(applied, key=lambda info: info.as_of_ms, reverse=True):
        if not info.scope:  # every namespace, and every older run is older everywhere
            for namespace in namespaces:
                checked.setdefault(namespace, info.as_of_ms)
            break
        if topics_of is None:
            topics_of = defaultdict(list)
            with read_transaction(store.engine) as conn:
                for name, namespace in conn.execute(select(t.topics.c.name, t.topics.c.namespace)):
                    topics_of[namespace].append(name)
        for namespace, topics in topics_of.items():
            if namespace not in checked and any(in_scope(topic, info.scope) for topic in topics):
                checked[namespace] = info.as_of_ms
    return checked


def _number(value: float | None) -> int | float | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


def pending_deletions(
    store: Store, *, topic: str | None = None, namespace: str | None = None, run: str | None = None
) -> list[dict[str, Any]]:
    """Every deletion waiting for purge (a ledger, a local copy, a replaced compacted ledger, an orphan; a topic GC
    deleted whole), with its due time, whether a hold keeps it, and whether restore brings it back; of one topic,
    namespace or deleting run."""
    from housekeeping.engine.restore import deleted_by

    run = check_run_name(run) if run is not None else None
    topic = check_topic(topic) if topic else None
    namespace = check_namespace(namespace) if namespace else None
    p, d = t.pending_deletions.c, t.deleted_topics.c
    with read_transaction(store.engine) as conn:
        query = select(t.pending_deletions).where(p.status == "pending")
        deleted = select(t.deleted_topics).where(d.status == "pending")
        if topic:
            query, deleted = query.where(p.topic == topic), deleted.where(d.topic == topic)
        rows = conn.execute(query.order_by(p.purge_after_ms, p.topic, p.ledger_id)).all()
        topics = conn.execute(deleted.order_by(d.topic)).all()
        holds = load_holds(conn)
    if run is not None:
        rows = [row for row in rows if deleted_by(run, row.run_id)]
        topics = [row for row in topics if deleted_by(run, row.run_id)]
    out = []
    for row in rows:
        if namespace and str(TopicName.parse(row.topic).namespace_name) != namespace:
            continue
        hold = hold_for(row.topic, holds)
        out.append(
            {
                "topic": row.topic,
                "ledgerId": row.ledger_id,
                "kind": row.kind,
                "bytes": row.size_bytes,
                "deletedBy": row.run_id,
                "deletedAsOf": format_ms(row.deleted_as_of_ms),
                "dueAt": format_ms(row.purge_after_ms),
                "dueAtMs": row.purge_after_ms,
                "heldBy": hold.target if hold else None,
                "restorable": row.kind in RESTORABLE_KINDS and not row.erased_by,
                "why": "a key erasure replaced it" if row.erased_by else None,
            }
        )
    for row in topics:
        if namespace and str(TopicName.parse(row.topic).namespace_name) != namespace:
            continue
        out.append(
            {
                "topic": row.topic,
                "ledgerId": None,
                "kind": row.kind,
                "bytes": None,
                "deletedBy": row.run_id,
                "deletedAsOf": format_ms(row.deleted_as_of_ms),
                "dueAt": format_ms(row.purge_after_ms),
                "dueAtMs": row.purge_after_ms,
                "heldBy": None,
                "restorable": True,
                "why": "deleted whole by inactive-topic GC: restore brings it back with its ledgers",
            }
        )
    return out


def runs(store: Store, mechanism: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The newest runs (of ``mechanism``, or of every one), newest as-of first: what each decided and did."""
    from housekeeping.mechanisms.registry import get_mechanism, mechanism_names

    names = [get_mechanism(mechanism).name] if mechanism else list(mechanism_names())
    found = []
    for name in names:
        folder = store.root / RUNS_DIR / name
        for run_json in folder.glob("*/snapshot/run.json") if folder.is_dir() else ():
            found.append(run_row(RunDir(run_json.parent.parent)))
    found.sort(key=lambda r: (r["asOfMs"], r["takenAtMs"], r["runId"]), reverse=True)
    return found[: max(1, min(limit, MAX_PAGE))]


def run_row(run: RunDir) -> dict[str, Any]:
    info = read_run_info(run)
    gate = read_gate_result(run)
    decision = read_document(ApprovalDecision, run.approval_decision)
    applied = read_applied_run(run)
    return {
        "mechanism": info.mechanism,
        "runId": info.run_id,
        "directory": run.path.name,
        "asOf": info.as_of,
        "asOfMs": info.as_of_ms,
        "takenAtMs": info.taken_at_wall_clock_ms or 0,
        "actor": info.actor,
        "gate": None if gate is None else ("passed" if gate.success else "rejected"),
        "approval": decision.decision if decision is not None else None,
        "applied": applied is not None,
        "report": run.report_md.is_file(),
    }


def run_dir_of(store: Store, mechanism: str, run_dir_name: str) -> RunDir:
    """The run directory ``runs/<mechanism>/<run_dir_name>``, which must exist; a name that is not a run
    directory's (a path, ``..``) is bad input, so nothing outside the store's run directories is ever read."""
    from housekeeping.mechanisms.registry import get_mechanism

    spec = get_mechanism(mechanism)
    if not RUN_ID.match(run_dir_name) or run_dir_name.strip(".") != run_dir_name:
        raise InputError(f"run {run_dir_name!r} is not the name of a run directory")
    base = (store.root / RUNS_DIR / spec.name).resolve()
    path = (base / run_dir_name).resolve()
    if path.parent != base or not (path / "snapshot" / "run.json").is_file():
        raise NotFound(f"no {spec.name} run {run_dir_name!r} in store {store.root}")
    return RunDir(path)


def _json_of(document: Document | None) -> dict[str, Any] | None:
    return None if document is None else document.as_json()


def run_detail(store: Store, mechanism: str, run_dir_name: str) -> dict[str, Any]:
    """One run: its request, the plan per namespace (its summary), the gate's verdict and every expectation's
    outcome, the approval asked and decided, what purge was about to remove, what apply and purge did."""
    run = run_dir_of(store, mechanism, run_dir_name)
    return {
        **run_row(run),
        "request": read_run_info(run).as_json(),
        "planSummary": _json_of(read_document(PlanSummary, run.plan_summary)),
        "gate": _json_of(read_gate_result(run)),
        "dataDocs": run.data_docs_index.is_file(),
        "approvalRequest": _json_of(read_document(ApprovalRequest, run.approval_request)),
        "approvalDecision": _json_of(read_document(ApprovalDecision, run.approval_decision)),
        "purgeDue": read_json(run.purge_due),
        "applyResult": _json_of(read_applied_run(run)),
        "purgeResult": _json_of(read_purged_run(run)),
        "reportJson": run.report_json.is_file(),
    }


def run_actions(
    store: Store,
    mechanism: str,
    run_dir_name: str,
    *,
    topic: str | None = None,
    kind: str | None = None,
    offset: int = 0,
    limit: int = 100,
) -> dict[str, Any]:
    """A page of the run's planned actions, filtered by topic (a substring of its name) and kind, each with its
    reason; ``total`` counts every match."""
    from housekeeping.mechanisms.registry import get_mechanism

    run = run_dir_of(store, mechanism, run_dir_name)
    if kind is not None:
        get_mechanism(mechanism).action(kind, where="the kind filter")
    if offset < 0 or not 1 <= limit <= MAX_PAGE:
        raise InputError(f"offset must be >= 0 and limit between 1 and {MAX_PAGE}")
    rows, total = [], 0
    if run.plan_table(ACTIONS).is_dir():
        for row in sparse_batch_rows(table_batches(run.path, ACTIONS)):
            if (kind and row["action"] != kind) or (topic and topic not in row["topic"]):
                continue
            if offset <= total < offset + limit:
                rows.append(row)
            total += 1
    return {"total": total, "offset": offset, "limit": limit, "actions": rows}


def run_file(store: Store, mechanism: str, run_dir_name: str, relative: str) -> Path:
    """A file of the run's report or gate Data Docs (``report/...``, ``gate/data_docs/...``), or its plan summary,
    approval request and purge list, resolved inside the run directory; anything else, or outside it, is bad
    input."""
    run = run_dir_of(store, mechanism, run_dir_name)
    allowed = (run.report_dir.resolve(), run.data_docs_dir.resolve())
    files = {p.resolve() for p in (run.plan_summary, run.approval_request_md, run.purge_due, run.gate_result)}
    path = (run.path / relative).resolve()
    if not (any(base in path.parents for base in allowed) or path in files) or not path.is_file():
        raise NotFound(
            f"no report, Data Docs, plan summary or approval file {relative!r} in run {run_dir_name}"
        )
    return path


def journal(store: Store, where: JournalFilter, *, limit: int = 200) -> list[dict[str, Any]]:
    """Journal rows ``where`` keeps (:class:`housekeeping.observe.journal_view.JournalFilter`), newest first."""
    if not 1 <= limit <= MAX_PAGE:
        raise InputError(f"limit must be between 1 and {MAX_PAGE}")
    with read_transaction(store.engine) as conn:
        return journal_entries(conn, where, limit=limit, newest_first=True)
