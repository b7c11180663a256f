"""The backlog gate's checks over one topic (``spark_apps.backlog.checks``), called alone: the planner's own plan
passes every check, and each mutated step, move or flag fails the check that names what is wrong. The gate's one pass
over real plans is checked by tests/backlog/test_gate*.py and the plan fingerprints."""

from __future__ import annotations

import pytest

from spark_apps.backlog.checks import FLAG_CHECKS, MOVE_CHECKS, STEP_CHECKS, check_topic
from spark_apps.backlog.topic_plan import plan_topic
from spark_apps.shared.move_checks import TopicFacts
from tests.backlog.test_topic_plan import info, ledgers, quota_topic
from tests.expiry.test_rule import cursor

pytestmark = pytest.mark.unit

SIZE = {"sizeQuotaLimitBytes": 200, "sizeQuotaPolicy": "consumer_backlog_eviction"}
TIME = {"timeQuotaLimitSeconds": 60, "timeQuotaPolicy": "consumer_backlog_eviction"}


def planned(columns: dict, cursors: list[dict]):
    rows, entries = ledgers()
    topic = quota_topic(**columns)
    plan = plan_topic(topic, rows, cursors, [], info(), entries)
    return TopicFacts(topic, rows, cursors), plan, entries


def failing(checked: dict) -> dict[str, list[str]]:
    names = {"cursor_moves": MOVE_CHECKS, "eviction_steps": STEP_CHECKS, "quota_flags": FLAG_CHECKS}
    return {
        frame: sorted({c for row in checked[frame] for c in names[frame] if row[c] is not True})
        for frame in names
    }


def test_the_planners_plans_pass_every_check():
    for columns in (SIZE, TIME, {"sizeQuotaLimitBytes": 200}):
        facts, plan, entries = planned(columns, [cursor("a", "1:-1"), cursor("b", "2:3")])
        assert plan.actions, columns
        checked = check_topic(facts, plan.actions, plan.steps, info(), entries)
        assert failing(checked) == {"cursor_moves": [], "eviction_steps": [], "quota_flags": []}, columns


def test_a_size_step_skipping_one_entry_too_many_fails_the_quota_rule():
    facts, plan, entries = planned(SIZE, [cursor("a", "1:-1")])
    steps = [dict(plan.steps[0], toEntry=plan.steps[0]["toEntry"] + 1), *plan.steps[1:]]
    checked = check_topic(facts, plan.actions, steps, info(), entries)
    assert "step_follows_the_quota_rule" in failing(checked)["eviction_steps"]


def test_a_size_step_of_a_cursor_that_is_not_the_slowest_fails():
    facts, plan, entries = planned(SIZE, [cursor("a", "1:-1"), cursor("b", "2:3")])
    steps = [dict(plan.steps[0], cursor="b", fromLedger=2, fromEntry=3)]
    checked = check_topic(facts, [], steps, info(), entries)
    assert "size_step_moves_the_slowest_cursor" in failing(checked)["eviction_steps"]


def test_a_move_that_does_not_end_where_its_last_step_ends_fails():
    facts, plan, entries = planned(TIME, [cursor("a", "1:-1")])
    moves = [dict(a, to="4:-1") if a["action"] == "move_cursor" else a for a in plan.actions]
    assert moves != plan.actions
    checked = check_topic(facts, moves, plan.steps, info(), entries)
    assert failing(checked)["cursor_moves"] == ["move_is_justified"]


def test_a_step_of_the_compaction_cursor_and_a_repeated_cursor_fail():
    facts, plan, entries = planned(SIZE, [cursor("a", "1:-1")])
    twice = [
        plan.steps[0],
        dict(plan.steps[0], step=2, fromLedger=plan.steps[0]["toLedger"], fromEntry=plan.steps[0]["toEntry"]),
    ]
    checked = check_topic(facts, [], twice, info(), entries)
    assert "not_same_cursor_twice_in_a_row" in failing(checked)["eviction_steps"]
    compaction = [dict(plan.steps[0], cursor="__compaction")]
    assert (
        "not_compaction_subscription"
        in failing(check_topic(facts, [], compaction, info(), entries))["eviction_steps"]
    )


def test_a_move_under_a_producer_policy_and_a_wrong_flag_fail():
    facts, plan, entries = planned({"sizeQuotaLimitBytes": 200}, [cursor("a", "1:-1")])
    (flag,) = plan.actions
    move = {
        "topic": flag["topic"],
        "action": "move_cursor",
        "subscription": "a",
        "from": "1:-1",
        "to": "2:0",
        "quotaType": "destination_storage",
    }
    cleared = dict(flag, exceeded=False)
    checked = check_topic(facts, [move, cleared], [], info(), entries)
    assert "quota_exceeded_with_eviction_policy" in failing(checked)["cursor_moves"]
    assert failing(checked)["quota_flags"] == ["flag_matches_rederived_quota_state"]
    evicting = dict(flag, policy="consumer_backlog_eviction")
    assert failing(check_topic(facts, [evicting], [], info(), entries))["quota_flags"] == [
        "exceeded_flag_only_for_producer_policies"
    ]
