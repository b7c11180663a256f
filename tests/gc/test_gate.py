"""Gate strength for inactive-topic GC: mutated plans are each blocked by the expectation that re-derives the
broken invariant, and apply refuses them with nothing changed (tests/gate_mutants.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.gate_mutants import delete_topic, kept, mutate_and_check, planned

pytestmark = [pytest.mark.spark, pytest.mark.runs]


@pytest.fixture(scope="module")
def planned_gc(tmp_path_factory):
    return planned(tmp_path_factory, "gc")


GC_MUTANTS: dict[str, tuple[Callable[[list[dict], Path], list[dict]], str]] = {
    "deletes a topic with subscriptions": (
        lambda rows, run_dir: rows + [delete_topic(kept(run_dir, "subscriptions"), run_dir)],
        "no_subscription_keeps_it_active",
    ),
    "deletes a system topic": (
        lambda rows, run_dir: rows + [delete_topic("persistent://public/default/__change_events", run_dir)],
        "not_system_topic",
    ),
    "deletes a topic that retention time -1 keeps forever": (
        lambda rows, run_dir: rows + [delete_topic(kept(run_dir, "retention_time_infinite"), run_dir)],
        "retention_time_does_not_keep_it",
    ),
    "deletes a topic whose subscriptions have a backlog": (
        lambda rows, run_dir: rows + [delete_topic(kept(run_dir, "backlog"), run_dir)],
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


@pytest.mark.parametrize("name", sorted(GC_MUTANTS))
def test_gc_gate_blocks_each_mutated_plan_and_nothing_changes(planned_gc, name):
    mutate_and_check(planned_gc, "gc", *GC_MUTANTS[name])
