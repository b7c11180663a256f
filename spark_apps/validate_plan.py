"""Spark app: the quality gate. Re-derives each planned action's safety from the snapshot, independently of the
planner, and validates the result with Great Expectations. Exits non-zero on any failed expectation, so the DAG's
apply task never runs.

The mechanism's checks come from the module its spec names (``spark_apps/<mechanism>/gate.py``:
``checks(spark, run_dir, spec)``); every mechanism also gets the hold checks here: no deleting or cursor-moving
action names a topic a hold covers, matched from the snapshot's raw holds (namespace, topic, partitioned parent),
not from the planner's ``heldBy``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from housekeeping.engine.contract import HOLDS
from housekeeping.engine.documents import GateResult
from housekeeping.engine.gate import (
    CheckFrame,
    must_be_true,
    run_gate,
    start_loading_great_expectations,
    start_plan_digest,
)
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.registry import get_mechanism, mechanism_names
from spark_apps.shared.holds import hold_checks
from spark_apps.shared.io import read_actions, read_snapshot_table
from spark_apps.shared.session import get_spark, materialize, run_scoped_cache
from spark_apps.shared.topic_names import topic_name_facts


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Validate a run's plan against its snapshot (quality gate).")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--mechanism", required=True, choices=mechanism_names())
    return parser.parse_args(argv)


def hold_check_frame(spark, run_dir: str | Path) -> CheckFrame:
    actions = read_actions(spark, run_dir)
    names = topic_name_facts(spark, [actions])
    holds = read_snapshot_table(spark, run_dir, HOLDS)
    return CheckFrame("holds", hold_checks(actions, holds, names), must_be_true("not_held"))


def run(spark, run_dir: str | Path, mechanism: str) -> GateResult:
    spec = get_mechanism(mechanism)
    checks_of = importlib.import_module(spec.gate_checks).checks
    digest = start_plan_digest(RunDir(run_dir).path)  # the plan as the checks begin to read it
    start_loading_great_expectations()  # beside the check frames' Spark work: most of a small gate's imports
    with run_scoped_cache(spark):
        checks = checks_of(spark, run_dir, spec)
        if not any(
            check.name == "holds" for check in checks
        ):  # a gate checking topic by topic checks holds too
            checks.append(hold_check_frame(spark, run_dir))
        # A check frame is computed once (its joins over the snapshot are the expensive part): brought to the
        # driver when small, else materialized for Great Expectations' per-metric queries.
        return run_gate(RunDir(run_dir).path, mechanism, checks, materialize=materialize, digest=digest)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = get_spark(f"housekeeping-validate-{args.mechanism}")
    document = run(spark, args.run_dir, args.mechanism)
    if not document.success:
        print(
            f"GATE REJECTED the {args.mechanism} plan in {args.run_dir}; apply will not run:", file=sys.stderr
        )
        print(document.describe_failures(), file=sys.stderr)
        return 1
    print(
        f"gate passed: {len(document.expectations)} expectations on the {args.mechanism} plan in {args.run_dir}"
    )
    return 0
