"""Spark app: plan consumed-ledger trim (Pulsar ``ManagedLedgerImpl#internalTrimLedgers``).

Reads a run's snapshot and decides every ledger of every in-scope topic in one Spark pass
(``spark_apps.shared.topic_pass``: a task per snapshot bucket runs :func:`spark_apps.trim.rule.plan_topic` topic by
topic), and writes:

- ``plan/decisions``  one row per ledger: delete or keep, a typed ``kind`` and a human ``reason``
- ``plan/actions``    the contract's actions: ``delete_ledger`` rows, plus ``move_cursor`` rows that
                      fast-forward lagging cursors (readers) past the deleted range, plus ``delete_local_copy``
                      rows of offloaded ledgers past the offload-deletion lag
- ``plan/blockers``   per topic and kind, the bytes kept and why (subscription, current ledger, retention)
- ``plan/summary.json`` totals the gate reconciles independently

The rule, per topic, is docs/semantics.md §3 and §9 (``spark_apps.trim.rule``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from housekeeping.engine.contract import ACTIONS, BLOCKERS, CURSORS, LEDGERS
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.trim.actions import DELETE_LOCAL_COPY
from housekeeping.mechanisms.trim.tables import TRIM_DECISIONS
from spark_apps.shared.plan_app import PlanApp, topic_pass_plan
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import ledgers_per_namespace, measure_pass, namespace_measures
from spark_apps.trim.rule import plan_topic

READS = (LEDGERS.name, CURSORS.name)
OUTPUTS = (
    TRIM_DECISIONS,
    ACTIONS,
    BLOCKERS,
)


def trim_topic(topic: Row, rows: Mapping[str, list[Row]], info: RunInfo) -> dict[str, list[Row]]:
    """The pass's rule: one topic's rows of trim's plan tables."""
    plan = plan_topic(topic, rows[LEDGERS.name], rows[CURSORS.name], int(info.as_of_ms))
    return {TRIM_DECISIONS.name: plan.decisions, ACTIONS.name: plan.actions, BLOCKERS.name: plan.blockers}


def tally(decided: Mapping[str, list[Row]]) -> dict[str, Any]:
    """A bucket's share of the summary: the ledgers and bytes deleted per namespace, the local copies deleted."""
    per_namespace = ledgers_per_namespace(decided[TRIM_DECISIONS.name], "delete")
    copies = [a for a in decided[ACTIONS.name] if a["action"] == DELETE_LOCAL_COPY.name]
    return {
        "ledgersToDelete": sum(v["ledgers"] for v in per_namespace.values()),
        "bytesToDelete": sum(v["bytes"] for v in per_namespace.values()),
        "perNamespace": per_namespace,
        "localCopiesToDelete": len(copies),
        "localBytesToDelete": sum(a["bytes"] for a in copies),
    }


def sweep_topic(topic: Row, rows: Mapping[str, list[Row]], info: RunInfo) -> dict[str, list[Row]]:
    """A policy sweep's measures of one topic: the bytes and ledgers this plan frees and the bytes it keeps, and on
    the local disk the bytes it frees (deleted ledgers and the local copies the offload-deletion lag lets go) and
    leaves, from the same decisions :func:`trim_topic` writes (holds included)."""
    plan = plan_topic(topic, rows[LEDGERS.name], rows[CURSORS.name], int(info.as_of_ms))
    if not plan.decisions:
        return {}
    has_local = {r["ledgerId"]: not r["localDeleted"] for r in rows[LEDGERS.name]}
    copies = {a["ledgerId"] for a in plan.actions if a["action"] == DELETE_LOCAL_COPY.name}
    measures = dict.fromkeys(
        ("bytesFreed", "bytesKept", "ledgersDeleted", "localBytesFreed", "localBytesLeft"), 0
    )
    for d in plan.decisions:
        deleted, size = d["decision"] == "delete", d["size"]
        measures["bytesFreed" if deleted else "bytesKept"] += size
        measures["ledgersDeleted"] += deleted
        if has_local.get(d["ledgerId"], False):
            freed = deleted or d["ledgerId"] in copies
            measures["localBytesFreed" if freed else "localBytesLeft"] += size
    return {"measures": [{"namespace": topic["namespace"], **measures}]}


def sweep_points(spark, run_dirs: list[str | Path]) -> list[dict[str, dict[str, int]]]:
    """Every point of a policy sweep (``spark_apps.sweep``) in one Spark job: per namespace, :func:`sweep_topic`'s
    measures added up."""
    return measure_pass(spark, run_dirs, rule=sweep_topic, reads=READS, measure=namespace_measures)


def figures(totals: dict[str, Any], run: RunDir, info: RunInfo) -> dict[str, Any]:
    """The summary's figures: the buckets' tallies, zero where no bucket deleted anything."""
    return {
        "ledgersToDelete": totals.get("ledgersToDelete", 0),
        "bytesToDelete": totals.get("bytesToDelete", 0),
        "perNamespace": totals.get("perNamespace", {}),
        "localCopiesToDelete": totals.get("localCopiesToDelete", 0),
        "localBytesToDelete": totals.get("localBytesToDelete", 0),
    }


APP = PlanApp(
    "trim",
    "Plan consumed-ledger trim for one run's snapshot.",
    topic_pass_plan(rule=trim_topic, reads=READS, outputs=OUTPUTS, tally=tally, figures=figures),
)
parse_args, run, main = APP.parse_args, APP.run, APP.main
