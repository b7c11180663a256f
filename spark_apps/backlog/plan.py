"""Spark app: plan backlog-quota enforcement (Pulsar ``BacklogQuotaManager``).

Reads a run's snapshot and decides every in-scope topic in one Spark pass (``spark_apps.shared.topic_pass``: a task
per snapshot bucket runs :func:`spark_apps.backlog.rule.plan_topic` topic by topic, reading inside the task
the few entries precise mode needs), and writes:

- ``plan/quotas``         one row per topic: limits and policies, measured backlog bytes and oldest age,
                          exceeded flags, which quota was acted on and why the eviction stopped
- ``plan/eviction_steps`` every cursor move of the eviction loops in order (the gate replays them)
- ``plan/subscriptions``  one row per durable subscription: evicted or kept, entries and bytes evicted
- ``plan/actions``        ``move_cursor`` (consumer_backlog_eviction) and ``flag_backlog_quota`` (quota state
                          for producer_request_hold / producer_exception: set, kept or cleared)
- ``plan/blockers``, ``plan/summary.json``

The per-topic rules are ``spark_apps.backlog.quota``; the precise time eviction is the TTL search of
``spark_apps.shared.cursor_rule`` with ttl = (int)(0.9 x limit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from housekeeping.engine.contract import ACTIONS, BLOCKERS, CURSORS, LEDGERS, QUOTA_STATES
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.backlog.tables import BACKLOG_QUOTAS, BACKLOG_SUBSCRIPTIONS, EVICTION_STEPS
from spark_apps.backlog.rule import plan_topic
from spark_apps.shared.cursor_rule import cursor_summary, cursor_tally
from spark_apps.shared.io import READ_COST, LedgerFiles, TopicEntryReads, read_cost, read_costs
from spark_apps.shared.plan_app import PlanApp, topic_pass_plan
from spark_apps.shared.rows import Row

READS = (LEDGERS.name, CURSORS.name, QUOTA_STATES.name)
OUTPUTS = (BACKLOG_QUOTAS, EVICTION_STEPS, BACKLOG_SUBSCRIPTIONS, ACTIONS, BLOCKERS)
# The pass's extra table of the quota states decided (for the summary's lists, never written).
STATES = "states"


def backlog_topic(topic: Row, rows: Mapping[str, list[Row]], info: RunInfo) -> dict[str, list[Row]]:
    """The pass's rule: one topic's rows of backlog's plan tables, its quota states and what it read."""
    ledgers = rows[LEDGERS.name]
    reads = TopicEntryReads(LedgerFiles.of(info), topic["topic"])
    plan = plan_topic(topic, ledgers, rows[CURSORS.name], rows[QUOTA_STATES.name], info, reads)
    return {
        BACKLOG_QUOTAS.name: [plan.quota],
        EVICTION_STEPS.name: plan.steps,
        BACKLOG_SUBSCRIPTIONS.name: plan.subscriptions,
        ACTIONS.name: plan.actions,
        BLOCKERS.name: plan.blockers,
        STATES: plan.states,
        READ_COST: [reads.cost_row(ledgers)],
    }


def tally(decided: Mapping[str, list[Row]]) -> dict[str, Any]:
    """A bucket's share of the summary: the cursors evicted per namespace, the quota states by kind, what was
    read. The states are counted by name (``topic quotaType``) so the driver's sum is their union."""
    reads = read_costs(decided.get(READ_COST, []))
    states: dict[str, dict[str, int]] = {"exceeded": {}, "newlyExceeded": {}, "cleared": {}}
    for state in decided.get(STATES, []):
        name = f"{state['topic']} {state['quotaType']}"
        kinds = (
            ["exceeded", *(["newlyExceeded"] if not state["wasExceeded"] else [])]
            if state["exceeded"]
            else ["cleared"]
        )
        for kind in kinds:
            states[kind][name] = 1
    return {
        **cursor_tally(decided[BACKLOG_SUBSCRIPTIONS.name], "entriesEvicted", "bytesEvicted"),
        READ_COST: reads,
        STATES: states,
    }


def figures(totals: dict[str, Any], run: RunDir, info: RunInfo) -> dict[str, Any]:
    """The summary's figures: the cursors evicted and what they acknowledge, the quota states, what was read."""
    states = totals.get(STATES, {})
    return {
        **cursor_summary(totals.get("perNamespace", {})),
        "quotaStates": {
            kind: sorted(states.get(kind, {})) for kind in ("exceeded", "newlyExceeded", "cleared")
        },
        "reads": read_cost(totals.get(READ_COST, {})),
    }


APP = PlanApp(
    "backlog",
    "Plan backlog-quota enforcement for one run's snapshot.",
    topic_pass_plan(rule=backlog_topic, reads=READS, outputs=OUTPUTS, tally=tally, figures=figures),
)
parse_args, run, main = APP.parse_args, APP.run, APP.main
