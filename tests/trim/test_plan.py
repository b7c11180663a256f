"""The trim rule's edges (docs/semantics.md §3) on the planner's pure DataFrame transforms."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from housekeeping.engine.contract import CURSORS, LEDGERS, TOPICS
from spark_apps.trim.plan import cursor_fast_forwards, durable_bounds, plan_ledger_decisions, trim_blockers
from tests.conftest import contract_frame

pytestmark = pytest.mark.spark

T = "persistent://t/ns/x"
MIB = 1024 * 1024
AS_OF = 10_000_000


def frames(spark, ledgers, cursors=(), retention=(0, 0)):
    """ledgers: (id, entries, size, closedAtMs|None); cursors: (name, durable, L, E); retention: (ms, bytes)."""
    topic = {
        "topic": T,
        "namespace": "t/ns",
        "tenant": "t",
        "isSystemTopic": False,
        "version": 1,
        "producers": 0,
        "consumers": 0,
        "retentionTimeMs": retention[0],
        "retentionSizeBytes": retention[1],
        "retentionSource": "test",
        "retentionDescription": "test",
        "messageTtlSeconds": 0,
        "messageTtlSource": "broker",
        "sizeQuotaLimitBytes": -1,
        "sizeQuotaPolicy": "producer_request_hold",
        "timeQuotaLimitSeconds": -1,
        "timeQuotaPolicy": "producer_request_hold",
        "policies": "{}",
    }
    topics = contract_frame(spark, TOPICS, [topic])
    ledger_df = contract_frame(
        spark,
        LEDGERS,
        [
            {
                "topic": T,
                "ledgerId": lid,
                "entries": n,
                "size": size,
                "closedAtMs": closed,
                "entriesStored": False,
            }
            for lid, n, size, closed in ledgers
        ],
    )
    cursor_df = contract_frame(
        spark,
        CURSORS,
        [
            {
                "topic": T,
                "name": n,
                "durable": d,
                "markDeleteLedger": lg,
                "markDeleteEntry": e,
                "consumers": 0,
            }
            for n, d, lg, e in cursors
        ],
    )
    return topics, ledger_df, cursor_df


def deleted(spark, ledgers, cursors=(), retention=(0, 0), as_of=AS_OF) -> list[int]:
    topics, ledger_df, cursor_df = frames(spark, ledgers, cursors, retention)
    rows = plan_ledger_decisions(topics, ledger_df, cursor_df, as_of).where("decision = 'delete'").collect()
    return sorted(r.ledgerId for r in rows)


CLOSED = [(1, 10, 100, 1000), (2, 10, 100, 2000), (3, 10, 100, 3000), (4, 5, 50, None)]


def test_mark_delete_on_last_entry_of_closed_ledger_frees_it(spark):
    assert deleted(spark, CLOSED, [("s", True, 2, 9)]) == [1, 2]


def test_mark_delete_before_last_entry_keeps_the_ledger(spark):
    assert deleted(spark, CLOSED, [("s", True, 2, 8)]) == [1]
    assert deleted(spark, CLOSED, [("s", True, 2, -1)]) == [1]
    assert deleted(spark, CLOSED, [("s", True, 1, -1)]) == []


def test_current_ledger_is_never_deleted_even_fully_consumed(spark):
    assert deleted(spark, CLOSED, [("s", True, 4, 4)]) == [1, 2, 3]
    assert deleted(spark, CLOSED, []) == [1, 2, 3]


def test_slowest_durable_cursor_bounds_and_readers_never_pin(spark):
    cursors = [("fast", True, 3, 9), ("slow", True, 1, 9), ("reader", False, 1, 0)]
    assert deleted(spark, CLOSED, cursors) == [1]
    assert deleted(spark, CLOSED, [("reader", False, 1, 0)]) == [1, 2, 3]


def test_time_rule_is_strict(spark):
    ledgers = [(1, 10, 100, AS_OF - 60_000), (2, 10, 100, AS_OF - 60_001), (3, 1, 10, None)]
    # retention 60 s, size infinite: ledger 1 closed exactly 60 s ago is not expired (now - ts > time).
    assert deleted(spark, ledgers, [], retention=(60_000, -1)) == []
    ledgers = [(1, 10, 100, AS_OF - 60_001), (2, 10, 100, AS_OF - 60_000), (3, 1, 10, None)]
    assert deleted(spark, ledgers, [], retention=(60_000, -1)) == [1]


def test_prefix_semantics_a_young_ledger_blocks_older_expired_ones_behind_it(spark):
    ledgers = [(1, 10, 100, AS_OF - 10), (2, 10, 100, 1000), (3, 1, 10, None)]
    assert deleted(spark, ledgers, [], retention=(60_000, -1)) == []


def test_size_rule_counts_what_would_remain_including_backlog_and_current(spark):
    ledgers = [(1, 1, MIB, 1), (2, 1, MIB, 2), (3, 1, MIB, 3), (4, 1, MIB, 4), (5, 1, MIB, None)]
    # 5 MiB total, quota 3 MiB, everything consumed up to ledger 4: delete while remainder >= 3 MiB.
    assert deleted(spark, ledgers, [("s", True, 4, 0)], retention=(-1, 3 * MIB)) == [1, 2]
    # Backlog counts: consumed only up to ledger 2, 3 MiB unconsumed+current -> still deletes 1 and 2.
    assert deleted(spark, ledgers, [("s", True, 2, 0)], retention=(-1, 3 * MIB)) == [1, 2]


def test_size_rule_total_equal_to_quota_keeps_everything(spark):
    ledgers = [(1, 1, MIB, 1), (2, 1, MIB, 2), (3, 1, MIB, None)]
    assert deleted(spark, ledgers, [("s", True, 2, 0)], retention=(-1, 3 * MIB)) == []
    # and a remainder exactly equal to the quota still allows the delete
    assert deleted(spark, ledgers, [("s", True, 2, 0)], retention=(-1, 2 * MIB)) == [1]


def test_infinite_and_zero_retention(spark):
    assert deleted(spark, CLOSED, [], retention=(-1, -1)) == []
    assert deleted(spark, CLOSED, [], retention=(0, 0)) == [1, 2, 3]
    # time 0 alone: every closed ledger with a close time before as-of is expired
    assert deleted(spark, CLOSED, [], retention=(0, -1)) == [1, 2, 3]


def test_empty_closed_ledger_in_the_walk(spark):
    ledgers = [(1, 10, 100, 1000), (2, 0, 0, 1500), (3, 10, 100, 2000), (4, 0, 0, None)]
    assert deleted(spark, ledgers, [("s", True, 3, 9)]) == [1, 2, 3]
    # (2, -1) on an empty closed ledger is its "last entry" (entries == e + 1), so ledger 2 goes too.
    assert deleted(spark, ledgers, [("s", True, 2, -1)]) == [1, 2]
    assert deleted(spark, ledgers, [("s", True, 3, -1)]) == [1, 2]


def test_cursor_in_a_ledger_no_longer_listed(spark):
    ledgers = [(5, 10, 100, 1000), (9, 10, 100, 2000), (12, 0, 0, None)]
    # mark-delete (7, 3): ledger 7 is gone; bound is 7, so ledger 5 goes and ledger 9 stays.
    assert deleted(spark, ledgers, [("s", True, 7, 3)]) == [5]


def test_durable_bounds_table(spark):
    _, ledger_df, cursor_df = frames(
        spark, CLOSED, [("a", True, 2, 9), ("b", True, 3, 1), ("r", False, 1, 0)]
    )
    expected = spark.createDataFrame(
        [(T, 4, 350, "a", 2, 9, 3)],
        "topic string, currentLedgerId long, totalSize long, slowestCursor string, slowestMdLedger long, "
        "slowestMdEntry long, boundLedgerId long",
    )
    got = durable_bounds(ledger_df, cursor_df).select(
        "topic",
        "currentLedgerId",
        "totalSize",
        "slowestCursor",
        "slowestMdLedger",
        "slowestMdEntry",
        "boundLedgerId",
    )
    assertDataFrameEqual(got, expected)


def test_readers_are_fast_forwarded_past_the_deleted_range(spark):
    topics, ledger_df, cursor_df = frames(
        spark, CLOSED, [("s", True, 2, 9), ("r", False, 1, 3), ("r2", False, 3, 0)]
    )
    decisions = plan_ledger_decisions(topics, ledger_df, cursor_df, AS_OF)
    moves = cursor_fast_forwards(decisions, cursor_df).select("subscription", "from", "to")
    assertDataFrameEqual(
        moves, spark.createDataFrame([("r", "1:3", "2:9")], "subscription string, `from` string, `to` string")
    )


def test_every_ledger_gets_a_reason_and_blockers_explain_what_is_kept(spark):
    topics, ledger_df, cursor_df = frames(spark, CLOSED, [("stale", True, 1, 4)], retention=(-1, -1))
    decisions = plan_ledger_decisions(topics, ledger_df, cursor_df, AS_OF)
    kinds = {r.ledgerId: r.kind for r in decisions.collect()}
    assert kinds == {
        1: "slowest_subscription",
        2: "slowest_subscription",
        3: "slowest_subscription",
        4: "current_ledger",
    }
    assert all(r.reason for r in decisions.collect())
    blockers = {r.kind: r for r in trim_blockers(decisions).collect()}
    assert blockers["slowest_subscription"].bytes == 300
    assert "'stale'" in blockers["slowest_subscription"].detail
    assert blockers["current_ledger"].bytes == 50


def test_retention_window_and_prefix_blocked_reasons(spark):
    ledgers = [(1, 10, 100, 1000), (2, 10, 100, AS_OF - 5), (3, 10, 100, 1000), (4, 0, 0, None)]
    topics, ledger_df, cursor_df = frames(spark, ledgers, [], retention=(60_000, -1))
    kinds = {r.ledgerId: r.kind for r in plan_ledger_decisions(topics, ledger_df, cursor_df, AS_OF).collect()}
    assert kinds == {
        1: "consumed_and_expired",
        2: "retention_window",
        3: "prefix_blocked",
        4: "current_ledger",
    }


def test_the_pinning_subscription_reason_says_how_long_it_has_been_idle(spark):
    topics, ledger_df, _ = frames(spark, CLOSED)
    stale = {"topic": T, "name": "stale", "durable": True, "markDeleteLedger": 1, "markDeleteEntry": 4}
    cursor_df = contract_frame(
        spark, CURSORS, [dict(stale, lastActiveMs=AS_OF - 50 * 3_600_000, consumers=0)]
    )
    reasons = {
        r.ledgerId: r.reason for r in plan_ledger_decisions(topics, ledger_df, cursor_df, AS_OF).collect()
    }
    assert "'stale' at mark-delete 1:4, last active 1969-12-30T" in reasons[2]
    assert "(50 h before as-of)" in reasons[2]
