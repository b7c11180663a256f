"""The trim rule's edges (docs/semantics.md §3 and §9) on the per-topic rule the planner runs topic by topic
(``spark_apps.trim.rule``), called alone: no Spark. The planner's one pass writing these rows is checked by the
plan fingerprints and the scenarios."""

from __future__ import annotations

import pytest

from housekeeping.engine.contract import CURSORS, LEDGERS
from spark_apps.trim.rule import cursor_fast_forwards, ledger_decisions, plan_topic, trim_bound
from tests.conftest import NEVER_OFFLOADED, topic_row

pytestmark = pytest.mark.unit

T = "persistent://t/ns/x"
MIB = 1024 * 1024
AS_OF = 10_000_000


def topic(retention=(0, 0), **columns) -> dict:
    return topic_row(T, retentionTimeMs=retention[0], retentionSizeBytes=retention[1], **columns)


def ledger_rows(ledgers) -> list[dict]:
    """ledgers: (id, entries, size, closedAtMs|None)."""
    return [
        LEDGERS.row(
            {
                **NEVER_OFFLOADED["ledgers"],
                "topic": T,
                "ledgerId": lid,
                "entries": n,
                "size": size,
                "closedAtMs": closed,
                "entriesStored": False,
            }
        )
        for lid, n, size, closed in ledgers
    ]


def cursor_rows(cursors) -> list[dict]:
    """cursors: (name, durable, L, E)."""
    return [
        CURSORS.row(
            {
                "topic": T,
                "name": n,
                "durable": d,
                "markDeleteLedger": lg,
                "markDeleteEntry": e,
                "consumers": 0,
            }
        )
        for n, d, lg, e in cursors
    ]


def decisions(ledgers, cursors=(), retention=(0, 0), as_of=AS_OF, **columns) -> list[dict]:
    return ledger_decisions(topic(retention, **columns), ledger_rows(ledgers), cursor_rows(cursors), as_of)


def deleted(ledgers, cursors=(), retention=(0, 0), as_of=AS_OF) -> list[int]:
    return [d["ledgerId"] for d in decisions(ledgers, cursors, retention, as_of) if d["decision"] == "delete"]


CLOSED = [(1, 10, 100, 1000), (2, 10, 100, 2000), (3, 10, 100, 3000), (4, 5, 50, None)]


def test_mark_delete_on_last_entry_of_closed_ledger_frees_it():
    assert deleted(CLOSED, [("s", True, 2, 9)]) == [1, 2]


def test_mark_delete_before_last_entry_keeps_the_ledger():
    assert deleted(CLOSED, [("s", True, 2, 8)]) == [1]
    assert deleted(CLOSED, [("s", True, 2, -1)]) == [1]
    assert deleted(CLOSED, [("s", True, 1, -1)]) == []


def test_current_ledger_is_never_deleted_even_fully_consumed():
    assert deleted(CLOSED, [("s", True, 4, 4)]) == [1, 2, 3]
    assert deleted(CLOSED, []) == [1, 2, 3]


def test_slowest_durable_cursor_bounds_and_readers_never_pin():
    cursors = [("fast", True, 3, 9), ("slow", True, 1, 9), ("reader", False, 1, 0)]
    assert deleted(CLOSED, cursors) == [1]
    assert deleted(CLOSED, [("reader", False, 1, 0)]) == [1, 2, 3]


def test_time_rule_is_strict():
    ledgers = [(1, 10, 100, AS_OF - 60_000), (2, 10, 100, AS_OF - 60_001), (3, 1, 10, None)]
    # retention 60 s, size infinite: ledger 1 closed exactly 60 s ago is not expired (now - ts > time).
    assert deleted(ledgers, [], retention=(60_000, -1)) == []
    ledgers = [(1, 10, 100, AS_OF - 60_001), (2, 10, 100, AS_OF - 60_000), (3, 1, 10, None)]
    assert deleted(ledgers, [], retention=(60_000, -1)) == [1]


def test_prefix_semantics_a_young_ledger_blocks_older_expired_ones_behind_it():
    ledgers = [(1, 10, 100, AS_OF - 10), (2, 10, 100, 1000), (3, 1, 10, None)]
    assert deleted(ledgers, [], retention=(60_000, -1)) == []


def test_size_rule_counts_what_would_remain_including_backlog_and_current():
    ledgers = [(1, 1, MIB, 1), (2, 1, MIB, 2), (3, 1, MIB, 3), (4, 1, MIB, 4), (5, 1, MIB, None)]
    # 5 MiB total, quota 3 MiB, everything consumed up to ledger 4: delete while remainder >= 3 MiB.
    assert deleted(ledgers, [("s", True, 4, 0)], retention=(-1, 3 * MIB)) == [1, 2]
    # Backlog counts: consumed only up to ledger 2, 3 MiB unconsumed+current -> still deletes 1 and 2.
    assert deleted(ledgers, [("s", True, 2, 0)], retention=(-1, 3 * MIB)) == [1, 2]


def test_size_rule_total_equal_to_quota_keeps_everything():
    ledgers = [(1, 1, MIB, 1), (2, 1, MIB, 2), (3, 1, MIB, None)]
    assert deleted(ledgers, [("s", True, 2, 0)], retention=(-1, 3 * MIB)) == []
    # and a remainder exactly equal to the quota still allows the delete
    assert deleted(ledgers, [("s", True, 2, 0)], retention=(-1, 2 * MIB)) == [1]


def test_infinite_and_zero_retention():
    assert deleted(CLOSED, [], retention=(-1, -1)) == []
    assert deleted(CLOSED, [], retention=(0, 0)) == [1, 2, 3]
    # time 0 alone: every closed ledger with a close time before as-of is expired
    assert deleted(CLOSED, [], retention=(0, -1)) == [1, 2, 3]


def test_empty_closed_ledger_in_the_walk():
    ledgers = [(1, 10, 100, 1000), (2, 0, 0, 1500), (3, 10, 100, 2000), (4, 0, 0, None)]
    assert deleted(ledgers, [("s", True, 3, 9)]) == [1, 2, 3]
    # (2, -1) on an empty closed ledger is its "last entry" (entries == e + 1), so ledger 2 goes too.
    assert deleted(ledgers, [("s", True, 2, -1)]) == [1, 2]
    assert deleted(ledgers, [("s", True, 3, -1)]) == [1, 2]


def test_cursor_in_a_ledger_no_longer_listed():
    ledgers = [(5, 10, 100, 1000), (9, 10, 100, 2000), (12, 0, 0, None)]
    # mark-delete (7, 3): ledger 7 is gone; bound is 7, so ledger 5 goes and ledger 9 stays.
    assert deleted(ledgers, [("s", True, 7, 3)]) == [5]


def test_the_bound_is_the_slowest_durable_cursor():
    bound = trim_bound(
        ledger_rows(CLOSED), cursor_rows([("a", True, 2, 9), ("b", True, 3, 1), ("r", False, 1, 0)])
    )
    assert (bound.current_ledger_id, bound.total_size, bound.cursor["name"], bound.ledger_id) == (
        4,
        350,
        "a",
        3,
    )


def test_readers_are_fast_forwarded_past_the_deleted_range():
    cursors = cursor_rows([("s", True, 2, 9), ("r", False, 1, 3), ("r2", False, 3, 0)])
    planned = ledger_decisions(topic(), ledger_rows(CLOSED), cursors, AS_OF)
    moves = [(m["subscription"], m["from"], m["to"]) for m in cursor_fast_forwards(planned, cursors)]
    assert moves == [("r", "1:3", "2:9")]


def test_every_ledger_gets_a_reason_and_blockers_explain_what_is_kept():
    plan = plan_topic(topic((-1, -1)), ledger_rows(CLOSED), cursor_rows([("stale", True, 1, 4)]), AS_OF)
    assert {d["ledgerId"]: d["kind"] for d in plan.decisions} == {
        1: "slowest_subscription",
        2: "slowest_subscription",
        3: "slowest_subscription",
        4: "current_ledger",
    }
    assert all(d["reason"] for d in plan.decisions)
    blockers = {b["kind"]: b for b in plan.blockers}
    assert blockers["slowest_subscription"]["bytes"] == 300
    assert "'stale'" in blockers["slowest_subscription"]["detail"]
    assert blockers["current_ledger"]["bytes"] == 50


def test_retention_window_and_prefix_blocked_reasons_and_blockers():
    ledgers = [(1, 10, 100, 1000), (2, 10, 100, AS_OF - 5), (3, 10, 100, 1000), (4, 0, 0, None)]
    plan = plan_topic(topic((60_000, -1)), ledger_rows(ledgers), [], AS_OF)
    assert {d["ledgerId"]: d["kind"] for d in plan.decisions} == {
        1: "consumed_and_expired",
        2: "retention_window",
        3: "prefix_blocked",
        4: "current_ledger",
    }
    reasons = {d["ledgerId"]: d["reason"] for d in plan.decisions}
    assert reasons[1] == (
        "consumed: below the trim bound ledger 5 (no durable subscription (readers never pin data)); "
        "closed 9999 s before as-of > retention time 60 s"
    )
    assert reasons[2] == (
        "within retention (test: test); closed 0 s before as-of, within retention time 60 s; retention size infinite"
    )
    # the ledger the prefix blocks counts under the retention that keeps the ledger before it
    assert {b["kind"]: (b["ledgers"], b["bytes"]) for b in plan.blockers} == {
        "retention_window": (2, 200),
        "current_ledger": (1, 0),
    }


def test_the_pinning_subscription_reason_says_how_long_it_has_been_idle():
    stale = CURSORS.row(
        {
            "topic": T,
            "name": "stale",
            "durable": True,
            "markDeleteLedger": 1,
            "markDeleteEntry": 4,
            "lastActiveMs": AS_OF - 50 * 3_600_000,
            "consumers": 0,
        }
    )
    reasons = {
        d["ledgerId"]: d["reason"] for d in ledger_decisions(topic(), ledger_rows(CLOSED), [stale], AS_OF)
    }
    assert "'stale' at mark-delete 1:4, last active 1969-12-30T" in reasons[2]
    assert "(50 h before as-of)" in reasons[2]


def test_a_held_topic_keeps_every_ledger_and_says_what_the_rules_alone_would_do():
    plan = plan_topic(topic(heldBy="hold on t/ns: legal"), ledger_rows(CLOSED), [], AS_OF)
    assert [d["decision"] for d in plan.decisions] == ["keep"] * 4
    assert [d["kind"] for d in plan.decisions][:3] == ["held"] * 3
    assert plan.decisions[0]["reason"].startswith("hold on t/ns: legal; without the hold: delete: consumed:")
    assert plan.actions == []


def offloaded(ledgers, offloaded_at: dict[int, int | None], local_deleted=()) -> list[dict]:
    rows = ledger_rows(ledgers)
    for row in rows:
        if row["ledgerId"] in offloaded_at:
            row.update(
                offloadAttempted=True,
                offloadComplete=True,
                offloadedAtMs=offloaded_at[row["ledgerId"]],
                localDeleted=row["ledgerId"] in local_deleted,
            )
    return rows


def test_local_copies_go_strictly_after_the_lag_where_an_offloader_applies():
    lag = 60_000
    offload = {"offloader": True, "offloadDeletionLagMs": lag}
    ledgers = offloaded(CLOSED, {1: AS_OF - lag - 1, 2: AS_OF - lag, 3: None})
    pinned = cursor_rows([("s", True, 1, -1)])  # nothing consumed: retention deletes nothing
    plan = plan_topic(topic(**offload), ledgers, pinned, AS_OF)
    assert [(a["action"], a["ledgerId"], a["bytes"]) for a in plan.actions] == [("delete_local_copy", 1, 100)]
    assert plan.actions[0]["reason"].startswith(f"offloaded {lag + 1} ms ago > offload deletion lag {lag} ms")
    # no offloader, a lag of -1 (never), a held topic, a local copy already gone: none
    assert plan_topic(topic(**{**offload, "offloader": False}), ledgers, pinned, AS_OF).actions == []
    assert plan_topic(topic(**{**offload, "offloadDeletionLagMs": -1}), ledgers, pinned, AS_OF).actions == []
    assert plan_topic(topic(**offload, heldBy="hold"), ledgers, pinned, AS_OF).actions == []
    gone = offloaded(CLOSED, {1: AS_OF - lag - 1}, local_deleted={1})
    assert plan_topic(topic(**offload), gone, pinned, AS_OF).actions == []


def test_a_ledger_retention_deletes_is_not_also_a_local_copy_deletion():
    offload = {"offloader": True, "offloadDeletionLagMs": 0}
    plan = plan_topic(topic(**offload), offloaded(CLOSED, {1: 0, 2: 0}), [], AS_OF)
    assert [(a["action"], a["ledgerId"]) for a in plan.actions] == [
        ("delete_ledger", 1),
        ("delete_ledger", 2),
        ("delete_ledger", 3),
    ]


def test_a_topic_without_ledgers_plans_nothing():
    plan = plan_topic(topic(), [], cursor_rows([("s", True, 1, 0)]), AS_OF)
    assert (plan.decisions, plan.actions, plan.blockers) == ([], [], [])
