"""The backtest's rules alone (docs/semantics.md §12.5), on histories written out by hand: when trim would first
have let a ledger go, how the alternative's deletion follows from it, and the bounds of the entries a stricter TTL
would have skipped before their subscription acknowledged them."""

from __future__ import annotations

import numpy as np
import pytest

from housekeeping.core.policies import BrokerConfig
from housekeeping.core.timeutil import format_ms
from housekeeping.observe.capacity.backtest import (
    INF,
    TRIM,
    History,
    LedgerFacts,
    Terms,
    TopicBytes,
    alternative_deletion,
    deletable_from,
    first_time,
    skipped_entries,
)
from housekeeping.store.cursor_history import CursorSeries
from housekeeping.store.policy_history import PolicyHistory

pytestmark = pytest.mark.unit

H = 3_600_000.0
TOPIC = "persistent://t/ns/a"


def terms(retention_h: float = -1, size: float = -1, ttl_h: float = 0) -> Terms:
    return Terms(retention_h * H if retention_h >= 0 else -1, size, ttl_h * H, -1, -1)


def ledger(
    i: int, closed_h: float, size: int = 1000, entries: int = 6, last_h: float | None = None, **more
) -> LedgerFacts:
    """Entries published evenly from the hour before the close to ``last_h`` (default: the close)."""
    last = closed_h if last_h is None else last_h
    return LedgerFacts(i, entries, size, (closed_h - 1) * H, last * H, closed_h * H, **more)


def history(ledgers: list[LedgerFacts], cursors: dict[str, CursorSeries] | None = None) -> History:
    return History(
        {TOPIC: ledgers},
        {TOPIC: cursors} if cursors else {},
        [],
        {TOPIC},
        PolicyHistory(),
        BrokerConfig.from_layers(),
    )


def series(*points: tuple[float, int, int]) -> CursorSeries:
    array = np.array(points, dtype=np.float64)
    return CursorSeries(array[:, 0] * H, array[:, 1].astype(np.int64), array[:, 2].astype(np.int64))


def test_first_time_takes_the_first_interval_whose_terms_hold_before_it_ends():
    timeline = [(-INF, terms(retention_h=10)), (5 * H, terms(retention_h=1)), (20 * H, terms(retention_h=0))]
    # Closed at 1 h: under 10 h not before 11 h, but from 5 h the 1 h retention has already passed: 5 h.
    assert first_time(timeline, lambda x: 1 * H + x.retention_time_ms) == 5 * H
    # Without the change: 11 h.
    assert first_time(timeline[:1], lambda x: 1 * H + x.retention_time_ms) == 11 * H
    assert first_time([(-INF, terms())], lambda x: INF) == INF


def test_the_bytes_after_a_ledger_reach_a_size_within_the_ledger_that_crosses_it():
    sizes = TopicBytes([ledger(1, 1), ledger(2, 2, size=2000), ledger(3, 3, size=4000)])
    # After ledger 1: 2000 B arrive over 1-2 h, then 4000 B over 2-3 h. 3000 B: a quarter into ledger 3.
    assert sizes.after_reaches(0, 3000) == pytest.approx(2.25 * H)
    assert sizes.after_reaches(0, 2000) == pytest.approx(2 * H)
    assert sizes.after_reaches(0, 7000) == INF
    assert sizes.after_reaches(2, 1) == INF
    assert sizes.after_reaches(0, -1) == INF


def test_a_ledger_goes_when_closed_consumed_and_past_the_retention_oldest_first():
    # Consumed at kept runs: the subscription past ledger 1 at 2 h and past ledger 2 at 6 h.
    cursors = {"sub": series((2, 2, -1), (6, 3, -1))}
    ledgers = [ledger(1, 1), ledger(2, 2), ledger(3, 3), LedgerFacts(4, 0, 0, 4 * H, 4 * H, INF)]
    known = history(ledgers, cursors)
    # Retention 2 h: ledger 1 closed at 1 h -> 3 h (consumed at 2 h); ledger 2 -> consumed at 6 h;
    # ledger 3 never consumed; the open ledger never.
    assert deletable_from(TOPIC, [(-INF, terms(retention_h=2))], known) == [3 * H, 6 * H, INF, INF]
    # Retention 0 (no retention): each as soon as consumed.
    assert deletable_from(TOPIC, [(-INF, terms(retention_h=0, size=0))], known)[:2] == [2 * H, 6 * H]
    # Infinite retention: never.
    assert deletable_from(TOPIC, [(-INF, terms())], known) == [INF] * 4
    # A size of 1500 B: ledger 1 once 1500 B arrived after it (ledger 2's 1000 B over 1-2 h, ledger 3's over
    # 2-3 h: 2.5 h).
    assert deletable_from(TOPIC, [(-INF, terms(size=1500))], known)[0] == pytest.approx(2.5 * H)


def test_a_ttl_expires_what_no_subscription_consumed_and_trim_then_takes_it():
    ledgers = [ledger(1, 1), ledger(2, 2), LedgerFacts(3, 0, 0, 3 * H, 3 * H, INF)]
    stuck = history(ledgers, {"sub": series((5, 1, -1))})
    # Never consumed: kept forever under retention 0 ... until a TTL of 3 h expires ledger 1's last entry (1 h)
    # at 4 h and ledger 2's at 5 h.
    assert deletable_from(TOPIC, [(-INF, terms(retention_h=0, size=0))], stuck)[:2] == [INF, INF]
    assert deletable_from(TOPIC, [(-INF, terms(retention_h=0, size=0, ttl_h=3))], stuck)[:2] == [4 * H, 5 * H]


def test_a_topic_never_seen_with_a_durable_subscription_has_every_closed_ledger_consumed():
    ledgers = [ledger(1, 1), LedgerFacts(2, 0, 0, 2 * H, 2 * H, INF)]
    alone = History({TOPIC: ledgers}, {}, [], set(), PolicyHistory(), BrokerConfig.from_layers())
    assert deletable_from(TOPIC, [(-INF, terms(retention_h=3))], alone) == [4 * H, INF]


def test_trims_deletion_is_evidence_of_consumption():
    ledgers = [ledger(1, 1, deleted_ms=7 * H, deleted_by=TRIM), LedgerFacts(2, 0, 0, 2 * H, 2 * H, INF)]
    assert deletable_from(TOPIC, [(-INF, terms(retention_h=0, size=0))], history(ledgers))[0] == 7 * H


def test_the_alternative_deletion_keeps_the_records_where_both_agree_and_the_runs_delay_where_not():
    deleted = ledger(1, 1, deleted_ms=7 * H, deleted_by=TRIM)
    assert alternative_deletion(deleted, 6 * H, 6 * H) == 7 * H  # agree: as it was
    assert alternative_deletion(deleted, 6 * H, 3 * H) == 4 * H  # 3 h earlier, the hour's delay kept
    assert alternative_deletion(deleted, 6 * H, INF) == INF  # kept for good
    kept = ledger(1, 1)  # never deleted
    assert alternative_deletion(kept, INF, 3 * H) == 3 * H
    # Another mechanism deleted it (inactive-topic GC): the retention does not decide it.
    assert alternative_deletion(ledger(1, 1, deleted_ms=7 * H, deleted_by="gc"), 6 * H, 3 * H) == 7 * H
    # A restored ledger keeps its record.
    assert (
        alternative_deletion(ledger(1, 1, deleted_ms=7 * H, deleted_by=TRIM, restored=True), 6 * H, 3 * H)
        == 7 * H
    )


def test_skipped_entries_are_bounded_by_the_kept_runs_around_each_deadline():
    # Ledger 1: 6 entries published 0:00-0:50 (closed 1 h); ledger 2: 6 entries 1:00-1:50 (closed 2 h).
    ledgers = [ledger(1, 1, size=600, last_h=5 / 6), ledger(2, 2, size=600, last_h=1 + 5 / 6)]
    # Kept runs: at 2:15 the subscription had acknowledged ledger 1 whole, at 3 h still, at 5 h everything.
    cursors = {"sub": series((2.25, 1, 5), (3, 1, 5), (5, 2, 5))}
    known = history(ledgers, cursors)
    off = [(-INF, terms(retention_h=0, size=0))]
    one_hour = [(-INF, terms(retention_h=0, size=0, ttl_h=1))]
    counted = skipped_entries(TOPIC, off, one_hour, known, (0, 10 * H))
    # Ledger 1's deadlines (1:00-1:50): no kept run before them, the one after had them acknowledged: high only.
    # Ledger 2's (2:00-2:50): the kept runs after each still had them unacknowledged: low and high.
    assert {k: v for k, v in counted["sub"].items() if k in ("low", "high")} == {"low": 6, "high": 12}
    assert (counted["sub"]["from"], counted["sub"]["to"]) == (
        format_ms(int(H)),
        format_ms(int(2 * H + 50 * H / 60)),
    )
    # The same TTL as in force skips nothing more.
    assert skipped_entries(TOPIC, one_hour, one_hour, known, (0, 10 * H)) == {}
    # Deadlines outside the period are not counted: from 2 h on, ledger 2 only.
    later = skipped_entries(TOPIC, off, one_hour, known, (2 * H, 10 * H))["sub"]
    assert (later["low"], later["high"]) == (6, 6)


def test_a_ledger_of_one_entry_is_counted_too():
    known = history([ledger(1, 1, entries=1, size=100, last_h=0.5)], {"sub": series((3, 1, -1))})
    off = [(-INF, terms(retention_h=0, size=0))]
    one_hour = [(-INF, terms(retention_h=0, size=0, ttl_h=1))]
    skipped = skipped_entries(TOPIC, off, one_hour, known, (0, 10 * H))["sub"]
    # Published at 0:00, due at 1:00, still unacknowledged at the kept run at 3 h.
    assert (skipped["low"], skipped["high"]) == (1, 1)
