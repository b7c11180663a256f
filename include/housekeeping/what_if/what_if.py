"""Policy what-if: what a policy change would delete, move or keep, before anyone changes it.

An overlay (``PolicyOverlay``) is a JSON object in the manifest's own shape: ``broker`` settings,
``namespaces.<tenant/ns>.<policy>`` and ``topics.<topic>.policies.<policy>``. A policy it names replaces that
policy at that level (``null`` removes it, so the level below applies); every other policy stays as stored. The
snapshot resolves the overlaid policies topic > namespace > broker exactly as it resolves the stored ones, and
the real planners and the real gate run on it, so the candidate plan is the plan the store would get after the
change. Nothing is written to the store: both runs live in a directory outside it, nothing is journaled.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.engine.actions import Effect, PlanView
from housekeeping.what_if.overlay import PolicyOverlay

if TYPE_CHECKING:
    from housekeeping.engine.mechanism import Mechanism
    from housekeeping.store.store import Store

MEASURES = ("ledgers", "bytes", "topics", "cursors", "entries")


def plan_effects(run_dir: Path, spec: Mechanism) -> dict[tuple, Effect]:
    """Every action of a run's plan that deletes, moves or rewrites something, measured by its kind
    (``ActionKind.effect``, from the plan and its snapshot); recorded states (quota flags, lastActive refreshes)
    have no effect to measure."""
    from housekeeping.engine.plan import read_table

    view = PlanView(run_dir)
    effects: dict[tuple, Effect] = {}
    for row in read_table(run_dir, "actions"):
        effect = spec.action(row["action"]).effect(row, view)
        if effect is not None:
            effects[effect.key] = effect
    return effects


def _zero() -> dict[str, dict[str, int]]:
    return {m: {"added": 0, "removed": 0} for m in MEASURES}


def difference(current: Mapping[tuple, Effect], candidate: Mapping[tuple, Effect]) -> dict[str, Any]:
    """Per namespace and in total, what the candidate plan adds to or removes from the current one, action by
    action: an action only one plan has counts whole; one both have counts by how much its measures differ
    (a cursor the candidate moves further acknowledges more entries)."""
    total = _zero()
    per_namespace: dict[str, dict[str, dict[str, int]]] = {}
    for key in sorted(set(current) | set(candidate), key=repr):
        before, after = current.get(key), candidate.get(key)
        namespace = (after or before).namespace  # type: ignore[union-attr]
        row = per_namespace.setdefault(namespace, _zero())
        for measure in MEASURES:
            delta = (getattr(after, measure) if after else 0) - (getattr(before, measure) if before else 0)
            if delta:
                side = "added" if delta > 0 else "removed"
                row[measure][side] += abs(delta)
                total[measure][side] += abs(delta)
    return {"total": total, "perNamespace": dict(sorted(per_namespace.items()))}


def what_if(
    store: Store,
    mechanisms: Sequence[str],
    overlay: PolicyOverlay,
    *,
    as_of: str,
    scope: str | None = None,
    values: Mapping[str, Any] | None = None,
    spark: Any = None,
) -> list[dict[str, Any]]:
    """Per mechanism, the current and the candidate plan (each exactly what ``plan MECHANISM --format json``
    prints) and their difference. ``values``: the runs' options by name (``registry.build_request``). The overlay
    is checked once, before any plan; the store is read once; both runs of each mechanism go to a temporary
    directory, never under the store."""
    from housekeeping.core.settings import Settings
    from housekeeping.core.timeutil import format_ms, parse_as_of
    from housekeeping.engine.documents import Intent
    from housekeeping.engine.plan import plan_document
    from housekeeping.engine.snapshot import read_store_state, take_snapshot
    from housekeeping.mechanisms.registry import build_request, get_mechanism
    from housekeeping.mechanisms.steps import plan_and_gate_in_process

    specs = [get_mechanism(mechanism) for mechanism in mechanisms]
    overlay.validate_against(store)
    settings = Settings.from_env()
    as_of_ms = parse_as_of(as_of)
    # One read of the store for both sides of every mechanism: a write landing between them cannot show up as
    # a difference the overlay made.
    state = read_store_state(store)
    results = []
    with tempfile.TemporaryDirectory(prefix="housekeeping-what-if-") as tmp:
        for spec in specs:
            documents: dict[str, dict[str, Any]] = {}
            effects: dict[str, dict[tuple, Effect]] = {}
            for side, policy_overlay in (("current", None), ("candidate", overlay)):
                run_id = f"what-if-{side}-{uuid.uuid4().hex[:8]}"
                run_dir = Path(tmp) / spec.name / side
                request = build_request(
                    spec,
                    run_id=run_id,
                    as_of_ms=as_of_ms,
                    settings=settings,
                    values=values,
                    scope=scope,
                    intent=Intent.WHAT_IF,
                )
                take_snapshot(store, request, run_dir=run_dir, policy_overlay=policy_overlay, state=state)
                gate = plan_and_gate_in_process(run_dir, spec.name, settings.spark_master, spark)
                documents[side] = plan_document(run_dir, spec.name, as_of_ms, run_id, gate)
                effects[side] = plan_effects(run_dir, spec)
            results.append(
                {
                    "mechanism": spec.name,
                    "asOf": format_ms(as_of_ms),
                    **documents,
                    "difference": difference(effects["current"], effects["candidate"]),
                }
            )
    return results


def check_request(mechanism: str, overlay: PolicyOverlay | None, sweep: str | None) -> None:
    """What a what-if request must be before anything runs (the CLI, and the DAG's form before Spark starts):
    an overlay, a sweep or both, and a sweep of the mechanism's own policy."""
    from housekeeping.core.errors import InputError
    from housekeeping.mechanisms.registry import what_if_mechanisms
    from housekeeping.what_if.sweep import Sweep

    if mechanism != "all" and mechanism not in what_if_mechanisms():
        raise InputError(
            f"a what-if runs the mechanisms whose plans follow policies ({', '.join(what_if_mechanisms())} or "
            f"all); {mechanism} does not"
        )
    if overlay is None and not sweep:
        raise InputError(
            "give a policy overlay (--policies FILE, or the policies param), a sweep (--sweep POLICY=VALUES, "
            "or the sweep param), or both"
        )
    if sweep:
        parsed = Sweep.parse(sweep)
        if mechanism != parsed.mechanism:
            raise InputError(
                f"--sweep {parsed.knob.name} is a {parsed.mechanism} policy; the mechanism given is {mechanism}"
            )


def check_against_store(
    store: Store, mechanism: str, overlay: PolicyOverlay | None, sweep: str | None, scope: str | None = None
) -> None:
    """:func:`check_request`, then the overlay and every sweep point against the store by ``load``'s rules: what
    the policy_what_if DAG's first task checks, so bad input fails there in one line, before Spark starts."""
    from housekeeping.core.scope import parse_scope

    check_request(mechanism, overlay, sweep)
    parse_scope(scope)
    base = overlay or PolicyOverlay()
    if overlay is not None:
        overlay.validate_against(store)
    if sweep:
        from housekeeping.what_if.sweep import Sweep, check_points

        check_points(store, Sweep.parse(sweep), base, scope)


def run_what_if(
    store: Store,
    mechanism: str,
    overlay: PolicyOverlay | None,
    *,
    as_of: str,
    scope: str | None = None,
    sweep: str | None = None,
    values: Mapping[str, Any] | None = None,
    report_dir: Path | None = None,
    spark: Any = None,
) -> dict[str, Any]:
    """What ``housekeeping what-if`` and the policy_what_if DAG print: a sweep's points (``sweep`` given), one
    mechanism's what-if, or ``all``'s under ``mechanisms``; written as report.json and index.html to
    ``report_dir`` when given. ``overlay`` None: none was given (a sweep alone)."""
    from housekeeping.mechanisms.registry import what_if_mechanisms

    check_request(mechanism, overlay, sweep)
    overlay = overlay or PolicyOverlay()
    if sweep:
        from housekeeping.what_if.sweep import Sweep, run_sweep

        document = run_sweep(store, Sweep.parse(sweep), overlay, as_of=as_of, scope=scope, spark=spark)
    else:
        names = list(what_if_mechanisms()) if mechanism == "all" else [mechanism]
        results = what_if(store, names, overlay, as_of=as_of, scope=scope, values=values, spark=spark)
        document = results[0] if mechanism != "all" else {"asOf": results[0]["asOf"], "mechanisms": results}
    if report_dir is not None:
        from housekeeping.what_if.report import write_what_if_report

        write_what_if_report(document, Path(report_dir))
    return document


def format_text(document: Mapping[str, Any]) -> str:
    """A what-if for a person: the two plans' sizes and verdicts, then what the candidate adds (+) and removes
    (-) per namespace."""
    parts = []
    for one in document.get("mechanisms", [document]):
        current, candidate = one["current"], one["candidate"]

        def verdict(plan: Mapping[str, Any]) -> str:
            return "gate passed" if plan["gate"]["success"] else "GATE REJECTED"

        lines = [
            f"{one['mechanism']} what-if as of {one['asOf']}: current plan {len(current['actions'])} actions "
            f"({verdict(current)}), candidate {len(candidate['actions'])} actions ({verdict(candidate)})"
        ]
        rows = {**one["difference"]["perNamespace"], "total": one["difference"]["total"]}
        for namespace, measures in rows.items():
            changes = [
                f"{measure} +{counts['added']}/-{counts['removed']}"
                for measure, counts in measures.items()
                if counts["added"] or counts["removed"]
            ]
            lines.append(f"  {namespace:<24} {', '.join(changes) or 'no change'}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
