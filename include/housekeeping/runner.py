"""Run steps shared by the DAG tasks and the CLI: snapshot -> (Spark plan, Spark gate) -> apply -> purge
-> report. Each step reads and writes only the run directory and the store, so any step can be rerun."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from housekeeping.apply import apply_plan, purge
from housekeeping.faults import checkpoint
from housekeeping.report import write_report
from housekeeping.snapshot import read_run_info
from housekeeping.store import Store


def apply_step(store: Store, run_dir: Path, *, purge_grace_seconds: int) -> dict[str, Any]:
    if read_run_info(run_dir)["mechanism"] == "compaction":
        # Compaction writes ledgers with Spark (the DAG submits the same app); the CLI runs it in-process.
        from housekeeping.settings import Settings
        from spark_apps import apply_compaction

        spark = local_spark(Settings.from_env().spark_master)
        return apply_compaction.run(spark, run_dir, store, purge_grace_seconds)
    result = apply_plan(store, run_dir, purge_grace_seconds=purge_grace_seconds).to_json()
    out = Path(run_dir) / "apply"
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(result, indent=2, sort_keys=True), encoding="utf-8")
    return result


def purge_step(store: Store, run_dir: Path) -> dict[str, Any]:
    info = read_run_info(run_dir)
    result = purge(
        store, as_of_ms=int(info["asOfMs"]), run_id=info["runId"], actor=info.get("actor")
    ).to_json()
    out = Path(run_dir) / "apply"
    out.mkdir(parents=True, exist_ok=True)
    (out / "purge.json").write_text(json.dumps(result, indent=2, sort_keys=True), encoding="utf-8")
    return result


def report_step(run_dir: Path, *, dry_run: bool) -> Path:
    return write_report(Path(run_dir), dry_run=dry_run)


def local_spark(master: str):
    """The CLI's in-process Spark: the same apps' ``run`` functions the DAG's spark-submit calls."""
    from spark_apps.common import get_spark

    return get_spark("housekeeping-cli", master)


def plan_and_gate_in_process(run_dir: Path, mechanism: str, master: str) -> dict[str, Any]:
    from spark_apps import plan_backlog, plan_compaction, plan_expiry, plan_gc, plan_trim, validate_plan

    spark = local_spark(master)
    planners = {
        "trim": plan_trim.run,
        "expiry": plan_expiry.run,
        "backlog": plan_backlog.run,
        "gc": plan_gc.run,
        "compaction": plan_compaction.run,
    }
    planners[mechanism](spark, run_dir)
    checkpoint("plan_after_write")
    return validate_plan.run(spark, run_dir, mechanism)
