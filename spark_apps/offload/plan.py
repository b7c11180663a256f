"""Spark app: plan ledger offload (Pulsar ``ManagedLedgerImpl#maybeOffload``; docs/semantics.md §9).

Reads a run's snapshot and decides every ledger of every in-scope topic in one Spark pass
(``spark_apps.shared.topic_pass``: a task per snapshot bucket runs :func:`spark_apps.offload.rule.plan_topic` topic
by topic), and writes:

- ``plan/decisions``   one row per ledger: offload or keep, a typed ``kind`` and a human ``reason``
- ``plan/actions``     ``offload_ledger`` per selected ledger (``bytes``: its size), oldest first per topic
- ``plan/blockers``    per topic and kind, what is not offloaded although its policy would, and why
- ``plan/summary.json`` totals, and the offloader in force (none: the plan is empty and says why)

The rule, per topic with an offloader (a tier is configured and the namespace is not a system-service one,
Pulsar's NullLedgerOffloader) and either threshold >= 0:

1. walk the closed ledgers from the newest to the oldest (the current ledger never, its bytes not counted),
   summing their sizes, offloaded ones included (``sizeSummed``);
2. a ledger whose offload completed is skipped; any other (never tried, or an attempt that did not complete) is
   offloaded when ``bytes >= 0 and sizeSummed > bytes`` (strict) or ``seconds >= 0 and asOf - closedAt >=
   seconds * 1000`` (inclusive);
3. an empty ledger (no entries) is never offloaded (Pulsar's offloadPrefix skips them, testDontOffloadEmpty), nor
   one whose entries are not stored (a metadata-only store: nothing to upload).

Thresholds of 0 offload every closed ledger. Holds do not stop an offload: it copies, it deletes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from housekeeping.engine.contract import ACTIONS, BLOCKERS, LEDGERS
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.offload.tables import OFFLOAD_DECISIONS
from spark_apps.offload.rule import NO_OFFLOADER, local_bytes_left, plan_topic
from spark_apps.shared.plan_app import PlanApp, topic_pass_plan
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import ledgers_per_namespace, measure_pass, namespace_measures

READS = (LEDGERS.name,)
OUTPUTS = (OFFLOAD_DECISIONS, ACTIONS, BLOCKERS)


def offload_topic(topic: Row, rows: Mapping[str, list[Row]], info: RunInfo) -> dict[str, list[Row]]:
    """The pass's rule: one topic's rows of offload's plan tables."""
    plan = plan_topic(topic, rows[LEDGERS.name], int(info.as_of_ms))
    return {OFFLOAD_DECISIONS.name: plan.decisions, ACTIONS.name: plan.actions, BLOCKERS.name: plan.blockers}


def tally(decided: Mapping[str, list[Row]]) -> dict[str, Any]:
    """A bucket's share of the summary: the ledgers and bytes offloaded per namespace."""
    return {"perNamespace": ledgers_per_namespace(decided[OFFLOAD_DECISIONS.name], "offload")}


def sweep_topic(topic: Row, rows: Mapping[str, list[Row]], info: RunInfo) -> dict[str, list[Row]]:
    """A policy sweep's measures of one topic with ledgers: the bytes and ledgers this plan offloads, and the local
    bytes left once the offload-deletion lag has passed (:func:`spark_apps.offload.rule.local_bytes_left`), from the
    same decisions :func:`offload_topic` writes."""
    ledgers = rows[LEDGERS.name]
    if not ledgers:
        return {}
    plan = plan_topic(topic, ledgers, int(info.as_of_ms))
    measures = {
        "namespace": topic["namespace"],
        "bytesOffloaded": sum(a["bytes"] for a in plan.actions),
        "ledgersOffloaded": len(plan.actions),
        "localBytesLeft": local_bytes_left(topic, ledgers, plan),
    }
    return {"measures": [measures]}


def sweep_points(spark, run_dirs: list[str | Path]) -> list[dict[str, dict[str, int]]]:
    """Every point of a policy sweep (``spark_apps.sweep``) in one Spark job: per namespace, :func:`sweep_topic`'s
    measures added up."""
    return measure_pass(spark, run_dirs, rule=sweep_topic, reads=READS, measure=namespace_measures)


def figures(totals: dict[str, Any], run: RunDir, info: RunInfo) -> dict[str, Any]:
    """The summary's figures: the offloader (or why none), the ledgers and bytes to offload per namespace."""
    per_namespace = totals.get("perNamespace", {})
    tier = info.offload_tier
    return {
        "offloader": tier,
        **({} if tier else {"why": NO_OFFLOADER}),
        "ledgersToOffload": sum(v["ledgers"] for v in per_namespace.values()),
        "bytesToOffload": sum(v["bytes"] for v in per_namespace.values()),
        "perNamespace": per_namespace,
    }


APP = PlanApp(
    "offload",
    "Plan ledger offload for one run's snapshot.",
    topic_pass_plan(rule=offload_topic, reads=READS, outputs=OUTPUTS, tally=tally, figures=figures),
)
parse_args, run, main = APP.parse_args, APP.run, APP.main
