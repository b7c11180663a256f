"""The piecewise-linear bytes curves: integrals against hand-computed ones, values and peaks against a dense
evaluation of random segments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from housekeeping.observe.capacity.curves import Segments, byte_ms, peak, value_at

pytestmark = pytest.mark.unit
INF = math.inf


def test_a_step_integrates_to_size_times_time_inside_the_window():
    # 1000 bytes from t=10 to t=30, window [0, 20): 1000 x 10.
    segments = Segments.of([(0, 1000, 10, 10, 10, 30)], 1)
    assert byte_ms(segments, 0, 20).tolist() == [10_000.0]
    assert value_at(segments, 29).tolist() == [1000.0] and value_at(segments, 30).tolist() == [0.0]


def test_a_ramp_integrates_to_its_triangle_then_its_rectangle():
    # 600 bytes arriving linearly over [0, 60), kept until 100: 600 x 60 / 2 + 600 x 40.
    segments = Segments.of([(0, 600, 0, 60, -INF, 100)], 1)
    assert byte_ms(segments, -50, 200).tolist() == [600 * 60 / 2 + 600 * 40]
    assert value_at(segments, 30).tolist() == [300.0]
    # A window cutting the ramp: from 30 to 60 the bytes go 300 -> 600.
    assert byte_ms(segments, 30, 60).tolist() == [(300 + 600) / 2 * 30]


def test_groups_sum_apart():
    segments = Segments.of([(0, 10, 0, 0, 0, INF), (1, 5, 0, 0, 0, INF), (1, 5, 0, 0, 0, 10)], 2)
    assert byte_ms(segments, 0, 20).tolist() == [200.0, 5 * 20 + 5 * 10]
    assert peak(segments, 0, 20).tolist() == [10.0, 10.0]


def test_a_deletion_and_an_arrival_at_the_same_time_do_not_make_a_false_peak():
    # One ledger leaves at 10 as another arrives: the total stays 100 (never 200).
    segments = Segments.of([(0, 100, 0, 0, 0, 10), (0, 100, 10, 10, 10, INF)], 1)
    assert peak(segments, 0, 20).tolist() == [100.0]


def test_the_sawtooth_peak_is_the_tooth_before_the_trim():
    # Ledgers of 100 bytes arriving linearly over an hour each, every one deleted two hours after it started.
    hour = 3_600_000
    rows = [(0, 100, k * hour, (k + 1) * hour, -INF, (k + 2) * hour) for k in range(10)]
    segments = Segments.of(rows, 1)
    # Just before each trim: the ledger leaving (full) and the next one (just full).
    assert peak(segments, 0, 10 * hour).tolist() == pytest.approx([200.0])
    # In each hour: one full ledger and one arriving (50 on average).
    assert byte_ms(segments, 2 * hour, 8 * hour).tolist() == pytest.approx([150 * 6 * hour])


def test_random_segments_against_a_dense_evaluation():
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(200):
        ramp_from = float(rng.integers(0, 100))
        ramp_to = ramp_from + float(rng.choice([0, rng.integers(1, 50)]))
        start = float(rng.integers(0, 150)) if rng.random() < 0.8 else -INF
        end = start + float(rng.integers(1, 100)) if rng.random() < 0.7 and start > -INF else INF
        rows.append((int(rng.integers(0, 4)), float(rng.integers(1, 1000)), ramp_from, ramp_to, start, end))
    segments = Segments.of(rows, 4)
    grid = np.arange(20, 120, 0.01)
    dense = np.array([value_at(segments, t) for t in grid])
    assert peak(segments, 20, 120) == pytest.approx(dense.max(axis=0), rel=2e-3)
    assert byte_ms(segments, 20, 120) == pytest.approx(dense.sum(axis=0) * 0.01, rel=2e-3)
    assert (peak(segments, 20, 120) >= dense.max(axis=0) - 1e-6).all(), "the peak is never under a sample"


def test_the_peak_a_few_groups_at_a_time_equals_the_peak_of_all_at_once(monkeypatch):
    from housekeeping.observe.capacity import curves

    rng = np.random.default_rng(5)
    rows = []
    for _ in range(400):
        # Group 3 holds most segments (larger than a chunk alone); groups 5 and 8 none.
        group = 3 if rng.random() < 0.5 else int(rng.choice([0, 1, 2, 4, 6, 7, 9]))
        ramp_from = float(rng.integers(0, 100))
        ramp_to = ramp_from + float(rng.choice([0, rng.integers(1, 50)]))
        start = float(rng.integers(0, 150)) if rng.random() < 0.8 else -INF
        end = start + float(rng.integers(1, 100)) if rng.random() < 0.7 and start > -INF else INF
        rows.append((group, float(rng.integers(1, 1000)), ramp_from, ramp_to, start, end))
    segments = Segments.of(rows, 10)
    whole = peak(segments, 20, 120)
    monkeypatch.setattr(curves, "PEAK_CHUNK", 37)
    assert peak(segments, 20, 120) == pytest.approx(whole, rel=1e-12)  # sums in another order
    assert whole[5] == whole[8] == 0 and (np.delete(whole, [5, 8]) > 0).all()
