"""The shared apply reads a plan's actions a part file at a time (``engine.apply.ActionParts``): each part's topics
grouped on their own when every topic's rows are in one part (the one-pass planners' buckets), the whole table as
one group when a topic spans parts, the rows applied after every topic set aside, and a row of a kind the mechanism
never plans refused naming the plan before anything is grouped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine.apply import ActionParts
from housekeeping.engine.contract import ACTIONS, RunDir
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


def test_each_part_is_a_group_of_its_own_when_every_topic_is_in_one_part(tmp_path):
    run = _plan(tmp_path, [[_delete("a", 1), _delete("b", 1), _delete("a", 2)], [], [_delete("c", 5)]])
    plan = ActionParts.scan(run, get_mechanism("trim"))
    assert (plan.rows, plan.topics, plan.one_part_per_topic) == (4, {"a", "b", "c"}, True)
    groups = [{topic: [r["ledgerId"] for r in rows] for topic, rows in g.items()} for g in plan.by_topic()]
    assert groups == [{"a": [1, 2], "b": [1]}, {}, {"c": [5]}]


def test_a_topic_in_two_parts_makes_the_whole_table_one_group(tmp_path):
    run = _plan(tmp_path, [[_delete("a", 1), _delete("b", 1)], [_delete("a", 2)]])
    plan = ActionParts.scan(run, get_mechanism("trim"))
    assert not plan.one_part_per_topic
    groups = [{topic: [r["ledgerId"] for r in rows] for topic, rows in g.items()} for g in plan.by_topic()]
    assert groups == [{"a": [1, 2], "b": [1]}]


def test_rows_applied_after_every_topic_are_set_aside(tmp_path):
    metadata = {"topic": "persistent://p/n/pt", "action": "delete_partitioned_metadata", "reason": "r"}
    run = _plan(tmp_path, [[{"topic": "x", "action": "delete_topic", "reason": "r"}], [metadata]])
    plan = ActionParts.scan(run, get_mechanism("gc"))
    assert plan.after == [metadata] and plan.topics == {"x"}
    assert [list(g) for g in plan.by_topic()] == [["x"], []]


def test_a_kind_the_mechanism_never_plans_is_bad_input_naming_the_plan(tmp_path):
    run = _plan(tmp_path, [[_delete("a", 1)], [{"topic": "a", "action": "delete_topic", "reason": "r"}]])
    with pytest.raises(InputError, match=f"plan in {run} has a delete_topic action, which trim never plans"):
        ActionParts.scan(run, get_mechanism("trim"))
