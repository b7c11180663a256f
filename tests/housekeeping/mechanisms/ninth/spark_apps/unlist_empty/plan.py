"""Spark app: plan empty-ledger unlisting, every topic in one pass (``spark_apps.shared.plan_app``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from housekeeping.engine.contract import ACTIONS, BLOCKERS, LEDGERS
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir
from spark_apps.shared.plan_app import PlanApp, topic_pass_plan
from spark_apps.shared.rows import Row
from spark_apps.unlist_empty.rule import plan_topic


def unlist_topic(topic: Row, rows: Mapping[str, list[Row]], info: RunInfo) -> dict[str, list[Row]]:
    return {ACTIONS.name: plan_topic(topic, rows[LEDGERS.name]), BLOCKERS.name: []}


def tally(decided: Mapping[str, list[Row]]) -> dict[str, Any]:
    actions = decided[ACTIONS.name]
    return {"ledgers": len(actions), "bytes": sum(a["bytes"] for a in actions)}


def figures(totals: dict[str, Any], run: RunDir, info: RunInfo) -> dict[str, Any]:
    return {"ledgersToForget": totals.get("ledgers", 0), "bytesListed": totals.get("bytes", 0)}


APP = PlanApp(
    "unlist_empty",
    "Plan empty-ledger unlisting for one run's snapshot.",
    topic_pass_plan(
        rule=unlist_topic, reads=(LEDGERS.name,), outputs=(ACTIONS, BLOCKERS), tally=tally, figures=figures
    ),
)
parse_args, run, main = APP.parse_args, APP.run, APP.main
