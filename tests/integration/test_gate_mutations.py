"""Gate strength for inactive-topic GC and backlog-quota eviction: mutated plans (what a buggy planner or a
hand-edited plan would produce) are each blocked by the expectation that re-derives the broken invariant, and
apply refuses the plan with nothing changed. Trim mutants: tests/spark/test_gate.py; expiry:
tests/spark/test_plan_expiry.py; compaction: tests/integration/test_compaction_scenarios.py; holds (every
mechanism): tests/integration/test_holds_and_journal.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from housekeeping.errors import PlanNotValidated
from housekeeping.manifest import export_manifest
from housekeeping.plan import read_table
from housekeeping.runner import apply_step, plan_and_gate_in_process
from housekeeping.snapshot import take_snapshot
from housekeeping.store import Store
from housekeeping.timeutil import parse_as_of
from spark_apps import validate_plan
from tests.conftest import rewrite_part

pytestmark = pytest.mark.spark

AS_OF = "2026-11-02T00:00:00Z"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    from housekeeping.generate import GenerateOptions, generate_store

    root = tmp_path_factory.mktemp("mutations") / "store"
    generate_store(root, GenerateOptions(40, 7, 60, 6, 60, "2026-11-01T00:00:00Z", False), None)
    return root


@pytest.fixture(scope="module")
def planned(template, tmp_path_factory) -> dict[str, tuple[Store, Path]]:
    """One validated plan per mechanism, each on its own copy of the store."""
    plans = {}
    for mechanism in ("gc", "backlog"):
        root = tmp_path_factory.mktemp(f"planned-{mechanism}") / "store"
        shutil.copytree(template, root)
        store = Store.open(root)
        info = take_snapshot(
            store,
            mechanism=mechanism,
            run_id=f"mutate-{mechanism}",
            as_of_ms=parse_as_of(AS_OF),
            max_deleted_share=1.0,
            max_deleted_topic_share=1.0,
        )
        assert plan_and_gate_in_process(info.run_dir, mechanism, "local[2]")["success"]
        plans[mechanism] = (store, info.run_dir)
    return plans


def _snapshot_topics(run_dir: Path) -> dict[str, dict]:
    path = run_dir / "snapshot" / "topics.jsonl"
    return {row["topic"]: row for row in map(json.loads, path.read_text().splitlines())}


def _kept(run_dir: Path, kind: str) -> str:
    return sorted(b["topic"] for b in read_table(run_dir, "blockers") if b["kind"] == kind)[0]


def _delete_topic(topic: str, run_dir: Path) -> dict:
    row = _snapshot_topics(run_dir)[topic]
    return {
        "topic": topic,
        "action": "delete_topic",
        "bytes": 0,
        "lastActiveMs": row["lastActiveMs"],
        "reason": "mutant",
    }


GC_MUTANTS: dict[str, tuple[Callable[[list[dict], Path], list[dict]], str]] = {
    "deletes a topic with subscriptions": (
        lambda rows, run_dir: rows + [_delete_topic(_kept(run_dir, "subscriptions"), run_dir)],
        "no_subscription_keeps_it_active",
    ),
    "deletes a system topic": (
        lambda rows, run_dir: rows + [_delete_topic("persistent://public/default/__change_events", run_dir)],
        "not_system_topic",
    ),
    "deletes a topic that retention time -1 keeps forever": (
        lambda rows, run_dir: rows + [_delete_topic(_kept(run_dir, "retention_time_infinite"), run_dir)],
        "retention_time_does_not_keep_it",
    ),
    "deletes a topic whose subscriptions have a backlog": (
        lambda rows, run_dir: rows + [_delete_topic(_kept(run_dir, "backlog"), run_dir)],
        "no_subscription_keeps_it_active",
    ),
    "lastActive differs from the snapshot": (
        lambda rows, run_dir: [
            dict(r, lastActiveMs=(r["lastActiveMs"] or 0) + 1) if r["action"] == "delete_topic" else r
            for r in rows
        ],
        "last_active_matches_snapshot",
    ),
    "bytes do not reconcile": (
        lambda rows, run_dir: [dict(r, bytes=1) if r["action"] == "delete_topic" else r for r in rows],
        "bytes_match_snapshot",
    ),
}

BACKLOG_MUTANTS: dict[str, tuple[Callable[[list[dict], Path], list[dict]], str]] = {
    "moves a cursor backward": (
        lambda rows, run_dir: [dict(r, to="0:0") if r["action"] == "move_cursor" else r for r in rows],
        "moves_forward",
    ),
    "moves a cursor past the topic's end": (
        lambda rows, run_dir: [
            dict(r, to="999999999:0") if r["action"] == "move_cursor" else r for r in rows
        ],
        "not_past_last_entry",
    ),
    "moves a cursor before a ledger the topic does not have": (
        lambda rows, run_dir: [
            dict(r, to="999999999:-1") if r["action"] == "move_cursor" else r for r in rows
        ],
        "not_past_last_entry",
    ),
    "moves a cursor from a stale position": (
        lambda rows, run_dir: [
            dict(r, **{"from": "0:0"}) if r["action"] == "move_cursor" else r for r in rows
        ],
        "from_is_current_mark_delete",
    ),
    "evicts a subscription that does not exist": (
        lambda rows, run_dir: [
            dict(r, subscription="ghost") if r["action"] == "move_cursor" else r for r in rows
        ],
        "cursor_in_snapshot",
    ),
}


def _mutate_and_check(planned, mechanism: str, edit: Callable, failing: str) -> None:
    store, run_dir = planned[mechanism]
    part = next((run_dir / "plan" / "actions").glob("part-*"))
    original = part.read_text()
    rows = [json.loads(line) for line in original.splitlines()]
    assert any(r["action"] in ("delete_topic", "move_cursor") for r in rows), f"{mechanism} plan is empty"
    before = export_manifest(store)
    from housekeeping.runner import local_spark

    try:
        rewrite_part(part, "".join(json.dumps(r) + "\n" for r in edit(rows, run_dir)))
        document = validate_plan.run(local_spark("local[2]"), run_dir, mechanism)
        assert not document["success"]
        failed = {f["kwargs"].get("column") for f in document["failed"]}
        assert failing in failed, document["failed"]
        with pytest.raises(PlanNotValidated):
            apply_step(store, run_dir, purge_grace_seconds=0)
        assert export_manifest(store) == before
    finally:
        rewrite_part(part, original)  # the next mutant starts from the planner's plan


@pytest.mark.parametrize("name", sorted(GC_MUTANTS))
def test_gc_gate_blocks_each_mutated_plan_and_nothing_changes(planned, name):
    _mutate_and_check(planned, "gc", *GC_MUTANTS[name])


@pytest.mark.parametrize("name", sorted(BACKLOG_MUTANTS))
def test_backlog_gate_blocks_each_mutated_plan_and_nothing_changes(planned, name):
    _mutate_and_check(planned, "backlog", *BACKLOG_MUTANTS[name])
