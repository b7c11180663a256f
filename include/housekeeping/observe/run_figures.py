"""A DAG run's figures, emitted through Airflow's own metrics path (``[metrics]`` StatsD or OpenTelemetry settings):
where Airflow's metrics are already collected, these arrive with them and nothing else is needed.

Read from the run directory once the report is written (the last task): what the plan held, the gate's verdict,
what apply and purge did. Names are ``housekeeping.<mechanism>.<figure>`` (StatsD; a StatsD exporter maps them to
``housekeeping_<mechanism>_<figure>`` for Prometheus); docs/metrics.md lists them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from housekeeping.engine.contract import ACTIONS
from housekeeping.engine.documents import (
    PurgedRun,
    read_applied_run,
    read_gate_result,
    read_purged_run,
    read_run_info,
)
from housekeeping.engine.plan import table_batches
from housekeeping.engine.report import human_bytes, sparse_batch_rows
from housekeeping.engine.run_dir import RunDir, read_json
from housekeeping.mechanisms.registry import get_mechanism


class StatsClient(Protocol):
    def incr(
        self, stat: str, count: int | None = None, rate: float | None = None, *, tags: Any = None
    ) -> None: ...

    def gauge(
        self,
        stat: str,
        value: float,
        rate: float | None = None,
        delta: bool | None = None,
        *,
        tags: Any = None,
    ) -> None: ...


def run_figures(run_dir: str | Path, *, dry_run: bool | None = None) -> dict[str, dict[str, float]]:
    """``{"counters": {...}, "gauges": {...}}`` of one run, by figure name (without the mechanism prefix).
    Counters are added once per run (a retried report task adds them again: the journal-based figures of
    ``housekeeping metrics`` are the exact record); gauges are the latest run's. ``dry_run``: whether the run was
    one, when the caller knows (the DAG does); else read from the run's report."""
    run = RunDir(run_dir)
    info = read_run_info(run)
    spec = get_mechanism(info.mechanism)
    gate = read_gate_result(run)
    applied_run, purged_run = read_applied_run(run), read_purged_run(run)
    applied = applied_run.figures if applied_run is not None else {}
    applied_topics = set(applied_run.applied_topics if applied_run is not None else ())
    topics_deleted = len(applied.get("topicsDeleted") or [])
    # One pass over the plan's actions, a batch at a time, never a list of every action nor the report's JSON
    # parsed whole: a run of many topics would hold them all for a few figures.
    planned = planned_bytes = applied_bytes = 0
    if run.plan_table(ACTIONS).is_dir():
        for action in sparse_batch_rows(table_batches(run.path, ACTIONS)):
            planned += 1
            kind = spec.action(action["action"])
            if kind.deletes_data:  # a local copy's bytes are not among the bytes freed: the data stays
                freed = kind.freed_bytes(action)
                planned_bytes += freed
                applied_bytes += freed if action.get("topic") in applied_topics else 0
    if dry_run is None:
        dry_run = bool((read_json(run.report_json) or {}).get("dryRun"))
    counters = {
        "runs": 1.0,
        "ledgers_deleted": float(applied.get("ledgersDeleted") or 0),
        "bytes_deleted": float(applied.get("bytesDeleted") or 0),
        "bytes_freed": float(applied_bytes),
        "cursors_moved": float(applied.get("cursorsMoved") or 0),
        "topics_deleted": float(topics_deleted),
        "topics_skipped": float(len(applied_run.skipped_topics) if applied_run is not None else 0),
        "bytes_purged": float(purged_run.bytes_purged if purged_run is not None else 0),
    }
    gauges = {
        "planned_actions": float(planned),
        "planned_bytes": float(planned_bytes),
        "gate_passed": float(gate is not None and gate.success),
        "dry_run": float(dry_run),
        "as_of_timestamp_seconds": info.as_of_ms / 1000,
    }
    return {"counters": counters, "gauges": gauges}


def emit_run_figures(
    run_dir: str | Path, stats: StatsClient, *, dry_run: bool | None = None
) -> dict[str, dict[str, float]]:
    """Send the run's figures through ``stats`` (Airflow's ``airflow.sdk.observability.stats``)."""
    mechanism = read_run_info(run_dir).mechanism
    figures = run_figures(run_dir, dry_run=dry_run)
    for name, value in figures["counters"].items():
        if value:
            stats.incr(f"housekeeping.{mechanism}.{name}", count=int(value))
    for name, value in figures["gauges"].items():
        stats.gauge(f"housekeeping.{mechanism}.{name}", value)
    return figures


def store_change(run_dir: str | Path) -> dict[str, Any] | None:
    """What an applied run changed in the store, as its Asset event's ``extra`` (the storage report's trigger);
    None when apply changed nothing (no topic applied), so such a run emits no event."""
    run = RunDir(run_dir)
    applied = read_applied_run(run)
    if applied is None or not applied.applied_topics:
        return None
    info = read_run_info(run)
    counters = run_figures(run, dry_run=False)["counters"]
    return {
        "mechanism": info.mechanism,
        "runId": info.run_id,
        "asOf": info.as_of,
        "topicsChanged": len(applied.applied_topics),
        **{name: int(counters[key]) for name, key in _EXTRA.items()},
    }


def describe(figures: dict[str, dict[str, float]]) -> str:
    """A run's figures as one line a person reads in a task log."""
    c, g = figures["counters"], figures["gauges"]
    if g["dry_run"]:
        return f"dry run: {int(g['planned_actions'])} actions planned ({human_bytes(g['planned_bytes'])}), none applied"
    return (
        f"{int(g['planned_actions'])} actions planned, gate {'passed' if g['gate_passed'] else 'REJECTED'}; "
        f"{int(c['ledgers_deleted'])} ledgers and {int(c['topics_deleted'])} topics deleted "
        f"({human_bytes(c['bytes_deleted'])}, {human_bytes(c['bytes_freed'])} freed), {int(c['cursors_moved'])} "
        f"cursors moved, {int(c['topics_skipped'])} topics skipped; purge removed {human_bytes(c['bytes_purged'])}"
    )


# The Asset event's figures: extra key -> run figure.
_EXTRA = {
    "ledgersDeleted": "ledgers_deleted",
    "topicsDeleted": "topics_deleted",
    "bytesDeleted": "bytes_deleted",
    "bytesFreed": "bytes_freed",
    "cursorsMoved": "cursors_moved",
}


def describe_purge(result: dict[str, Any]) -> str:
    """What a purge did, as one line a person reads in a task log."""
    from housekeeping.core.timeutil import format_ms

    purged = PurgedRun.from_json(result)
    kept = [
        f"{len(items)} {what}"
        for what, items in (
            ("held by a hold", purged.held),
            ("kept by retention", purged.retained),
            ("refused", purged.refused),
            ("failed (retried by the next purge)", purged.failed),
        )
        if items
    ]
    due = f", the next due at {format_ms(purged.next_purge_after_ms)}" if purged.next_purge_after_ms else ""
    return (
        f"{len(purged.purged)} files of {len(purged.topics_purged)} topics removed "
        f"({human_bytes(purged.bytes_purged)}); {purged.waiting} still wait for their grace period{due}"
        + (f"; {', '.join(kept)}" if kept else "")
    )
