"""Spark app: plan message expiry (TTL), Pulsar ``PersistentMessageExpiryMonitor`` with a safer entry search.

Reads a run's snapshot and decides every durable subscription of every in-scope topic in one Spark pass
(``spark_apps.shared.topic_pass``: a task per snapshot bucket runs :func:`spark_apps.expiry.rule.plan_topic` topic by
topic, reading inside the task the few ledgers whose entries' timestamps decide), and writes:

- ``plan/subscriptions`` one row per durable subscription: moved or kept, a typed ``kind``, a ``reason``,
  backlog before and after, entries and (estimated) bytes expired, oldest remaining entry timestamp
- ``plan/actions``       ``move_cursor`` rows (the contract's actions)
- ``plan/blockers``      per kept subscription with a backlog: why nothing (more) expired
- ``plan/summary.json``  totals, per namespace, and what was read from the entry store

The rule, per subscription, is docs/semantics.md §4 (``spark_apps.expiry.rule``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from housekeeping.engine.contract import ACTIONS, BLOCKERS, CURSORS, LEDGERS
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.expiry.tables import EXPIRY_SUBSCRIPTIONS
from spark_apps.expiry.rule import plan_topic
from spark_apps.shared.cursor_rule import cursor_summary, cursor_tally
from spark_apps.shared.io import READ_COST, LedgerFiles, TopicEntryReads, read_cost, read_costs
from spark_apps.shared.plan_app import PlanApp, topic_pass_plan
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import measure_pass, namespace_measures

READS = (LEDGERS.name, CURSORS.name)
OUTPUTS = (EXPIRY_SUBSCRIPTIONS, ACTIONS, BLOCKERS)


def expiry_topic(topic: Row, rows: Mapping[str, list[Row]], info: RunInfo) -> dict[str, list[Row]]:
    """The pass's rule: one topic's rows of expiry's plan tables, and what it read."""
    ledgers = rows[LEDGERS.name]
    reads = TopicEntryReads(LedgerFiles.of(info), topic["topic"])
    plan = plan_topic(topic, ledgers, rows[CURSORS.name], info, reads)
    return {
        EXPIRY_SUBSCRIPTIONS.name: plan.subscriptions,
        ACTIONS.name: plan.actions,
        BLOCKERS.name: plan.blockers,
        READ_COST: [reads.cost_row(ledgers)],
    }


def tally(decided: Mapping[str, list[Row]]) -> dict[str, Any]:
    """A bucket's share of the summary: the cursors moved and what they acknowledge per namespace, what was read."""
    reads = read_costs(decided.get(READ_COST, []))
    return {
        **cursor_tally(decided[EXPIRY_SUBSCRIPTIONS.name], "entriesExpired", "bytesExpired"),
        READ_COST: reads,
    }


def sweep_topic(topic: Row, rows: Mapping[str, list[Row]], info: RunInfo) -> dict[str, list[Row]]:
    """A TTL sweep's measures of one topic (``spark_apps.sweep``): the backlog bytes this plan expires (its
    cursors acknowledge them) and the backlog bytes it keeps, with the cursors moved and entries expired, from the
    same decisions :func:`expiry_topic` writes."""
    subscriptions = expiry_topic(topic, rows, info)[EXPIRY_SUBSCRIPTIONS.name]
    if not subscriptions:
        return {}
    measures = {
        "namespace": topic["namespace"],
        "bytesFreed": sum(s["bytesExpired"] for s in subscriptions),
        "bytesKept": sum(s["backlogBytesAfter"] for s in subscriptions),
        "cursorsMoved": sum(s["decision"] == "move" for s in subscriptions),
        "entriesExpired": sum(s["entriesExpired"] for s in subscriptions),
    }
    return {"measures": [measures]}


def sweep_points(spark, run_dirs: list[str | Path]) -> list[dict[str, dict[str, int]]]:
    """Every point of a TTL sweep in one Spark job: per namespace, :func:`sweep_topic`'s measures added up."""
    return measure_pass(spark, run_dirs, rule=sweep_topic, reads=READS, measure=namespace_measures)


def figures(totals: dict[str, Any], run: RunDir, info: RunInfo) -> dict[str, Any]:
    """The summary's figures: the cursors moved and what they acknowledge, and what was read."""
    return {
        **cursor_summary(totals.get("perNamespace", {})),
        "reads": read_cost(totals.get(READ_COST, {})),
    }


APP = PlanApp(
    "expiry",
    "Plan message expiry (TTL) for one run's snapshot.",
    topic_pass_plan(rule=expiry_topic, reads=READS, outputs=OUTPUTS, tally=tally, figures=figures),
)
parse_args, run, main = APP.parse_args, APP.run, APP.main
