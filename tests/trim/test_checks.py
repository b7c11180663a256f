"""Trim's gate invariants (``spark_apps.trim.checks``) on one topic, called alone: no Spark. A genuine plan from the
rule passes every check; each corruption fails the check that guards it. The gate's one pass over a real plan, and
every mutant blocked end to end, are tests/trim/test_gate.py and tests/trim/test_gate_local_copies.py."""

from __future__ import annotations

import pytest

from spark_apps.shared.holds import hold_check_rows
from spark_apps.trim.checks import TopicFacts, check_topic, namespace_rows
from spark_apps.trim.rule import plan_topic
from tests.conftest import topic_row
from tests.trim.test_plan import AS_OF, CLOSED, T, cursor_rows, ledger_rows, offloaded

pytestmark = pytest.mark.unit


def checked(actions, ledgers=None, cursors=(), **columns) -> dict[str, list[dict]]:
    topic = topic_row(T, retentionTimeMs=0, retentionSizeBytes=0, **columns)
    facts = TopicFacts(topic, ledgers if ledgers is not None else ledger_rows(CLOSED), cursor_rows(cursors))
    return check_topic(facts, actions, AS_OF)


def failing(frames: dict[str, list[dict]]) -> set[str]:
    return {
        f"{name}.{column}"
        for name, rows in frames.items()
        for row in rows
        for column, value in row.items()
        if value is False
    }


def genuine(cursors=(), **columns) -> list[dict]:
    topic = topic_row(T, retentionTimeMs=0, retentionSizeBytes=0, **columns)
    return plan_topic(topic, ledger_rows(CLOSED), cursor_rows(cursors), AS_OF).actions


def delete(ledger_id: int, size: int = 100) -> dict:
    return {"topic": T, "action": "delete_ledger", "ledgerId": ledger_id, "bytes": size}


def move(name: str, start: str, end: str) -> dict:
    return {"topic": T, "action": "move_cursor", "subscription": name, "from": start, "to": end}


def test_the_rule_s_plan_passes_every_check():
    cursors = [("s", True, 2, 9), ("r", False, 1, 3)]
    actions = genuine(cursors)
    assert [a["action"] for a in actions] == ["delete_ledger", "delete_ledger", "move_cursor"]
    frames = checked(actions, cursors=cursors)
    assert failing(frames) == set()
    assert len(frames["deletions"]) == 2 and len(frames["cursor_moves"]) == 1


@pytest.mark.parametrize(
    ("actions", "cursors", "fails"),
    [
        ([delete(4, 50)], [], {"deletions.not_current_ledger", "deletions.ledger_is_closed",
                               "deletions.contiguous_oldest_prefix"}),
        ([delete(1), delete(2)], [("s", True, 1, 9)], {"deletions.no_durable_cursor_pins_it"}),
        ([delete(2)], [], {"deletions.contiguous_oldest_prefix"}),
        ([delete(1, 99)], [], {"deletions.bytes_match_snapshot"}),
        ([delete(7)], [], {"deletions.ledger_in_snapshot", "deletions.bytes_match_snapshot",
                           "deletions.ledger_is_closed", "deletions.contiguous_oldest_prefix"}),
        ([delete(1), move("r", "1:3", "1:2")], [("r", False, 1, 3)],
         {"cursor_moves.moves_forward", "cursor_moves.to_is_end_of_deleted_range"}),
        ([delete(1), move("s", "1:3", "1:9")], [("s", True, 1, 3)],
         {"cursor_moves.cursor_is_non_durable", "deletions.no_durable_cursor_pins_it"}),
        ([delete(1), move("r", "1:2", "1:9")], [("r", False, 1, 3)], {"cursor_moves.from_is_current_mark_delete"}),
        ([move("x", "1:0", "9:9")], [], {"cursor_moves.cursor_in_snapshot", "cursor_moves.from_is_current_mark_delete",
                                          "cursor_moves.cursor_is_non_durable", "cursor_moves.to_is_end_of_deleted_range",
                                          "cursor_moves.not_past_last_entry"}),
    ],
)  # fmt: skip
def test_each_corruption_fails_the_check_that_guards_it(actions, cursors, fails):
    assert failing(checked(actions, cursors=cursors)) == fails


def test_retention_must_allow_the_deletion():
    topic = topic_row(T, retentionTimeMs=-1, retentionSizeBytes=-1)
    frames = check_topic(TopicFacts(topic, ledger_rows(CLOSED), []), [delete(1)], AS_OF)
    assert failing(frames) == {"deletions.retention_allows_delete"}


def test_a_topic_the_snapshot_lacks_fails_everything_it_is_asked():
    frames = check_topic(
        TopicFacts(None, [], []),
        [delete(1) | {"topic": "persistent://t/ns/ghost"}],
        AS_OF,
    )
    assert "actions.topic_in_snapshot" in failing(frames)
    assert "deletions.retention_default_fits_the_name" in failing(frames)


def test_a_local_copy_due_must_be_planned_and_a_planned_one_must_be_due():
    lag = 60_000
    offload = {"offloader": True, "offloadDeletionLagMs": lag}
    ledgers = offloaded(CLOSED, {1: AS_OF - lag - 1, 2: AS_OF - lag})
    pinned = [("s", True, 1, -1)]
    copy = {
        "topic": T,
        "action": "delete_local_copy",
        "ledgerId": 1,
        "bytes": 100,
        "offloadedAtMs": AS_OF - lag - 1,
    }
    assert failing(checked([copy], ledgers, pinned, **offload)) == set()
    assert failing(checked([], ledgers, pinned, **offload)) == {"local_copy_selection.planned"}
    early = {**copy, "ledgerId": 2, "offloadedAtMs": AS_OF - lag}
    assert failing(checked([copy, early], ledgers, pinned, **offload)) == {"local_copies.deletion_lag_passed"}
    # a held topic's due copy is not asked for
    assert failing(checked([], ledgers, pinned, heldBy="hold", **offload)) == set()


def test_namespaces_reconcile_with_the_summary_and_keep_within_the_blast_radius():
    rows = namespace_rows(
        {"t/ns": 300, None: 5}, {"t/ns": 1000, "t/other": 10}, {"t/ns": {"bytes": 300}}, 0.25
    )
    by = {r["namespace"]: r for r in rows}
    assert by["t/ns"]["summary_reconciles"] and not by["t/ns"]["within_blast_radius"]
    assert by["t/ns"]["deleted_share"] == 0.3
    assert by["t/other"]["deleted_share"] == 0 and by["t/other"]["summary_reconciles"]
    assert not by[None]["namespace_in_snapshot"] and not by[None]["summary_reconciles"]


def test_a_hold_on_the_topic_its_namespace_or_its_partitioned_topic_covers_its_actions():
    partition = "persistent://t/ns/p-partition-3"
    actions = [delete(1), delete(1) | {"topic": partition}, {"topic": T, "action": "refresh_last_active"}]
    rows = hold_check_rows(actions, [{"target": "persistent://t/ns/p"}])
    assert [(r["topic"], r["not_held"]) for r in rows] == [(T, True), (partition, False)]
    assert [r["heldByTarget"] for r in hold_check_rows(actions, [{"target": "t/ns"}])] == ["t/ns", "t/ns"]


@pytest.mark.parametrize("column", ["ledgerId", "bytes", "subscription", "from", "to"])
def test_a_null_in_a_planned_row_fails_a_check_and_never_raises(column):
    """The checks are plain booleans: a null the plan holds (a tampered row) makes the check that reads it false."""
    cursors = [("s", True, 2, 9), ("r", False, 1, 3)]
    actions = genuine(cursors)
    rows = [i for i, action in enumerate(actions) if column in action]
    assert rows, column
    for i in rows:
        broken = [*actions[:i], {**actions[i], column: None}, *actions[i + 1 :]]
        assert failing(checked(broken, cursors=cursors)), (actions[i], column)
