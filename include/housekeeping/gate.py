"""The quality gate's runner: Great Expectations suites over Spark DataFrames, with an ephemeral context.

Each mechanism's gate builds *check frames* (one row per planned action, with boolean columns that
re-derive an invariant from the snapshot) and a suite per frame; this module validates them, writes
``gate/result.json`` (success, the plan digest it signed, every expectation's outcome with a sample of
the offending rows) and says whether apply may run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from housekeeping.errors import GateRejected, PlanNotValidated
from housekeeping.plan import plan_digest

RESULT_FILE = "result.json"


@dataclass
class CheckFrame:
    """A DataFrame to validate and the expectations (GX Expectation objects) it must meet."""

    name: str
    frame: Any  # pyspark.sql.DataFrame
    expectations: list[Any] = field(default_factory=list)


def must_be_true(*columns: str) -> list[Any]:
    import great_expectations.expectations as gxe

    return [gxe.ExpectColumnValuesToBeInSet(column=column, value_set=[True]) for column in columns]


def run_gate(run_dir: Path, mechanism: str, checks: list[CheckFrame]) -> dict[str, Any]:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx

    context = gx.get_context(mode="ephemeral")
    try:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
    except Exception:  # cosmetic only
        pass
    source = context.data_sources.add_spark(name=f"{mechanism}_gate")
    outcomes: list[dict[str, Any]] = []
    for check in checks:
        asset = source.add_dataframe_asset(name=check.name)
        batch = asset.add_batch_definition_whole_dataframe("whole").get_batch(
            batch_parameters={"dataframe": check.frame}
        )
        suite = gx.ExpectationSuite(name=f"{mechanism}_{check.name}")
        for expectation in check.expectations:
            suite.add_expectation(expectation)
        result = batch.validate(
            suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": 10}
        )
        for item in result.results:
            config = item.expectation_config
            outcomes.append(
                {
                    "frame": check.name,
                    "expectation": config.type,
                    "kwargs": {k: v for k, v in config.kwargs.items() if k != "batch_id"},
                    "success": bool(item.success),
                    "rows": int(item.result.get("element_count", 0) or 0),
                    "unexpectedCount": int(item.result.get("unexpected_count", 0) or 0),
                    "unexpectedSample": item.result.get("partial_unexpected_list", [])[:10],
                    "observed": item.result.get("observed_value"),
                }
            )
    success = all(o["success"] for o in outcomes)
    document = {
        "mechanism": mechanism,
        "success": success,
        "planDigest": plan_digest(run_dir),
        "expectations": outcomes,
        "failed": [o for o in outcomes if not o["success"]],
    }
    gate_dir = Path(run_dir) / "gate"
    gate_dir.mkdir(parents=True, exist_ok=True)
    (gate_dir / RESULT_FILE).write_text(
        json.dumps(document, indent=2, sort_keys=True, default=str), encoding="utf-8"
    )
    return document


def describe_failures(document: dict[str, Any]) -> str:
    lines = []
    for failure in document["failed"]:
        column = failure["kwargs"].get("column") or failure["kwargs"].get("column_list")
        lines.append(
            f"  {failure['frame']}: {failure['expectation']}({column}) failed on "
            f"{failure['unexpectedCount']} of {failure['rows']} rows; sample {failure['unexpectedSample'][:3]}"
        )
    return "\n".join(lines)


def raise_if_rejected(document: dict[str, Any], run_dir: Path) -> None:
    if not document["success"]:
        raise GateRejected(
            f"gate rejected the {document['mechanism']} plan in {run_dir}; nothing was applied:\n"
            + describe_failures(document)
        )


def require_passed_gate(run_dir: Path) -> dict[str, Any]:
    """Apply's precondition: the gate passed *this* plan, byte for byte."""
    path = Path(run_dir) / "gate" / RESULT_FILE
    if not path.is_file():
        raise PlanNotValidated(
            f"plan in {run_dir} was never validated by the gate ({path} is missing); refusing to apply"
        )
    document = json.loads(path.read_text(encoding="utf-8"))
    if not document.get("success"):
        raise PlanNotValidated(
            f"the gate rejected the plan in {run_dir}; refusing to apply:\n" + describe_failures(document)
        )
    current = plan_digest(run_dir)
    if current != document.get("planDigest"):
        raise PlanNotValidated(
            f"plan in {run_dir} changed after the gate validated it (digest {current[:12]} != "
            f"{str(document.get('planDigest'))[:12]}); refusing to apply"
        )
    return document
