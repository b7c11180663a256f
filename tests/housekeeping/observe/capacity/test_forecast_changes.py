"""The forecast follows a change of rate and not a wobble (docs/semantics.md §12.3), on stores with known histories
(metadata-only manifests: one ledger closed every hour, its bytes arriving at its close): a namespace younger than
the window, a step up and a step down, a burst that ended, a weekly cycle; the soonest credible answer; and the
choice itself on exact series. Each store's backtest (the forecast made a day before the as-of against what the
record says producers added that day) is asserted within its bound."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from housekeeping.observe.capacity.forecast import DAY_MS, Fit, Series, choose_growth, forecast
from housekeeping.observe.capacity.record import read_record
from housekeeping.store.store import Store
from tests.conftest import load_store, topic_body

pytestmark = pytest.mark.unit

HOUR = 3_600_000
T0 = 1_790_000_000_000 - 1_790_000_000_000 % DAY_MS  # 2026-09-21T00:00:00Z, a Monday
MIB = 1024 * 1024
DAYS = 30
AS_OF = T0 + DAYS * DAY_MS


def hourly(rate: Callable[[int], float], first_hour: int = 0, hours: int = DAYS * 24) -> dict:
    """A topic with one ledger closed at the end of each hour from ``first_hour`` (hours after T0) until the
    as-of, of ``rate(hour)`` MiB; nothing consumed (its backlog is all it holds)."""
    ledgers = [
        (h - first_hour + 1, 100, int(rate(h) * MIB), T0 + (h + 1) * HOUR) for h in range(first_hour, hours)
    ]
    ledgers.append((len(ledgers) + 1, 0, 0, None))
    return topic_body(ledgers, {"sub": "1:-1"})


def quota(limit_bytes: int) -> dict:
    return {
        "backlog_quota_map": {
            "destination_storage": {"limitSize": limit_bytes, "policy": "producer_request_hold"}
        }
    }


def run_forecast(capsys, tmp_path, namespaces: dict, topics: dict, as_of: int = AS_OF, **options) -> dict:
    store = load_store(capsys, tmp_path, {"namespaces": namespaces, "topics": topics})
    options = {"horizon_s": 120 * 86_400, "backtest_days": 1, **options}
    return forecast(read_record(Store.open(store), as_of), **options)


def growth_of(document: dict, namespace: str) -> dict:
    return next(g for g in document["growth"] if g["namespace"] == namespace)


def limit_of(document: dict, namespace: str, limit: str = "backlog_quota_size") -> dict:
    return next(r for r in document["limits"] if r["namespace"] == namespace and r["limit"] == limit)


def backtest_of(document: dict, namespace: str) -> float:
    return next(r for r in document["backtest"] if r["namespace"] == namespace)["relativeError"]


def test_a_namespace_younger_than_the_window_is_fitted_from_its_own_first_ingest(capsys, tmp_path):
    """The operator's case: a record 30 days old, a namespace created two days ago growing 1 MiB an hour, its
    backlog 48 MiB against a 96 MiB quota: met in about two days (it was "never")."""
    document = run_forecast(
        capsys,
        tmp_path,
        {"t/old": {}, "t/new": quota(96 * MIB)},
        {
            "persistent://t/old/a": hourly(lambda h: 0.5),
            "persistent://t/new/a": hourly(lambda h: 1.0, (DAYS - 2) * 24),
        },
    )
    growth = growth_of(document, "t/new")
    assert growth["basis"] == "since_first_ingest" and growth["from"] == "2026-10-19T01:00:00.000Z", growth
    assert growth["bytesPerDay"] == pytest.approx(24 * MIB, rel=0.10)
    row = limit_of(document, "t/new")
    assert row["currentBytes"] == 48 * MIB
    assert row["secondsUntil"] == pytest.approx(2 * 86_400, rel=0.10)
    assert row["low"] <= row["secondsUntil"] <= row["high"]
    assert growth_of(document, "t/old")["basis"] == "window"
    assert abs(backtest_of(document, "t/new")) < 0.10


@pytest.mark.parametrize("before,after", [(1.0, 3.0), (3.0, 1.0)], ids=["step-up", "step-down"])
def test_a_step_in_rate_two_days_ago_is_followed_and_the_soonest_answer_is_kept(
    capsys, tmp_path, before, after
):
    change_hour = (DAYS - 2) * 24
    document = run_forecast(
        capsys,
        tmp_path,
        {"t/ns": quota(3000 * MIB)},
        {"persistent://t/ns/a": hourly(lambda h: before if h < change_hour else after)},
    )
    growth = growth_of(document, "t/ns")
    assert growth["basis"] == "since_change", growth
    assert growth["bytesPerDay"] == pytest.approx(24 * after * MIB, rel=0.10)
    assert growth["windowBytesPerDay"] == pytest.approx(24 * before * MIB, rel=0.10)
    assert "the rate changed at 2026-10-19" in growth["why"], growth["why"]
    row = limit_of(document, "t/ns")
    held = row["currentBytes"]
    assert held == pytest.approx((24 * (DAYS - 2) * before + 48 * after) * MIB, rel=0.001)
    assert row["secondsUntil"] == pytest.approx((3000 * MIB - held) / (24 * after * MIB) * 86_400, rel=0.10)
    # The alert's answer is the sooner of the two credible ones: the new rate's when it rose, the window's when
    # it fell.
    if after > before:
        assert row["soonestSecondsUntil"] == row["secondsUntil"]
    else:
        assert row["soonestSecondsUntil"] < row["secondsUntil"] / 2
    assert abs(backtest_of(document, "t/ns")) < 0.10


def test_a_burst_that_ended_is_not_chased(capsys, tmp_path):
    """Twelve hours at ten times the rate, ended three days before the as-of: the answer stays the steady rate."""
    burst = range((DAYS - 3) * 24 - 12, (DAYS - 3) * 24)
    document = run_forecast(
        capsys, tmp_path, {"t/ns": {}}, {"persistent://t/ns/a": hourly(lambda h: 10.0 if h in burst else 1.0)}
    )
    growth = growth_of(document, "t/ns")
    assert growth["basis"] == "window", growth
    assert growth["bytesPerDay"] == pytest.approx(24 * MIB, rel=0.10)
    assert abs(backtest_of(document, "t/ns")) < 0.10


@pytest.mark.parametrize("weekday", range(7))
def test_a_weekly_cycle_is_not_taken_for_a_change_whatever_the_day(capsys, tmp_path, weekday):
    """Weekdays at 2 MiB an hour, weekends at 0.5: on each day of the week the forecast keeps the window's rate,
    within 15 % of the week's mean, and its week-ahead backtest within 15 %."""
    as_of = AS_OF + weekday * DAY_MS  # 2026-10-21, a Wednesday, and the six days after

    def rate(hour: int) -> float:
        return 0.5 if (hour // 24) % 7 in (5, 6) else 2.0

    document = run_forecast(
        capsys,
        tmp_path,
        {"t/ns": {}},
        {"persistent://t/ns/a": hourly(rate, 0, DAYS * 24 + weekday * 24)},
        as_of,
        backtest_days=7,
    )
    growth = growth_of(document, "t/ns")
    assert growth["basis"] == "window", growth
    assert growth["bytesPerDay"] == pytest.approx((5 * 2.0 + 2 * 0.5) / 7 * 24 * MIB, rel=0.15)
    assert abs(backtest_of(document, "t/ns")) < 0.15


def test_steady_growth_keeps_the_window_and_the_soonest_answer_is_the_answer(capsys, tmp_path):
    document = run_forecast(
        capsys, tmp_path, {"t/ns": quota(1000 * MIB)}, {"persistent://t/ns/a": hourly(lambda h: 1.0)}
    )
    growth = growth_of(document, "t/ns")
    assert (growth["basis"], growth["why"]) == ("window", "steady since the window's start")
    assert growth["bytesPerDay"] == growth["windowBytesPerDay"]
    row = limit_of(document, "t/ns")
    assert row["soonestSecondsUntil"] == row["secondsUntil"] is not None


# The choice on exact series: 29 points a day apart, the recent span 29 points over its last week.


def _series(rate: Callable[[float], float], days: float = 28.0, recent_days: float = 7.0) -> Series:
    """Cumulative ingest of ``rate(day)`` bytes a day, integrated finely, as the forecast samples it."""
    grid = np.linspace(0.0, days, int(days * 96) + 1)
    cumulative = np.concatenate([[0.0], np.cumsum([rate(d) * (grid[1] - grid[0]) for d in grid[:-1]])])

    def at(days_at: np.ndarray) -> np.ndarray:
        return np.interp(days_at, grid, cumulative)

    times = np.linspace(0.0, days, 29)
    recent = np.linspace(days - recent_days, days, 29)
    earlier = recent - 7 if recent[0] - 7 >= 0 else None
    ms = [int(T0 + d * DAY_MS) for d in times]
    recent_ms = [int(T0 + d * DAY_MS) for d in recent]
    return Series(ms, at(times), recent_ms, at(recent), None if earlier is None else at(earlier))


def test_the_choice_on_exact_series():
    steady = choose_growth(_series(lambda d: 100.0), "window")
    assert steady.basis == "window" and steady.fit.per_day == pytest.approx(100.0)
    up = choose_growth(_series(lambda d: 100.0 if d < 26 else 300.0), "window")
    assert up.basis == "since_change" and up.fit.per_day == pytest.approx(300.0, rel=0.05)
    assert up.from_ms == pytest.approx(T0 + 26 * DAY_MS, abs=6 * 3_600_000)
    # A change ten days ago, before the recent week: the whole week's rate.
    early = choose_growth(_series(lambda d: 100.0 if d < 18 else 50.0), "window")
    assert early.basis == "since_change" and early.fit.per_day == pytest.approx(50.0, rel=0.05)
    # A small change (x1.3) is a wobble, not a change.
    small = choose_growth(_series(lambda d: 100.0 if d < 25 else 130.0), "window")
    assert small.basis == "window"
    # No growth, then some: a change from nothing.
    woke = choose_growth(_series(lambda d: 0.0 if d < 25 else 80.0), "window")
    assert woke.basis == "since_change" and woke.fit.per_day == pytest.approx(80.0, rel=0.05)
    assert woke.window.per_day == 0.0
    assert isinstance(woke.window, Fit)
