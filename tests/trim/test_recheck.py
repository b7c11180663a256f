"""Trim's re-check at apply (``housekeeping.mechanisms.trim.recheck``): the plan narrowed to what the topic allows
now, never widened. The topic now and in the snapshot are given directly: no store, no Spark."""

from __future__ import annotations

import pytest

from housekeeping.core.policies import BrokerConfig, resolve_policies
from housekeeping.engine.live import CursorState, LedgerNow, TopicNow, TopicThen
from housekeeping.mechanisms.trim.recheck import recheck

pytestmark = pytest.mark.unit

T = "persistent://t/ns/x"
HOUR = 3_600_000
AS_OF = 100 * HOUR
# Ledgers 1-3 closed long ago (10 entries, 100 bytes each), ledger 4 the current one.
LEDGERS = [
    LedgerNow(1, 10, 100, 10 * HOUR),
    LedgerNow(2, 10, 100, 11 * HOUR),
    LedgerNow(3, 10, 100, 12 * HOUR),
    LedgerNow(4, 3, 30, None),
]
PLAN = [
    {"topic": T, "action": "delete_ledger", "ledgerId": 1, "bytes": 100},
    {"topic": T, "action": "delete_ledger", "ledgerId": 2, "bytes": 100},
    {"topic": T, "action": "delete_ledger", "ledgerId": 3, "bytes": 100},
    {"topic": T, "action": "move_cursor", "subscription": "reader", "from": "1:4", "to": "3:9"},
]


def document(namespace_policies: dict) -> str:
    return resolve_policies(T, {}, "t/ns", namespace_policies, BrokerConfig.from_layers()).document()


ONE_HOUR = {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}}
SNAPSHOT_CURSORS = (
    CursorState("sub", True, (4, 1)),
    CursorState("reader", False, (1, 4)),
)


def then(policies: dict = ONE_HOUR, cursors=SNAPSHOT_CURSORS) -> TopicThen:
    return TopicThen(7, "i1", document(policies), lambda: cursors)


def now(cursors=SNAPSHOT_CURSORS, policies: dict = ONE_HOUR) -> TopicNow:
    return TopicNow(None, T, "t/ns", 7, "i1", document(policies), tuple(cursors), list(LEDGERS))


def deleted(rows) -> list[int]:
    return [r["ledgerId"] for r in rows if r["action"] == "delete_ledger"]


def test_a_topic_as_it_was_snapshotted_is_applied_as_planned():
    narrowed = recheck(now(), then(), PLAN, AS_OF)
    assert narrowed.why is None and narrowed.rows == PLAN


def test_acknowledgements_since_the_snapshot_leave_the_plan_as_it_is():
    further = (CursorState("sub", True, (4, 2)), CursorState("reader", False, (2, 0)))
    narrowed = recheck(now(further), then(), PLAN, AS_OF)
    assert narrowed.why is None and narrowed.rows == PLAN


def test_a_subscription_created_at_earliest_after_the_snapshot_keeps_every_ledger():
    cursors = (*SNAPSHOT_CURSORS, CursorState("late", True, (1, -1)))
    narrowed = recheck(now(cursors), then(), PLAN, AS_OF)
    assert narrowed.rows == []
    assert "durable subscription 'late' at 1:-1 (created after the snapshot)" in narrowed.why
    assert "3 of 3 planned ledgers kept from ledger 1 on" in narrowed.why


def test_a_cursor_reset_backward_keeps_what_it_has_not_acknowledged_and_readers_move_less_far():
    cursors = (CursorState("sub", True, (2, 3)), SNAPSHOT_CURSORS[1])
    narrowed = recheck(now(cursors), then(), PLAN, AS_OF)
    assert deleted(narrowed.rows) == [1]
    assert "reset from 4:1 since the snapshot" in narrowed.why
    (move,) = [r for r in narrowed.rows if r["action"] == "move_cursor"]
    assert move["to"] == "1:9"  # the end of what is still deleted, not 3:9


def test_a_cursor_on_the_last_entry_of_a_planned_ledger_has_consumed_it():
    cursors = (CursorState("sub", True, (3, 9)), SNAPSHOT_CURSORS[1])
    narrowed = recheck(now(cursors), then(), PLAN, AS_OF)
    assert deleted(narrowed.rows) == [1, 2, 3] and narrowed.why is None
    one_short = (CursorState("sub", True, (3, 8)), SNAPSHOT_CURSORS[1])
    assert deleted(recheck(now(one_short), then(), PLAN, AS_OF).rows) == [1, 2]


def test_a_retention_raised_since_the_snapshot_keeps_what_it_keeps():
    # 89.5 h: ledger 1 (closed 90 h before as-of) still expires, ledgers 2 and 3 (89 h, 88 h) are kept.
    raised = {"retention_policies": {"retentionTimeInMinutes": 5370, "retentionSizeInMB": -1}}
    narrowed = recheck(now(policies=raised), then(), PLAN, AS_OF)
    assert deleted(narrowed.rows) == [1]
    assert "retention in force changed since the snapshot" in narrowed.why
    assert "keeps ledger 2" in narrowed.why
    infinite = {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}
    assert recheck(now(policies=infinite), then(), PLAN, AS_OF).rows == []


def test_a_retention_lowered_since_the_snapshot_never_widens_the_plan():
    lowered = {"retention_policies": {"retentionTimeInMinutes": 1, "retentionSizeInMB": -1}}
    narrowed = recheck(now(policies=lowered), then(), PLAN[:1], AS_OF)
    assert narrowed.rows == PLAN[:1]


def test_another_policy_changed_since_the_snapshot_does_not_touch_trim():
    ttl = {**ONE_HOUR, "message_ttl_in_seconds": 60}
    narrowed = recheck(now(policies=ttl), then(), PLAN, AS_OF)
    assert narrowed.why is None and narrowed.rows == PLAN


def test_a_changed_offload_policy_keeps_the_local_copies():
    local = {"topic": T, "action": "delete_local_copy", "ledgerId": 3, "bytes": 100, "offloadedAtMs": 0}
    lag = {**ONE_HOUR, "offload_deletion_lag_ms": 10 * 86_400_000}
    narrowed = recheck(now(policies=lag), then(), [*PLAN, local], AS_OF)
    assert narrowed.rows == PLAN
    assert "offload policy changed since the snapshot" in narrowed.why
