"""The shared apply reads a plan's actions a part file at a time (``engine.apply.ActionParts``): each part's topics
as they are read when every topic's rows are in one part (the one-pass planners' buckets) and the part is in topic
order, grouped and sorted when it is not, the whole table as one group when a topic spans parts, the rows applied
after every topic set aside, and a row of a kind the mechanism never plans, or a topic the snapshot does not hold,
refused naming the plan before anything is applied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine import apply
from housekeeping.engine.apply import ActionParts
from housekeeping.engine.contract import ACTIONS, topic_bucket
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.registry import get_mechanism

pytestmark = pytest.mark.unit


def _plan(tmp_path: Path, parts: list[list[dict]]) -> RunDir:
    run = RunDir(tmp_path)
    table = run.plan_table(ACTIONS)
    table.mkdir(parents=True)
    for index, rows in enumerate(parts):
        (table / f"part-{index:05d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _delete(topic: str, ledger: int) -> dict:
    return {"topic": topic, "action": "delete_ledger", "ledgerId": ledger, "bytes": 1, "reason": "r"}


# Every topic the plans below name, as a snapshot's versions (``snapshot_topic_versions``); buckets 0: not clustered.
VERSIONS = {name: 1 for name in ("a", "b", "c", "x")}


def _scan(run: RunDir, mechanism: str = "trim", buckets: int = 0) -> ActionParts:
    return ActionParts.scan(run, get_mechanism(mechanism), VERSIONS, buckets)


def _groups(plan: ActionParts) -> list[list[tuple[str, list[int]]]]:
    return [[(topic, [r["ledgerId"] for r in rows]) for topic, rows in part] for part in plan.by_topic()]


def test_each_part_is_read_on_its_own_when_every_topic_is_in_one_part(tmp_path):
    run = _plan(tmp_path, [[_delete("a", 1), _delete("a", 2), _delete("b", 1)], [], [_delete("c", 5)]])
    plan = _scan(run)
    assert (plan.rows, plan.acted_on, plan.one_part_per_topic) == (4, 3, True)
    assert plan.in_topic_order == (True, True, True)
    assert _groups(plan) == [[("a", [1, 2]), ("b", [1])], [], [("c", [5])]]


def test_a_part_out_of_topic_order_is_grouped_and_sorted_before_it_is_applied(tmp_path):
    run = _plan(tmp_path, [[_delete("b", 1), _delete("a", 1), _delete("b", 2)], [_delete("c", 5)]])
    plan = _scan(run)
    assert (plan.acted_on, plan.one_part_per_topic, plan.in_topic_order) == (3, True, (False, True))
    assert _groups(plan) == [[("a", [1]), ("b", [1, 2])], [("c", [5])]]


def test_a_topic_in_two_parts_makes_the_whole_table_one_group(tmp_path):
    run = _plan(tmp_path, [[_delete("a", 1), _delete("b", 1)], [_delete("a", 2)]])
    plan = _scan(run)
    assert not plan.one_part_per_topic and plan.acted_on == 2
    assert _groups(plan) == [[("a", [1, 2]), ("b", [1])]]


def test_parts_of_a_bucket_each_need_no_set_of_every_topic_and_parts_sharing_one_are_checked_topic_by_topic(
    tmp_path, monkeypatch
):
    assert topic_bucket("a", 64) != topic_bucket("b", 64)
    apart = _plan(tmp_path / "apart", [[_delete("a", 1)], [_delete("b", 1), _delete("b", 2)]])
    spanning = _plan(tmp_path / "spanning", [[_delete("a", 1)], [_delete("a", 2)]])
    # With one bucket, both parts hold it: whether a topic spans them is found by name, either way.
    assert _scan(apart, buckets=1).one_part_per_topic
    assert not _scan(spanning, buckets=1).one_part_per_topic

    def every_topic(*args):
        raise AssertionError("a set of every topic was built")

    monkeypatch.setattr(apply, "_topics_across_parts", every_topic)
    plan = _scan(apart, buckets=64)
    assert (plan.one_part_per_topic, plan.acted_on) == (True, 2)


def test_rows_applied_after_every_topic_are_set_aside(tmp_path):
    metadata = {"topic": "persistent://p/n/pt", "action": "delete_partitioned_metadata", "reason": "r"}
    run = _plan(tmp_path, [[{"topic": "x", "action": "delete_topic", "reason": "r"}], [metadata]])
    plan = _scan(run, "gc")
    assert plan.after == [metadata] and plan.acted_on == 2
    assert [[topic for topic, _ in part] for part in plan.by_topic()] == [["x"], []]


def test_a_kind_the_mechanism_never_plans_is_bad_input_naming_the_plan(tmp_path):
    run = _plan(tmp_path, [[_delete("a", 1)], [{"topic": "a", "action": "delete_topic", "reason": "r"}]])
    with pytest.raises(InputError, match=f"plan in {run} has a delete_topic action, which trim never plans"):
        _scan(run)


def test_a_topic_the_snapshot_does_not_hold_is_bad_input_naming_it(tmp_path):
    run = _plan(tmp_path, [[_delete("a", 1)], [_delete("persistent://t/n/gone", 1)]])
    with pytest.raises(InputError, match="names topic persistent://t/n/gone, which is not in its snapshot"):
        _scan(run)


def test_a_row_naming_no_topic_is_bad_input_naming_the_plan(tmp_path):
    run = _plan(tmp_path, [[_delete("a", 1), {"action": "delete_ledger", "ledgerId": 2, "reason": "r"}]])
    with pytest.raises(InputError, match=f"plan in {run} has a delete_ledger row naming no topic"):
        _scan(run)
