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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from housekeeping.policy_overlay import PolicyOverlay

MEASURES = ("ledgers", "bytes", "topics", "cursors", "entries")


def _position(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    ledger, entry = text.split(":")
    return int(ledger), int(entry)


def entries_between(ledgers: Iterable[tuple[int, int]], after: tuple[int, int], upto: tuple[int, int]) -> int:
    """Entries at positions in (after, upto] of a topic whose ledgers are (ledgerId, entries): what moving a
    mark-delete position from ``after`` to ``upto`` acknowledges."""
    count = 0
    for ledger_id, entries in ledgers:
        low = after[1] + 1 if ledger_id == after[0] else (0 if ledger_id > after[0] else entries)
        high = upto[1] if ledger_id == upto[0] else (entries - 1 if ledger_id < upto[0] else -1)
        count += max(0, min(high, entries - 1) - low + 1)
    return count


@dataclass(frozen=True)
class Effect:
    """What one planned action does, by what it acts on (``key``): the measures it frees or moves."""

    namespace: str
    key: tuple
    measures: dict[str, int]


def plan_effects(run_dir: Path) -> dict[tuple, Effect]:
    """Every deleting or cursor-moving action of a run's plan, measured from the plan and its snapshot:
    ``delete_ledger`` a ledger (its bytes and entries), ``delete_topic`` a topic (all its ledgers),
    ``move_cursor`` a cursor (the entries between its old and new mark-delete positions),
    ``rewrite_compacted`` the entries leaving the topic's compacted view. Quota flags and lastActive refreshes
    neither delete nor move anything."""
    from housekeeping.contract import RunDir, read_jsonl
    from housekeeping.names import TopicName
    from housekeeping.plan import read_table

    ledgers: dict[str, list[dict[str, Any]]] = {}
    for row in read_jsonl(RunDir(run_dir).snapshot_table("ledgers")):
        ledgers.setdefault(row["topic"], []).append(row)
    effects: dict[tuple, Effect] = {}
    for action in read_table(run_dir, "actions"):
        topic, kind = action.get("topic"), action["action"]
        own = sorted(ledgers.get(topic, []), key=lambda r: r["ledgerId"])
        if kind == "delete_ledger":
            ledger = next((r for r in own if r["ledgerId"] == action["ledgerId"]), {})
            measures = {
                "ledgers": 1,
                "bytes": int(action.get("bytes") or 0),
                "entries": int(ledger.get("entries", 0)),
            }
            key = (kind, topic, action["ledgerId"])
        elif kind == "delete_topic":
            measures = {
                "topics": 1,
                "ledgers": len(own),
                "bytes": sum(int(r["size"]) for r in own),
                "entries": sum(int(r["entries"]) for r in own),
            }
            key = (kind, topic)
        elif kind == "move_cursor":
            moved_from, moved_to = _position(action.get("from")), _position(action.get("to"))
            layout = [(int(r["ledgerId"]), int(r["entries"])) for r in own]
            entries = entries_between(layout, moved_from, moved_to) if moved_from and moved_to else 0
            measures = {"cursors": 1, "entries": entries, "bytes": int(action.get("bytes") or 0)}
            key = (kind, topic, action.get("subscription"))
        elif kind == "rewrite_compacted":
            read = int(action.get("entriesRead") or 0)
            measures = {"topics": 1, "entries": max(0, read - int(action.get("entriesKept") or 0))}
            key = (kind, topic)
        else:
            continue
        namespace = str(TopicName.parse(topic).namespace_name)
        effects[key] = Effect(namespace, key, {m: int(measures.get(m, 0)) for m in MEASURES})
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
            delta = (after.measures[measure] if after else 0) - (before.measures[measure] if before else 0)
            if delta:
                side = "added" if delta > 0 else "removed"
                row[measure][side] += abs(delta)
                total[measure][side] += abs(delta)
    return {"total": total, "perNamespace": dict(sorted(per_namespace.items()))}


def what_if(
    store: Any,
    mechanisms: Sequence[str],
    overlay: PolicyOverlay,
    *,
    as_of: str,
    scope: str | None = None,
    compact_topics: list[str] | None = None,
    spark: Any = None,
) -> list[dict[str, Any]]:
    """Per mechanism, the current and the candidate plan (each exactly what ``plan MECHANISM --format json``
    prints) and their difference. The overlay is checked once, before any plan; the store is read once; both
    runs of each mechanism go to a temporary directory, never under the store."""
    from housekeeping.plan import plan_document
    from housekeeping.registry import mechanism_spec
    from housekeeping.runner import plan_and_gate_in_process
    from housekeeping.settings import Settings
    from housekeeping.snapshot import read_store_state, take_snapshot
    from housekeeping.timeutil import format_ms, parse_as_of

    for mechanism in mechanisms:
        mechanism_spec(mechanism)
    overlay.validate_against(store)
    settings = Settings.from_env()
    as_of_ms = parse_as_of(as_of)
    # One read of the store for both sides of every mechanism: a write landing between them cannot show up as
    # a difference the overlay made.
    state = read_store_state(store)
    results = []
    with tempfile.TemporaryDirectory(prefix="housekeeping-what-if-") as tmp:
        for mechanism in mechanisms:
            documents: dict[str, dict[str, Any]] = {}
            effects: dict[str, dict[tuple, Effect]] = {}
            for side, policy_overlay in (("current", None), ("candidate", overlay)):
                run_id = f"what-if-{side}-{uuid.uuid4().hex[:8]}"
                run_dir = Path(tmp) / mechanism / side
                take_snapshot(
                    store,
                    mechanism=mechanism,
                    run_id=run_id,
                    as_of_ms=as_of_ms,
                    scope=scope,
                    max_deleted_share=settings.max_deleted_share,
                    max_deleted_topic_share=settings.max_deleted_topic_share,
                    compact_topics=compact_topics or (),
                    run_dir=run_dir,
                    policy_overlay=policy_overlay,
                    state=state,
                )
                gate = plan_and_gate_in_process(run_dir, mechanism, settings.spark_master, spark)
                documents[side] = plan_document(run_dir, mechanism, as_of_ms, run_id, gate)
                effects[side] = plan_effects(run_dir)
            results.append(
                {
                    "mechanism": mechanism,
                    "asOf": format_ms(as_of_ms),
                    **documents,
                    "difference": difference(effects["current"], effects["candidate"]),
                }
            )
    return results


def check_request(mechanism: str, overlay: PolicyOverlay | None, sweep: str | None) -> None:
    """What a what-if request must be before anything runs (the CLI, and the DAG's form before Spark starts):
    an overlay, a sweep or both, and a sweep of the mechanism's own policy."""
    from housekeeping.errors import InputError
    from housekeeping.policy_sweep import Sweep
    from housekeeping.registry import what_if_mechanisms

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


def run_what_if(
    store: Any,
    mechanism: str,
    overlay: PolicyOverlay | None,
    *,
    as_of: str,
    scope: str | None = None,
    sweep: str | None = None,
    compact_topics: list[str] | None = None,
    report_dir: Path | None = None,
    spark: Any = None,
) -> dict[str, Any]:
    """What ``housekeeping what-if`` and the policy_what_if DAG print: a sweep's points (``sweep`` given), one
    mechanism's what-if, or ``all``'s under ``mechanisms``; written as report.json and index.html to
    ``report_dir`` when given. ``overlay`` None: none was given (a sweep alone)."""
    from housekeeping.registry import what_if_mechanisms

    check_request(mechanism, overlay, sweep)
    overlay = overlay or PolicyOverlay()
    if sweep:
        from housekeeping.policy_sweep import Sweep, run_sweep

        document = run_sweep(store, Sweep.parse(sweep), overlay, as_of=as_of, scope=scope, spark=spark)
    else:
        names = list(what_if_mechanisms()) if mechanism == "all" else [mechanism]
        results = what_if(
            store, names, overlay, as_of=as_of, scope=scope, compact_topics=compact_topics, spark=spark
        )
        document = results[0] if mechanism != "all" else {"asOf": results[0]["asOf"], "mechanisms": results}
    if report_dir is not None:
        from housekeeping.what_if_report import write_what_if_report

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
