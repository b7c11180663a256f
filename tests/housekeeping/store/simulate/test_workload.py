"""The simulation's declarations: Pulsar's ledger rollover rule, the options' checks, the ack profiles' shares."""

from __future__ import annotations

import random

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.policies import BrokerConfig
from housekeeping.store.simulate.workload import (
    Clock,
    Operation,
    Profile,
    Rollover,
    Workload,
    latency_figures,
    parse_operations,
)

pytestmark = pytest.mark.unit

MINUTE = 60_000
RULE = Rollover(max_entries=100, max_bytes=10_000, min_ms=10 * MINUTE, max_ms=240 * MINUTE)


@pytest.mark.parametrize(
    ("entries", "size", "open_ms", "full"),
    [
        (99, 0, 60 * MINUTE, False),  # under every limit
        (100, 0, 60 * MINUTE, True),  # the entry limit, open longer than the minimum
        (0, 10_000, 60 * MINUTE, True),  # the size limit
        (100, 0, 10 * MINUTE, False),  # full, but open only the minimum: not yet (strictly longer, as Pulsar)
        (100, 0, 10 * MINUTE + 1, True),
        (1, 0, 240 * MINUTE, True),  # the maximum time, whatever it holds
        (1, 0, 240 * MINUTE - 1, False),
    ],
)
def test_a_ledger_rolls_as_pulsars_current_ledger_is_full(entries, size, open_ms, full):
    assert RULE.is_full(entries, size, open_ms, RULE.max_ms) is full


def test_without_a_minimum_a_full_ledger_rolls_at_once():
    rule = Rollover(max_entries=5, max_bytes=10_000, min_ms=0, max_ms=MINUTE)
    assert rule.is_full(5, 0, 0, rule.max_ms)


def test_the_maximum_time_is_spread_up_to_five_percent_above_per_ledger():
    rng = random.Random(3)
    limits = [RULE.jittered_max_ms(rng) for _ in range(500)]
    assert min(limits) >= RULE.max_ms
    assert max(limits) <= RULE.max_ms * 1.05
    assert len(set(limits)) > 400


def test_the_rule_defaults_to_the_brokers_settings_and_an_option_overrides_each():
    broker = BrokerConfig.from_layers(("test", {"managedLedgerMaxEntriesPerLedger": 7}))
    rule = Rollover.of(broker)
    assert (rule.max_entries, rule.max_bytes, rule.min_ms, rule.max_ms) == (
        7,
        2048 * 1024 * 1024,
        10 * MINUTE,
        240 * MINUTE,
    )
    assert Rollover.of(broker, max_entries=3, min_seconds=0, max_seconds=30).max_ms == 30_000
    with pytest.raises(InputError, match="--ledger-max-entries"):
        Rollover.of(broker, max_entries=0)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"duration_seconds": 0}, "--duration"),
        ({"rate": -1}, "--rate"),
        ({"rate": float("nan")}, "--rate"),
        ({"batch": 0}, "--batch"),
        ({"topics": 0}, "--topics"),
        ({"stuck_share": 1.5}, "--stuck-share"),
        ({"stuck_share": 0.6, "lagging_share": 0.6}, "--stuck-share \\+ --lagging-share"),
        ({"max_lag": 0}, "--max-lag"),
        ({"payload_bytes": 0}, "--payload-bytes"),
        ({"clock": Clock.SIMULATED}, "--clock simulated needs --start"),
        ({"start_ms": 0}, "--start"),
    ],
)
def test_each_bad_option_is_refused_by_its_name(change, named):
    with pytest.raises(InputError, match=named):
        Workload(**{"duration_seconds": 60, **change})


def test_profiles_are_drawn_in_their_shares():
    workload = Workload(duration_seconds=1, stuck_share=0.2, lagging_share=0.3, max_lag=50)
    rng = random.Random(11)
    drawn = [workload.draw_profile(rng) for _ in range(4000)]
    share = {p: sum(1 for d, _ in drawn if d is p) / len(drawn) for p in Profile}
    assert share[Profile.STUCK] == pytest.approx(0.2, abs=0.03)
    assert share[Profile.LAGGING] == pytest.approx(0.3, abs=0.03)
    lags = [lag for p, lag in drawn if p is Profile.LAGGING]
    assert min(lags) >= 1 and max(lags) <= 50
    assert all(lag == 0 for p, lag in drawn if p is not Profile.LAGGING)


def test_operations_are_named_as_on_the_command_line():
    assert parse_operations("all") == tuple(Operation)
    assert parse_operations("none") == ()
    assert parse_operations("hold, subscribe,hold") == (Operation.HOLD, Operation.SUBSCRIBE)
    with pytest.raises(InputError, match="--ops: unknown operation 'compact'"):
        parse_operations("subscribe,compact")


def test_latency_percentiles():
    figures = latency_figures([float(v) for v in range(1, 101)])
    assert figures == {"count": 100, "p50": 50.5, "p99": 99.01, "max": 100.0}
    assert latency_figures([]) == {"count": 0, "p50": None, "p99": None, "max": None}
