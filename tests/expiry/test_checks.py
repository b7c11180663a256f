"""The expiry gate's checks over one topic (``spark_apps.expiry.checks``), called alone with entries of the test's
own: the planner's own moves pass every check, and each mutated move fails the check that names what is wrong. The
gate's one pass over a real plan is checked by tests/expiry/test_gate.py and the plan fingerprints."""

from __future__ import annotations

import pytest

from spark_apps.expiry.checks import EXPIRY_CHECKS, check_topic
from spark_apps.expiry.rule import plan_topic
from spark_apps.shared.move_checks import TopicFacts
from tests.conftest import topic_row
from tests.expiry.test_rule import AS_OF, CUTOFF, INFO, TTL, Entries, cursor, ledger

pytestmark = pytest.mark.unit

T = "persistent://t/ns/x"
STAMPS = {
    1: ([CUTOFF - 9, CUTOFF - 8, CUTOFF - 7], CUTOFF - 1),
    2: ([CUTOFF - 6, AS_OF - 5, CUTOFF - 4], None),
}


def topic(**columns) -> dict:
    return topic_row(T, **({"messageTtlSeconds": TTL, "messageTtlSource": "namespace"} | columns))


def checked(moves: list[dict], cursors: list[dict], **topic_columns) -> list[dict]:
    ledgers = [ledger(lid, ts, closed) for lid, (ts, closed) in STAMPS.items()]
    entries = Entries({lid: ts for lid, (ts, _) in STAMPS.items()})
    facts = TopicFacts(topic(**topic_columns), ledgers, cursors)
    return check_topic(facts, moves, INFO, entries)["cursor_moves"]


def failing(row: dict) -> list[str]:
    return [check for check in EXPIRY_CHECKS if row[check] is not True]


def move(to: str, frm: str = "1:-1", subscription: str = "s", topic_name: str = T) -> dict:
    return {"topic": topic_name, "action": "move_cursor", "subscription": subscription, "from": frm, "to": to}


def test_the_planners_moves_pass_every_check():
    ledgers = [ledger(lid, ts, closed) for lid, (ts, closed) in STAMPS.items()]
    entries = Entries({lid: ts for lid, (ts, _) in STAMPS.items()})
    cursors = [cursor("s", "1:-1"), cursor("t", "1:1", consumers=1)]
    plan = plan_topic(topic(), ledgers, cursors, INFO, entries)
    assert [a["to"] for a in plan.actions] == ["2:0"]  # t: the guard keeps it (young oldest entry)
    (row,) = checked(plan.actions, cursors)
    assert failing(row) == []


@pytest.mark.parametrize(
    "mutant, cursors, columns, check",
    [
        (move("2:1"), [cursor("s", "1:-1")], {}, "acknowledged_entries_expired"),
        (move("2:0", frm="1:0"), [cursor("s", "1:-1")], {}, "from_is_current_mark_delete"),
        (move("2:0"), [], {}, "cursor_in_snapshot"),
        (move("2:0"), [cursor("s", "1:-1", durable=False)], {}, "cursor_is_durable"),
        (
            move("2:0", subscription="__compaction"),
            [cursor("__compaction", "1:-1")],
            {},
            "not_compaction_subscription",
        ),
        (move("0:5"), [cursor("s", "1:-1")], {}, "moves_forward"),
        (move("1:7"), [cursor("s", "1:-1")], {}, "to_is_an_entry_of_a_listed_ledger"),
        (move("3:0"), [cursor("s", "1:-1")], {}, "not_past_last_entry"),
        (move("2:0"), [cursor("s", "1:-1")], {"messageTtlSeconds": 0}, "ttl_enabled"),
        (move("1:2"), [cursor("s", "1:-1", consumers=1)], {}, "consumer_guard_allows"),
    ],
)
def test_each_mutant_fails_the_check_that_names_it(mutant, cursors, columns, check):
    (row,) = checked([mutant], cursors, **columns)
    assert check in failing(row), failing(row)


def test_a_move_on_a_system_topic_fails_by_its_name():
    system = "persistent://pulsar/system/__change_events"
    ledgers = [ledger(lid, ts, closed) | {"topic": system} for lid, (ts, closed) in STAMPS.items()]
    facts = TopicFacts(
        topic_row(system, messageTtlSeconds=TTL), ledgers, [cursor("s", "1:-1") | {"topic": system}]
    )
    (row,) = check_topic(
        facts, [move("2:0", topic_name=system)], INFO, Entries({lid: ts for lid, (ts, _) in STAMPS.items()})
    )["cursor_moves"]
    assert "not_system_topic" in failing(row)


@pytest.mark.parametrize("column", ["subscription", "from", "to"])
def test_a_null_in_a_planned_move_fails_a_check_and_never_raises(column):
    """The checks are plain booleans: a null the plan holds (a tampered row) makes the check that reads it false."""
    ledgers = [ledger(lid, ts, closed) for lid, (ts, closed) in STAMPS.items()]
    entries = Entries({lid: ts for lid, (ts, _) in STAMPS.items()})
    cursors = [cursor("s", "1:-1"), cursor("t", "1:1", consumers=1)]
    (action,) = plan_topic(topic(), ledgers, cursors, INFO, entries).actions
    (row,) = checked([{**action, column: None}], cursors)
    assert failing(row), column
