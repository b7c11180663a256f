"""The backlog gate's checks over one topic (``spark_apps.backlog.checks``), called alone: the planner's own plan
passes every check, and each mutated step, move or flag fails the check that names what is wrong. The gate's one pass
over real plans is checked by tests/backlog/test_gate*.py and the plan fingerprints."""

from __future__ import annotations

import random

import pytest

from spark_apps.backlog.checks import FLAG_CHECKS, MOVE_CHECKS, STEP_CHECKS, check_topic
from spark_apps.backlog.rule import plan_topic
from spark_apps.shared.move_checks import TopicFacts
from tests.backlog.test_rule import AS_OF, info, ledgers, quota_topic
from tests.expiry.test_rule import Entries, cursor, ledger

pytestmark = pytest.mark.unit

SIZE = {"sizeQuotaLimitBytes": 200, "sizeQuotaPolicy": "consumer_backlog_eviction"}
TIME = {"timeQuotaLimitSeconds": 60, "timeQuotaPolicy": "consumer_backlog_eviction"}
TIED = {"sizeQuotaLimitBytes": 10_010, "sizeQuotaPolicy": "consumer_backlog_eviction"}


def planned(columns: dict, cursors: list[dict], of=ledgers, enabled: bool = True):
    rows, entries = of()
    topic = quota_topic(**columns)
    plan = plan_topic(topic, rows, cursors, [], info(enabled=enabled), entries)
    return TopicFacts(topic, rows, cursors), plan, entries


def rolled() -> tuple[list[dict], Entries]:
    """Ledgers 1 and 2 of 5 entries closed 10 minutes before as-of; 3 current and empty after a roll."""
    stamps = {1: [AS_OF - 20 * 60_000 + e for e in range(5)], 2: [AS_OF - 15 * 60_000 + e for e in range(5)]}
    closed = AS_OF - 10 * 60_000
    return [ledger(1, stamps[1], closed), ledger(2, stamps[2], closed), ledger(3, [], None)], Entries(stamps)


def failing(checked: dict) -> dict[str, list[str]]:
    names = {"cursor_moves": MOVE_CHECKS, "eviction_steps": STEP_CHECKS, "quota_flags": FLAG_CHECKS}
    return {
        frame: sorted({c for row in checked[frame] for c in names[frame] if row[c] is not True})
        for frame in names
    }


def test_the_planners_plans_pass_every_check():
    for columns, cursors, of, enabled in (
        (SIZE, [cursor("a", "1:-1"), cursor("b", "2:3")], ledgers, True),
        (TIME, [cursor("a", "1:-1"), cursor("b", "2:3")], ledgers, True),
        ({"sizeQuotaLimitBytes": 200}, [cursor("a", "1:-1"), cursor("b", "2:3")], ledgers, True),
        (SIZE, [cursor("a", "1:-1"), cursor("b", "1:-1")], ledgers, True),
        (TIED, [cursor("a", "1:-1"), cursor("b", "1:-1")], tied, True),
        (TIME, [cursor("a", "1:-1")], rolled, True),
        ({"sizeQuotaLimitBytes": 0}, [], ledgers, True),
        ({"sizeQuotaLimitBytes": 200}, [cursor("a", "1:-1")], ledgers, False),
    ):
        facts, plan, entries = planned(columns, cursors, of, enabled)
        assert plan.actions, columns
        checked = check_topic(facts, plan.actions, plan.steps, info(enabled=enabled), entries)
        assert failing(checked) == {"cursor_moves": [], "eviction_steps": [], "quota_flags": []}, columns


def tied() -> tuple[list[dict], Entries]:
    """The issue's tie: ledger 1 of 10 entries (10 B), 2 of 10 entries (10000 B), 3 current and empty."""
    stamps = {
        1: [AS_OF - 20 * 60_000 + e for e in range(10)],
        2: [AS_OF - 15 * 60_000 + e for e in range(10)],
    }
    closed = AS_OF - 10 * 60_000
    rows = [
        ledger(1, stamps[1], closed),
        dict(ledger(2, stamps[2], closed), size=10_000),
        ledger(3, [], None),
    ]
    return rows, Entries(stamps)


def test_a_size_step_after_the_cursor_before_it_stayed_the_slowest_fails():
    """Both at 1:-1, limit 10010 B: ``a`` then ``b`` (strictly behind ``a``'s target) skip 2 entries to 1:1, and the
    loop stops, ``b`` still the slowest. A third step of ``a`` from 1:1 (what breaking the tie by name did) follows
    the skip arithmetic but is one Pulsar's loop never takes."""
    facts, plan, entries = planned(TIED, [cursor("a", "1:-1"), cursor("b", "1:-1")], tied)
    first, second = plan.steps
    assert [(s["cursor"], s["toLedger"], s["toEntry"]) for s in plan.steps] == [("a", 1, 1), ("b", 1, 1)]
    third = dict(
        second,
        step=3,
        cursor="a",
        fromLedger=1,
        fromEntry=1,
        toEntry=2,
        backlogBytesBefore=10_008,
        entriesSkipped=1,
    )
    checked = check_topic(facts, [], [first, second, third], info(), entries)
    assert failing(checked)["eviction_steps"] == ["previous_cursor_no_longer_the_slowest"]


def test_a_time_step_past_the_last_entry_onto_an_empty_current_ledger_fails():
    facts, plan, entries = planned(TIME, [cursor("a", "1:-1")], rolled)
    assert [(s["toLedger"], s["toEntry"]) for s in plan.steps] == [(2, -1)]
    onto_empty = dict(plan.steps[0], step=2, fromLedger=2, fromEntry=-1, toLedger=3, toEntry=-1)
    checked = check_topic(facts, [], [plan.steps[0], onto_empty], info(), entries)
    assert failing(checked)["eviction_steps"] == ["step_follows_the_quota_rule"]
    # the cursor had consumed all of ledger 2: Pulsar's cursor accepts 3:-1
    consumed = dict(onto_empty, step=1, fromEntry=4)
    facts = TopicFacts(facts.topic, facts.ledgers, [cursor("a", "2:4")])
    assert failing(check_topic(facts, [], [consumed], info(), entries))["eviction_steps"] == []


def test_with_the_check_switched_off_a_flag_passes_and_an_eviction_fails():
    facts, plan, entries = planned(SIZE, [cursor("a", "1:-1")])
    moves = [a for a in plan.actions if a["action"] == "move_cursor"]
    assert moves
    checked = check_topic(facts, moves, plan.steps, info(enabled=False), entries)
    assert failing(checked)["cursor_moves"] == ["quota_exceeded_with_eviction_policy"]


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


@pytest.mark.parametrize("seed", range(4))
def test_the_planners_plans_pass_every_check_on_random_topics(seed):
    """Random topics around the five boundaries where the project once parted from Pulsar: size limits around the
    backlog (0 included), time limits around the ledgers' ages, cursors tied on one position, an empty current
    ledger after a roll, no durable cursor, readers, precise mode and the check switched off. The gate, re-deriving
    every quota and replaying every step apart from the planner, passes all of them."""
    rng = random.Random(seed)
    policies = ("consumer_backlog_eviction", "producer_request_hold", "producer_exception")
    for _ in range(150):
        count = rng.randint(1, 5)
        stamps = {
            i: [
                AS_OF - (60 - 10 * i) * 60_000 + e
                for e in range(rng.choice((0, 1, 3, 5)) if i == count else 5)
            ]
            for i in range(1, count + 1)
        }
        rows = [
            dict(
                ledger(i, ts, AS_OF - (55 - 10 * i) * 60_000 if i < count else None),
                size=rng.choice((10, 100, 10_000)) * len(ts),
            )
            for i, ts in stamps.items()
        ]
        positions = [f"{i}:{e}" for i in stamps for e in range(-1, len(stamps[i]))]
        named = [f"c{n}" for n in range(rng.randint(0, 3))]
        tied = rng.choice(positions)
        cursors = [cursor(n, tied if rng.random() < 0.5 else rng.choice(positions)) for n in named]
        if rng.random() < 0.3:
            cursors.append(cursor("reader", rng.choice(positions), durable=False))
        total = sum(r["size"] for r in rows)
        topic = quota_topic(
            sizeQuotaLimitBytes=rng.choice((-1, 0, total // 2, total, total + 1)),
            sizeQuotaPolicy=rng.choice(policies),
            timeQuotaLimitSeconds=rng.choice((-1, 60, 20 * 60, 40 * 60)),
            timeQuotaPolicy=rng.choice(policies),
        )
        run = info(precise=rng.random() < 0.3, enabled=rng.random() < 0.8)
        entries = Entries(stamps)
        plan = plan_topic(topic, rows, cursors, [], run, entries)
        checked = check_topic(TopicFacts(topic, rows, cursors), plan.actions, plan.steps, run, entries)
        assert failing(checked) == {"cursor_moves": [], "eviction_steps": [], "quota_flags": []}, (
            topic,
            rows,
            cursors,
            run,
            plan.actions,
            plan.steps,
        )


def test_a_null_in_any_planned_row_fails_a_check_and_never_raises():
    """The checks are plain booleans: a null the plan holds in a move, an eviction step or a quota flag (a tampered
    row) makes the check that reads it false."""
    kinds = set()
    for columns in (SIZE, TIME, {"sizeQuotaLimitBytes": 200}):
        facts, plan, entries = planned(columns, [cursor("a", "1:-1"), cursor("b", "2:3")])
        moves = [a for a in plan.actions if a["action"] == "move_cursor"]
        flags = [a for a in plan.actions if a["action"] != "move_cursor"]
        tampered = [
            *(("move", i, c) for i in range(len(moves)) for c in ("subscription", "from", "to", "quotaType")),
            *(
                ("step", i, c)
                for i in range(len(plan.steps))
                for c in ("step", "cursor", "quotaType", "fromLedger", "fromEntry", "toLedger", "toEntry")
            ),
            *(("flag", i, c) for i in range(len(flags)) for c in ("quotaType", "exceeded")),
        ]
        for kind, i, column in tampered:
            rows = {"move": list(moves), "step": list(plan.steps), "flag": list(flags)}
            rows[kind][i] = {**rows[kind][i], column: None}
            checked = check_topic(facts, rows["move"] + rows["flag"], rows["step"], info(), entries)
            assert any(failing(checked).values()), (columns, kind, column)
            kinds.add(kind)
    assert kinds == {"move", "step", "flag"}
