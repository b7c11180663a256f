"""Gate mutants: a valid plan rewritten as a buggy planner or a hand-edited plan would write it must be blocked by
the expectation that re-derives the broken invariant, and apply must refuse it with nothing changed. Used by
tests/gc/test_gate.py, tests/backlog/test_gate.py and tests/offload/test_gate.py (trim: tests/trim/test_gate.py; expiry:
tests/expiry/test_plan.py; compaction: tests/compaction/test_scenarios.py; holds: tests/e2e/test_holds_and_journal.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from housekeeping.core.errors import PlanNotValidated
from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.plan import read_table
from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, snapshot_step
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.store import Store
from spark_apps import validate_plan
from tests.conftest import restore_table, rewrite_table, table_parts

AS_OF = "2026-11-02T00:00:00Z"


def planned(tmp_path_factory, mechanism: str) -> tuple[Store, Path]:
    """A validated plan of ``mechanism`` on a generated store."""
    from housekeeping.store.generate import GenerateOptions, generate_store

    root = tmp_path_factory.mktemp(f"planned-{mechanism}") / "store"
    store = generate_store(root, GenerateOptions(40, 7, 60, 6, 60, "2026-11-01T00:00:00Z", False), None)
    info = snapshot_step(
        store,
        mechanism,
        run_id=f"mutate-{mechanism}",
        as_of_ms=parse_as_of(AS_OF),
        max_deleted_share=1.0,
        max_deleted_topic_share=1.0,
    )
    assert plan_and_gate_in_process(info.run_dir, mechanism, "local[2]").success
    return store, info.run_dir


def snapshot_topics(run_dir: Path) -> dict[str, dict]:
    from housekeeping.engine.contract import TOPICS
    from housekeeping.engine.snapshot_reads import read_snapshot_table

    return {row["topic"]: row for row in read_snapshot_table(run_dir, TOPICS)}


def kept(run_dir: Path, kind: str) -> str:
    return sorted(b["topic"] for b in read_table(run_dir, "blockers") if b["kind"] == kind)[0]


def delete_topic(topic: str, run_dir: Path) -> dict:
    row = snapshot_topics(run_dir)[topic]
    return {
        "topic": topic,
        "action": "delete_topic",
        "bytes": 0,
        "lastActiveMs": row["lastActiveMs"],
        "reason": "mutant",
    }


def mutate_and_check(planned: tuple[Store, Path], mechanism: str, edit: Callable, failing: str) -> None:
    """Rewrite the plan's actions with ``edit``: the gate fails ``failing`` and apply refuses, nothing changes."""
    store, run_dir = planned
    original = table_parts(run_dir / "plan" / "actions")
    rows = [json.loads(line) for text in original.values() for line in text.splitlines()]
    assert rows, f"{mechanism} plan is empty"
    before = export_manifest(store)
    from housekeeping.mechanisms.steps import local_spark

    try:
        rewrite_table(run_dir / "plan" / "actions", edit(rows, run_dir))
        document = validate_plan.run(local_spark("local[2]"), run_dir, mechanism)
        assert not document.success
        failed = {f.kwargs.get("column") for f in document.failed}
        assert failing in failed, document.failed
        with pytest.raises(PlanNotValidated):
            apply_step(store, run_dir, purge_grace_seconds=0)
        assert export_manifest(store) == before
    finally:
        restore_table(original)  # the next mutant starts from the planner's plan
