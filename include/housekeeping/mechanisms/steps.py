"""A run's steps, shared by the DAG's tasks and the CLI: snapshot -> (Spark plan, Spark gate) -> apply -> purge ->
report. Each step reads and writes only the run directory and the store, so any step can be rerun; the mechanism
comes from the registry (by the name the caller gives, or the one ``run.json`` records) and does what differs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from housekeeping.core.settings import Settings
from housekeeping.engine import launcher
from housekeeping.engine.documents import Intent, PurgedRun, read_run_info, write_document
from housekeeping.engine.faults import checkpoint
from housekeeping.engine.gate import start_loading_great_expectations
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.purge import purge
from housekeeping.engine.report import write_report
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot import SnapshotInfo, take_snapshot
from housekeeping.mechanisms.registry import build_request, get_mechanism
from housekeeping.store.store import Store


def mechanism_of(run_dir: Path) -> Mechanism:
    """The mechanism a run directory's ``run.json`` names."""
    return get_mechanism(read_run_info(run_dir).mechanism)


def snapshot_step(
    store: Store,
    mechanism: str,
    *,
    run_id: str,
    as_of_ms: int,
    values: Mapping[str, Any] | None = None,
    scope: Any = None,
    settings: Settings | None = None,
    run_dir: Path | None = None,
    actor: str | None = None,
    schedule_interval_ms: int | None = None,
    policy_overlay: Any = None,
    intent: Intent = Intent.APPLY,
    preview_reason: str | None = None,
    **options: Any,
) -> SnapshotInfo:
    """The run's request (``registry.build_request``: ``values`` and ``options`` by param name, e.g.
    ``max_deleted_share``, ``compact_topics``), then its snapshot (``policy_overlay``: a what-if's)."""
    request = build_request(
        mechanism,
        run_id=run_id,
        as_of_ms=as_of_ms,
        settings=settings,
        values={**(values or {}), **options},
        scope=scope,
        schedule_interval_ms=schedule_interval_ms,
        actor=actor,
        intent=intent,
        preview_reason=preview_reason,
    )
    return take_snapshot(store, request, run_dir=run_dir, policy_overlay=policy_overlay)


def start_local_spark(master: str) -> Any:
    """This process's local Spark session, started with Great Expectations' import beside it: the JVM's launch is
    waited on with the GIL released, and the import is most of a cold gate's fixed cost
    (``gate.start_loading_great_expectations``)."""
    # What both threads import, imported here first: the loader then imports only Great Expectations' own.
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark.sql  # noqa: F401

    start_loading_great_expectations()
    return local_spark(master)


def plan_and_gate_in_process(run_dir: Path, mechanism: str, master: str, spark: Any = None) -> dict[str, Any]:
    """``spark``: a session the caller already has (a Spark app's); else this process's local one
    (:func:`start_local_spark`)."""
    spec = get_mechanism(mechanism)
    spark = spark or start_local_spark(master)
    launcher.plan_in_process(spark, Path(run_dir), spec)
    checkpoint("plan_after_write")
    return launcher.gate_in_process(spark, Path(run_dir), spec)


def apply_step(store: Store, run_dir: Path, *, purge_grace_seconds: int | None = None) -> dict[str, Any]:
    """Apply the run's checked plan as its mechanism does (``Mechanism.apply``); the grace period is the
    mechanism's (``Mechanism.purge_grace_seconds``) unless given."""
    spec = mechanism_of(run_dir)
    settings = Settings.from_env()
    grace = spec.purge_grace_seconds(settings) if purge_grace_seconds is None else purge_grace_seconds
    return spec.apply(store, Path(run_dir), purge_grace_seconds=grace, spark_master=settings.spark_master)


def purge_step(store: Store, run_dir: Path) -> dict[str, Any]:
    info = read_run_info(run_dir)
    purged = purge(store, as_of_ms=int(info.as_of_ms), run_id=info.run_id, actor=info.actor)
    result = purged.to_json()
    write_document(RunDir(run_dir).purge_result, PurgedRun.from_json(result))
    purged.raise_on_failures()
    return result


def report_step(run_dir: Path, *, dry_run: bool) -> Path:
    return write_report(Path(run_dir), mechanism_of(run_dir), dry_run=dry_run)


def local_spark(master: str) -> Any:
    """The CLI's in-process Spark: the same apps' ``run`` functions the DAG's spark-submit calls."""
    return launcher.local_spark(master)
