"""Backlog-quota rules as pure functions (Pulsar BacklogQuotaManager / PersistentTopic semantics)."""

from __future__ import annotations

import pytest

from housekeeping.core.topic_ledgers import Ledger, TopicLedgers, consumed_ledger_size
from spark_apps.backlog.quota import evict_for_size, evict_for_time, plan_topic

pytestmark = pytest.mark.unit

MIN = 60_000
AS_OF = 1_000 * MIN


def ten_ledgers() -> list[Ledger]:
    # ledgers 1..9 closed (10 entries x 1000 B), one closed per minute up to 10 min before as-of; 10 = open
    return [Ledger(i, 10, 1000, AS_OF - (20 - i) * MIN) for i in range(1, 10)] + [Ledger(10, 4, 400, None)]


def topic(**overrides) -> dict:
    base = {
        "topic": "persistent://t/n/x",
        "isSystemTopic": False,
        "sizeQuotaLimitBytes": -1,
        "sizeQuotaPolicy": "producer_request_hold",
        "timeQuotaLimitSeconds": -1,
        "timeQuotaPolicy": "producer_request_hold",
        "asOfMs": AS_OF,
        "precise": False,
        "checkEnabled": True,
        "stored": {},
    }
    base.update(overrides)
    return base


def test_estimated_backlog_is_pulsars_average_entry_estimate():
    ledgers = TopicLedgers(ten_ledgers())
    assert ledgers.estimated_backlog_bytes((1, -1)) == 9400
    assert ledgers.estimated_backlog_bytes((1, 9)) == 8400  # last entry of a closed ledger: all of it
    assert ledgers.estimated_backlog_bytes((1, 4)) == 9400 - 500
    assert consumed_ledger_size(1000, 3, 0) == 333  # integer average, as Java's long division
    assert ledgers.estimated_backlog_bytes((0, 5)) == 9400  # ledger gone: everything from the next one


def test_size_eviction_skips_the_slowest_cursor_to_90_percent_of_the_limit():
    ledgers = TopicLedgers(ten_ledgers())
    result = evict_for_size(ledgers, {"slow": (1, -1), "fast": (9, 9)}, limit_bytes=5000)
    first = result.steps[0]
    # backlog 9400 > target 4500: skip (int)((9400 - 4500) / 9400 * 94) = 49 entries
    assert (first.cursor, first.entries_skipped) == ("slow", 49)
    assert first.to_position == (5, 8)
    # 9400 - 4 ledgers below (4000) - 9 entries of ledger 5 (900) = 4500: not above the target, so one step only
    assert ledgers.estimated_backlog_bytes(first.to_position) == 4500
    assert len(result.steps) == 1
    assert result.stopped == "estimated backlog 4500 B <= target 4500 B"


def test_size_eviction_triggers_at_equal_and_never_moves_the_compaction_cursor():
    ledgers = TopicLedgers(ten_ledgers())
    out = plan_topic(
        topic(sizeQuotaLimitBytes=9400, sizeQuotaPolicy="consumer_backlog_eviction"),
        ten_ledgers(),
        {"sub": (1, -1)},
    )
    assert out["sizeExceeded"] and out["handled"] == "destination_storage" and out["steps"]
    blocked = evict_for_size(ledgers, {"__compaction": (1, -1), "sub": (3, 0)}, limit_bytes=5000)
    assert blocked.steps == [] and "compaction" in blocked.stopped


def test_time_eviction_skips_whole_old_ledgers_and_stops_at_the_open_ledger():
    # limit 1 s: every closed ledger is old; the cursor ends at (current, -1), the open ledger is kept
    result = evict_for_time(TopicLedgers(ten_ledgers()), {"sub": (1, 3)}, limit_seconds=1, as_of_ms=AS_OF)
    assert [s.to_position for s in result.steps] == [(i, -1) for i in range(2, 11)]
    assert "open ledger 10" in result.stopped
    # limit 15 min: ledgers closed more than 15 min before as-of are 1..4 (closed 19..16 min before)
    result = evict_for_time(
        TopicLedgers(ten_ledgers()), {"sub": (1, 3)}, limit_seconds=15 * 60, as_of_ms=AS_OF
    )
    assert result.steps[-1].to_position == (5, -1)


def test_time_eviction_moves_every_old_cursor_but_leaves_the_compaction_cursor():
    result = evict_for_time(
        TopicLedgers(ten_ledgers()),
        {"__compaction": (1, 0), "a": (2, 5), "b": (9, 9)},
        limit_seconds=1,
        as_of_ms=AS_OF,
    )
    assert {s.cursor for s in result.steps} == {"a", "b"}


def test_a_size_limit_of_0_is_exceeded_with_no_durable_cursor_and_readers_never_count():
    """Pulsar's estimate is 0 without a durable cursor (the Spark app passes durable cursors only, so a topic read
    only by readers has none), and ``isSizeBacklogExceeded`` compares ``>=``: a limit of 0 is exceeded and producers
    are refused; a limit of 1 is not."""
    ledgers = [Ledger(1, 2, 100, AS_OF - MIN), Ledger(2, 0, 0, None)]
    out = plan_topic(topic(sizeQuotaLimitBytes=0), ledgers, {})
    assert (out["backlogBytes"], out["sizeExceeded"], out["handled"]) == (0, True, "destination_storage")
    [state] = out["states"]
    assert (state["exceeded"], state["measuredValue"], state["limitValue"]) == (True, 0, 0)
    assert out["steps"] == []
    evicting = plan_topic(
        topic(sizeQuotaLimitBytes=0, sizeQuotaPolicy="consumer_backlog_eviction"), ledgers, {}
    )
    assert evicting["sizeExceeded"] and evicting["steps"] == []
    mirror = plan_topic(topic(sizeQuotaLimitBytes=1), ledgers, {})
    assert not mirror["sizeExceeded"] and mirror["states"] == [] and mirror["handled"] is None


def test_a_cursor_skipped_onto_anothers_position_stays_the_slowest_and_the_size_loop_stops():
    """Pulsar's cursor heap sifts a moved cursor down only past a strictly smaller position: both cursors at 1:-1,
    backlog 10010 B >= limit 10010 B, target 9009 B: ``a`` skips 2 entries to 1:1, ``b`` (now strictly behind) skips
    2 to 1:1; ``b`` is still the slowest (``a`` is not strictly behind it), so the loop stops with both at 1:1."""
    ledgers = TopicLedgers(
        [Ledger(1, 10, 10, AS_OF - MIN), Ledger(2, 10, 10_000, AS_OF - MIN), Ledger(3, 0, 0, None)]
    )
    result = evict_for_size(ledgers, {"a": (1, -1), "b": (1, -1)}, limit_bytes=10_010)
    assert [(s.cursor, s.from_position, s.to_position) for s in result.steps] == [
        ("a", (1, -1), (1, 1)),
        ("b", (1, -1), (1, 1)),
    ]
    assert result.stopped == "cursors not progressing (cursor 'b' is still the slowest)"
    # the mirror: left strictly behind, a cursor is the slowest and moves next
    result = evict_for_size(ledgers, {"a": (1, -1), "b": (1, 0), "c": (1, 5)}, limit_bytes=10_010)
    assert [(s.cursor, s.to_position) for s in result.steps] == [("a", (1, 1)), ("b", (1, 1))]
    assert "'b' is still the slowest" in result.stopped


def test_time_eviction_stops_before_an_empty_current_ledger():
    """Not precise: 1:-1 -> 2:-1 past the old ledger 1; then 3:-1 would be past the last entry 2:4 with the cursor
    not at the end of ledger 2, a mark-delete Pulsar's cursor refuses, so the loop ends at 2:-1. With an entry in
    the current ledger (the mirror), 3:-1 is before the last entry and the cursor gets there."""
    old = AS_OF - 10_000
    empty = [Ledger(1, 5, 50, old), Ledger(2, 5, 50, old), Ledger(3, 0, 0, None)]
    result = evict_for_time(TopicLedgers(empty), {"sub": (1, -1)}, limit_seconds=5, as_of_ms=AS_OF)
    assert [s.to_position for s in result.steps] == [(2, -1)]
    assert result.stopped == "cursor 'sub': 3:-1 is past the last entry 2:4, a mark-delete the cursor refuses"
    written = [*empty[:2], Ledger(3, 1, 10, None)]
    result = evict_for_time(TopicLedgers(written), {"sub": (1, -1)}, limit_seconds=5, as_of_ms=AS_OF)
    assert [s.to_position for s in result.steps] == [(2, -1), (3, -1)]
    assert "open ledger 3" in result.stopped


def test_the_check_switched_off_records_the_quota_states_but_evicts_nothing():
    """``backlogQuotaCheckEnabled=false`` stops the monitor, but producer admission still checks the quotas."""
    off = topic(sizeQuotaLimitBytes=5000, checkEnabled=False)
    [state] = plan_topic(off, ten_ledgers(), {"s": (1, -1)})["states"]
    assert state["exceeded"] and state["quotaType"] == "destination_storage"
    evicting = dict(off, sizeQuotaPolicy="consumer_backlog_eviction")
    out = plan_topic(evicting, ten_ledgers(), {"s": (1, -1)})
    assert out["sizeExceeded"] and out["handled"] is None and out["steps"] == []
    assert out["note"].startswith("backlog quota check disabled")
    # the mirror: with the check on the same topic is evicted
    assert plan_topic(dict(evicting, checkEnabled=True), ten_ledgers(), {"s": (1, -1)})["steps"]


def test_time_quota_measures_the_close_time_of_the_first_unacknowledged_ledger():
    # first unacked entry in ledger 2 (md at 1:9), closed 18 min before as-of
    exceeded = plan_topic(topic(timeQuotaLimitSeconds=17 * 60), ten_ledgers(), {"s": (1, 9)})
    assert exceeded["timeExceeded"] and exceeded["oldestBacklogAgeSeconds"] == 18 * 60
    assert not plan_topic(topic(timeQuotaLimitSeconds=18 * 60), ten_ledgers(), {"s": (1, 9)})["timeExceeded"]
    # mark-delete in the open ledger: no estimate, not exceeded
    assert not plan_topic(topic(timeQuotaLimitSeconds=1), ten_ledgers(), {"s": (10, 1)})["timeExceeded"]


def test_producer_quota_state_is_set_then_kept_with_its_start_then_cleared():
    hold = topic(sizeQuotaLimitBytes=5000)
    first = plan_topic(hold, ten_ledgers(), {"s": (1, -1)})
    [state] = first["states"]
    assert state["exceeded"] and state["exceededSinceMs"] == AS_OF and first["steps"] == []
    later = dict(hold, asOfMs=AS_OF + MIN, stored={"destination_storage": dict(state, limitValue=5000)})
    [still] = plan_topic(later, ten_ledgers(), {"s": (1, -1)})["states"]
    assert still["exceeded"] and still["exceededSinceMs"] == AS_OF, "since = when it began"
    [cleared] = plan_topic(later, ten_ledgers(), {"s": (8, 9)})["states"]
    assert not cleared["exceeded"] and cleared["wasExceeded"]
    # never exceeded and not exceeded now: nothing to record
    assert plan_topic(hold, ten_ledgers(), {"s": (9, 9)})["states"] == []


def test_size_is_handled_before_time_and_system_topics_are_exempt():
    both = topic(
        sizeQuotaLimitBytes=1000,
        sizeQuotaPolicy="consumer_backlog_eviction",
        timeQuotaLimitSeconds=1,
        timeQuotaPolicy="consumer_backlog_eviction",
    )
    out = plan_topic(both, ten_ledgers(), {"s": (1, -1)})
    assert out["handled"] == "destination_storage" and all(
        s["quotaType"] == "destination_storage" for s in out["steps"]
    )
    system = plan_topic(dict(both, isSystemTopic=True), ten_ledgers(), {"s": (1, -1)})
    assert system["steps"] == [] and "system topic" in system["note"]
