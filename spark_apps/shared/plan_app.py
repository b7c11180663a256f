"""The one skeleton of every plan app (as Iceberg's ``BaseSparkAction``: each action supplies only its execution).

A plan app is a :class:`PlanApp`: its mechanism, its command line's description, and its ``execute`` (write the
plan tables of one run, return the mechanism's own figures). The skeleton does the rest the same way for all:
``--run-dir`` in, the run's facts read, the figures wrapped in a :class:`PlanSummary`, ``plan/summary.json``
written, the summary printed as JSON. A mechanism whose rule is a function of one topic's rows builds its
``execute`` with :func:`topic_pass_plan` (one Spark job, ``spark_apps.shared.topic_pass``).

Each plan module binds ``parse_args``, ``run`` and ``main`` (the launcher, spark-submit and the tests call them)
to its app."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from housekeeping.engine.contract import Table
from housekeeping.engine.documents import PlanSummary, RunInfo, read_run_info
from housekeeping.engine.run_dir import RunDir
from spark_apps.shared.io import write_summary
from spark_apps.shared.session import get_spark
from spark_apps.shared.topic_pass import Rule, Tally, plan_pass

# One run's plan tables written; the mechanism's figures returned (its part of the summary).
Execute = Callable[[Any, RunDir, RunInfo], dict[str, Any]]
# The pass's added-up tallies, the run and its facts -> the mechanism's figures (and written beside the buckets'
# part files, what the driver decides from the tallies: GC's partitioned-topic metadata).
Figures = Callable[[dict[str, Any], RunDir, RunInfo], dict[str, Any]]


@dataclass(frozen=True)
class PlanApp:
    mechanism: str
    description: str
    execute: Execute

    def parse_args(self, argv: list[str] | None = None) -> argparse.Namespace:
        parser = argparse.ArgumentParser(description=self.description)
        parser.add_argument(
            "--run-dir", required=True, help="run directory holding snapshot/; plan/ is written there"
        )
        return parser.parse_args(argv)

    def run(self, spark, run_dir: str | Path) -> dict[str, Any]:
        """Plan one run on ``spark``: its plan tables and summary written; the summary returned."""
        run = RunDir(run_dir)
        info = read_run_info(run)
        figures = self.execute(spark, run, info)
        summary = PlanSummary(self.mechanism, info.run_id, info.as_of_ms, figures)
        write_summary(run, summary)
        return summary.as_json()

    def main(self, argv: list[str] | None = None) -> int:
        """Plan one run in a Spark application named after the mechanism; say what it planned in one line (the
        whole summary is ``plan/summary.json``)."""
        args = self.parse_args(argv)
        summary = self.run(get_spark(f"housekeeping-plan-{self.mechanism}"), args.run_dir)
        print(describe_plan(summary, RunDir(args.run_dir).plan_summary))
        return 0


def describe_plan(summary: dict[str, Any], where: Path) -> str:
    """A plan's figures as one line a person reads in a task log: each top-level figure, bytes in human units,
    per-namespace tables counted."""
    from housekeeping.engine.report import human_bytes

    said = []
    for key, value in sorted(summary.items()):
        if key in ("mechanism", "runId", "asOfMs"):
            continue
        if isinstance(value, dict):
            said.append(f"{key}: {len(value)} entries")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            said.append(f"{key}={value}")
        else:
            said.append(f"{key}={human_bytes(value) if 'ytes' in key else value}")
    return f"PLAN: {summary.get('mechanism')} run {summary.get('runId')}: {', '.join(said)} ({where})"


def topic_pass_plan(
    *, rule: Rule, reads: Sequence[str], outputs: Sequence[Table], tally: Tally, figures: Figures
) -> Execute:
    """The execution of a plan decided topic by topic: ``rule`` over every topic in one Spark job, ``outputs``
    written, the buckets' tallies added up and turned into the mechanism's ``figures``."""

    def execute(spark, run: RunDir, info: RunInfo) -> dict[str, Any]:
        totals = plan_pass(spark, run.path, info, rule=rule, reads=reads, outputs=outputs, tally=tally)
        return figures(totals, run, info)

    return execute
