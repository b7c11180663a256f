"""The deletion lag: how long data that is deletable under the policies in force, and still stored, has waited
since it became deletable (docs/metrics.md: how "became deletable" is established from the store's own evidence,
its plans and its pending-deletion log), with the runs' verdicts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from housekeeping.core.scope import in_scope
from housekeeping.core.settings import lag_objective
from housekeeping.engine.contract import ACTIONS
from housekeeping.engine.documents import read_gate_result, read_run_info
from housekeeping.engine.run_dir import RunDir, read_jsonl
from housekeeping.mechanisms.registry import MECHANISMS
from housekeeping.observe.metrics.families import Families, Family, StoreView, namespace_of, seconds
from housekeeping.store import metadata_schema as t
from housekeeping.store.holds import hold_for, load_holds
from housekeeping.store.store import RUNS_DIR, Store, read_transaction


def runs_and_lag(view: StoreView, objectives: Mapping[str, int]) -> list[Family]:
    """The newest plan and gate verdict per mechanism, and each namespace's deletion lag against its objective."""
    made = Families()
    runs = _runs(view.store, view.as_of_ms)
    last_gate = made.family(
        "housekeeping_last_gate_passed",
        "1 when the newest run's plan passed the gate, 0 when the gate rejected it.",
        ("mechanism",),
    )
    last_plan = made.family(
        "housekeeping_last_plan_timestamp_seconds", "Logical time (as-of) of the newest plan.", ("mechanism",)
    )
    newest: dict[str, PlanRun] = {}
    for run in runs:
        newest.setdefault(run.mechanism, run)
    for mechanism, run in sorted(newest.items()):
        last_plan.set((mechanism,), seconds(run.as_of_ms))
        gate = read_gate_result(run.run)
        if gate is not None:
            last_gate.set((mechanism,), 1.0 if gate.success else 0.0)

    lag = deletion_lag(
        runs, view.stored_ids, view.pending, view.holds, as_of_ms=view.as_of_ms, namespaces=view.namespaces
    )
    lag_seconds = made.family(
        "housekeeping_deletion_lag_seconds",
        "How long the oldest data that is deletable under the policies in force has been stored since it became "
        "deletable (0: none waits). docs/metrics.md: how 'became deletable' is established.",
        ("namespace",),
    )
    deletable_bytes = made.family(
        "housekeeping_deletable_bytes",
        "Bytes deletable under the policies in force and still stored.",
        ("namespace",),
    )
    objective_seconds = made.family(
        "housekeeping_deletion_lag_objective_seconds",
        "The namespace's deletion-lag objective (HOUSEKEEPING_DELETION_LAG_OBJECTIVES).",
        ("namespace",),
    )
    for namespace, (waited, size) in sorted(lag.items()):
        lag_seconds.set((namespace,), waited)
        deletable_bytes.set((namespace,), size)
        objective = lag_objective(namespace, objectives)
        if objective is not None:
            objective_seconds.set((namespace,), objective)
    return made


@dataclass(frozen=True)
class PlanRun:
    run: RunDir
    mechanism: str
    as_of_ms: int
    scope: tuple[str, ...]


def read_deletion_lag(store: Store, as_of_ms: int) -> dict[str, tuple[float, int]]:
    """:func:`deletion_lag` of every namespace of the store at ``as_of_ms`` (the storage report's SLO check)."""
    with read_transaction(store.engine) as conn:
        namespaces = [r.name for r in conn.execute(select(t.namespaces.c.name))]
        stored_ids: dict[str, dict[int, int]] = defaultdict(dict)
        for row in conn.execute(select(t.ledgers.c.topic, t.ledgers.c.ledger_id, t.ledgers.c.size_bytes)):
            stored_ids[row.topic][row.ledger_id] = row.size_bytes
        pending = list(
            conn.execute(select(t.pending_deletions).where(t.pending_deletions.c.status == "pending"))
        )
        holds = load_holds(conn)
    return deletion_lag(
        _runs(store, as_of_ms), stored_ids, pending, holds, as_of_ms=as_of_ms, namespaces=namespaces
    )


def _runs(store: Store, as_of_ms: int) -> list[PlanRun]:
    """Runs of the registry's mechanisms whose plan completed (its summary is written last), made at or before
    ``as_of_ms``, newest first."""
    found = []
    for run_json in (store.root / RUNS_DIR).glob("*/*/snapshot/run.json"):
        run = RunDir(run_json.parent.parent)
        try:
            info = read_run_info(run)
        except Exception:  # a run directory being written, or not ours: no evidence
            continue
        if info.mechanism not in MECHANISMS or info.as_of_ms > as_of_ms or not run.plan_summary.is_file():
            continue
        plan_run = PlanRun(run, info.mechanism, info.as_of_ms, tuple(info.scope or ()))
        # takenAtWallClockMs only orders reruns of one as-of (audit time, no decision reads it).
        found.append(((info.as_of_ms, info.taken_at_wall_clock_ms or 0, str(run.path)), plan_run))
    return [run for _, run in sorted(found, key=lambda f: f[0], reverse=True)]


def _planned_deletions(run: PlanRun, stored_ids: dict[str, dict[int, int]]) -> set[tuple[str, int]]:
    """The (topic, ledger) pairs the run's plan deletes that are still in the ledger list, each action asked by
    its kind (``ActionKind.listed_deletions``: trim's ledgers, every ledger of a topic GC deletes)."""
    kinds = MECHANISMS[run.mechanism].actions
    by_name = {kind.name: kind for kind in kinds}
    listed: set[tuple[str, int]] = set()
    table = run.run.plan_table(ACTIONS)
    for part in sorted(table.glob("part-*")) if table.is_dir() else ():
        for row in read_jsonl(part):
            topic, kind = row.get("topic"), by_name.get(row.get("action"))
            if kind is not None and topic is not None:
                listed.update(
                    (topic, ledger) for ledger in kind.listed_deletions(row, stored_ids.get(topic, {}))
                )
    return listed


def deletion_lag(
    runs: list[PlanRun],
    stored_ids: dict[str, dict[int, int]],
    pending: list[Any],
    holds: dict[str, Any],
    *,
    as_of_ms: int,
    namespaces: Iterable[str],
) -> dict[str, tuple[float, int]]:
    """Per namespace: (seconds the oldest deletable, still-stored data has waited since it became deletable,
    bytes deletable and still stored).

    - A ledger the newest plan covering its topic deletes (``delete_ledger``, or every ledger of a topic
      ``delete_topic`` deletes) and that is still in the ledger list: deletable under the policies in force (that
      plan's); since the as-of of the oldest plan in the unbroken line of plans of that mechanism covering the
      topic that delete it. A covering plan that does not delete it ends the line (it was not deletable then).
    - A deleted ledger's files past their grace period and not purged: since the grace period ended.

    Data a hold covers is not deletable. A plan only counts once complete (its summary written)."""
    since: dict[tuple[str, int], int] = {}
    for mechanism in dict.fromkeys(run.mechanism for run in runs):
        newer: list[PlanRun] = []  # this mechanism's runs already walked (newer than ``run``)
        line_open: set[tuple[str, int]] = set()
        for run in (r for r in runs if r.mechanism == mechanism):
            listed = _planned_deletions(run, stored_ids)
            for candidate in list(line_open):
                if candidate in listed:
                    since[candidate] = run.as_of_ms
                elif in_scope(candidate[0], run.scope):
                    line_open.discard(candidate)
            for candidate in listed - since.keys():
                topic = candidate[0]
                if hold_for(topic, holds) is not None:
                    continue
                if any(in_scope(topic, n.scope) for n in newer):
                    continue  # a newer plan covering the topic keeps it: not deletable now
                since[candidate] = run.as_of_ms
                line_open.add(candidate)
            newer.append(run)
            if not line_open and any(not n.scope for n in newer):
                break  # every topic has its newest plan among these, and every line has ended

    moments: dict[str, list[int]] = {ns: [] for ns in namespaces}
    size: dict[str, int] = dict.fromkeys(moments, 0)
    for (topic, ledger), moment in since.items():
        namespace = namespace_of(topic)
        moments.setdefault(namespace, []).append(moment)
        size[namespace] = size.get(namespace, 0) + stored_ids[topic][ledger]
    for row in pending:
        if row.status != "pending" or row.purge_after_ms > as_of_ms or hold_for(row.topic, holds) is not None:
            continue
        namespace = namespace_of(row.topic)
        moments.setdefault(namespace, []).append(row.purge_after_ms)
        size[namespace] = size.get(namespace, 0) + row.size_bytes
    return {
        ns: (seconds(max(0, as_of_ms - min(found))) if found else 0.0, size.get(ns, 0))
        for ns, found in moments.items()
    }
