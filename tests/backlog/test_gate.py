"""Gate strength for backlog-quota eviction: mutated plans are each blocked by the expectation that re-derives
the broken invariant, and apply refuses them with nothing changed (tests/gate_mutants.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.gate_mutants import mutate_and_check, planned

pytestmark = [pytest.mark.spark, pytest.mark.runs]


@pytest.fixture(scope="module")
def planned_backlog(tmp_path_factory):
    return planned(tmp_path_factory, "backlog")


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


@pytest.mark.parametrize("name", sorted(BACKLOG_MUTANTS))
def test_backlog_gate_blocks_each_mutated_plan_and_nothing_changes(planned_backlog, name):
    mutate_and_check(planned_backlog, "backlog", *BACKLOG_MUTANTS[name])
