"""A run's figures as Airflow sees them: the store Asset's event extra of an apply that changed something (none for
one that changed nothing), and the one line a task log prints."""

from __future__ import annotations

import json

import pytest

from housekeeping.engine.contract import LEDGERS, NAMESPACES
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.run_dir import RunDir, write_json
from housekeeping.observe.run_figures import describe, describe_purge, run_figures, store_change

pytestmark = pytest.mark.unit


def _run(tmp_path, applied: dict | None) -> RunDir:
    run = RunDir(tmp_path / "run")
    run.snapshot_dir.mkdir(parents=True)
    write_json(
        run.run_info,
        {
            "runId": "r-1",
            "mechanism": "trim",
            "asOfMs": 1_793_491_200_000,
            "asOf": "2026-11-01T00:00:00.000Z",
        },
    )
    write_parquet(run.snapshot_table(LEDGERS), LEDGERS, [])
    write_parquet(run.snapshot_table(NAMESPACES), NAMESPACES, [])
    actions = run.plan_table("actions")
    actions.mkdir(parents=True)
    rows = [
        {
            "topic": "persistent://a/b/t",
            "action": "delete_ledger",
            "ledgerId": 1,
            "bytes": 600,
            "reason": "r",
        },
        {"topic": "persistent://a/b/u", "action": "delete_ledger", "ledgerId": 2, "bytes": 50, "reason": "r"},
    ]
    (actions / "part-00000.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    write_json(
        run.gate_result, {"mechanism": "trim", "success": True, "planDigest": None, "expectations": []}
    )
    if applied is not None:
        write_json(run.apply_result, applied)
    return run


# One of the run's two planned topics applied.
APPLIED = {"runId": "r-1", "appliedTopics": ["persistent://a/b/t"], "ledgersDeleted": 1, "bytesDeleted": 600}


def test_an_apply_that_changed_the_store_carries_its_figures_and_one_that_changed_nothing_none(tmp_path):
    run = _run(tmp_path, APPLIED)
    assert store_change(run) == {
        "mechanism": "trim",
        "runId": "r-1",
        "asOf": "2026-11-01T00:00:00.000Z",
        "topicsChanged": 1,
        "ledgersDeleted": 1,
        "topicsDeleted": 0,
        "bytesDeleted": 600,
        "bytesFreed": 600,  # only the applied topic's planned bytes
        "cursorsMoved": 0,
    }
    write_json(run.apply_result, {"runId": "r-1", "appliedTopics": [], "ledgersDeleted": 0})
    assert store_change(run) is None
    assert store_change(_run(tmp_path / "dry", None)) is None


def test_a_run_reads_as_one_line(tmp_path):
    run = _run(tmp_path, APPLIED)
    line = describe(run_figures(run, dry_run=False))
    assert line.startswith(
        "2 actions planned, gate passed; 1 ledgers and 0 topics deleted (600 B, 600 B freed)"
    )
    assert "\n" not in line
    assert describe(run_figures(run, dry_run=True)) == "dry run: 2 actions planned (650 B), none applied"


def test_a_missed_deadline_names_the_run_from_what_airflow_passes():
    from housekeeping.orchestration.alerts import deadline_alert

    context = {
        "dag_run": {"dag_id": "consumed_ledger_trim", "dag_run_id": "manual__x", "state": "running",
                    "queued_at": "2026-11-28T04:00:00Z"},
        "deadline": {"id": "d-1", "deadline_time": "2026-11-28T07:00:00Z"},
    }  # fmt: skip
    alert = deadline_alert("trim", 10800, context)
    assert (alert["dagId"], alert["runId"], alert["state"], alert["deadlineSeconds"]) == (
        "consumed_ledger_trim", "manual__x", "running", 10800,
    )  # fmt: skip


def test_a_purge_reads_as_one_line():
    line = describe_purge(
        {"purged": ["persistent://a/b/t:1", "persistent://a/b/t:2"], "topicsPurged": ["persistent://a/b/t"],
         "bytesPurged": 3072, "waiting": 4, "nextPurgeAfterMs": 1_793_577_600_000, "held": ["persistent://a/c/u:7"],
         "refused": [], "failed": {}, "retained": {}}
    )  # fmt: skip
    assert line == (
        "2 files of 1 topics removed (3.0 KiB); 4 still wait for their grace period, the next due at "
        "2026-11-02T00:00:00.000Z; 1 held by a hold"
    )
