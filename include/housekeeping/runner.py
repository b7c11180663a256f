"""Run steps shared by the DAG tasks and the CLI: snapshot -> (Spark plan, Spark gate) -> apply -> purge ->
report. Each step reads and writes only the run directory and the store, so any step can be rerun; what differs
per mechanism comes from its spec (``housekeeping.registry``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping import launcher
from housekeeping.apply import apply_plan
from housekeeping.contract import RunDir, read_run_info, write_json
from housekeeping.faults import checkpoint
from housekeeping.purge import purge
from housekeeping.registry import mechanism_spec
from housekeeping.report import write_report
from housekeeping.store import Store


def apply_step(store: Store, run_dir: Path, *, purge_grace_seconds: int) -> dict[str, Any]:
    spec = mechanism_spec(read_run_info(run_dir)["mechanism"])
    if spec.apply_app is not None:
        # The DAG submits the same app; the CLI runs it in-process.
        from housekeeping.settings import Settings

        spark = local_spark(Settings.from_env().spark_master)
        return launcher.apply_in_process(spark, Path(run_dir), spec, store, purge_grace_seconds)
    if spec.library_apply is not None:
        return launcher.library_apply(spec)(store, Path(run_dir), purge_grace_seconds=purge_grace_seconds)
    return apply_plan(store, Path(run_dir), purge_grace_seconds=purge_grace_seconds).to_json()


def purge_step(store: Store, run_dir: Path) -> dict[str, Any]:
    info = read_run_info(run_dir)
    result = purge(
        store, as_of_ms=int(info["asOfMs"]), run_id=info["runId"], actor=info.get("actor")
    ).to_json()
    write_json(RunDir(run_dir).purge_result, result)
    return result


def report_step(run_dir: Path, *, dry_run: bool) -> Path:
    spec = mechanism_spec(read_run_info(run_dir)["mechanism"])
    return write_report(Path(run_dir), spec, dry_run=dry_run)


def local_spark(master: str):
    """The CLI's in-process Spark: the same apps' ``run`` functions the DAG's spark-submit calls."""
    return launcher.local_spark(master)


def plan_and_gate_in_process(run_dir: Path, mechanism: str, master: str, spark: Any = None) -> dict[str, Any]:
    """``spark``: a session the caller already has (a Spark app's); else this process's local one."""
    spec = mechanism_spec(mechanism)
    spark = spark or local_spark(master)
    launcher.plan_in_process(spark, Path(run_dir), spec)
    checkpoint("plan_after_write")
    return launcher.gate_in_process(spark, Path(run_dir), spec)
