"""Bytes over time as piecewise-linear curves, summed per group (a tenant, a namespace, a topic), vectorised.

A *segment* is one ledger's bytes on one view over one interval ``[start, end)``: its ``size`` arrives linearly
between ``ramp_from`` and ``ramp_to`` (a step when they are equal; docs/semantics.md §12.1), so the segment is
``size * ramp(t)`` on the interval and 0 outside. Its integral has a closed form; the sum of a group's segments is
piecewise linear, so its value at any time comes from cumulative sums of jump and slope events, and its peak over
a window is at one of those events or at the window's ends. Times are epoch milliseconds; values are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MS_PER_HOUR = 3_600_000
PEAK_CHUNK = 200_000  # segments whose events are made at once


@dataclass(frozen=True)
class Segments:
    """Parallel arrays, one element per segment; ``group``: the index of its group (0..groups-1)."""

    group: np.ndarray  # int64
    size: np.ndarray  # float64, bytes
    ramp_from: np.ndarray  # float64, ms
    ramp_to: np.ndarray  # float64, ms (>= ramp_from)
    start: np.ndarray  # float64, ms
    end: np.ndarray  # float64, ms (np.inf: still there)
    groups: int

    @classmethod
    def of(cls, rows: list[tuple[int, float, float, float, float, float]], groups: int) -> Segments:
        """From ``(group, size, ramp_from, ramp_to, start, end)`` tuples."""
        if not rows:
            empty = np.zeros(0)
            return cls(np.zeros(0, dtype=np.int64), empty, empty, empty, empty, empty, groups)
        array = np.array(rows, dtype=np.float64)
        return cls(array[:, 0].astype(np.int64), *(array[:, i] for i in range(1, 6)), groups=groups)


def _antiderivative(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """∫ ramp from -inf to t, ramp rising linearly from 0 at ``a`` to 1 at ``b`` (a step at ``a`` when a == b)."""
    width = b - a
    inside = np.clip(t, a, b) - a
    ramped = np.divide(inside * inside, 2 * width, out=np.zeros_like(inside), where=width > 0)
    return ramped + np.maximum(t - b, 0)


def byte_ms(segments: Segments, window_from: float, window_to: float) -> np.ndarray:
    """Per group, ∫ bytes dt over ``[window_from, window_to)`` in byte-milliseconds."""
    lo = np.clip(segments.start, window_from, window_to)
    hi = np.clip(segments.end, window_from, window_to)
    a, b = segments.ramp_from, segments.ramp_to
    area = segments.size * (_antiderivative(hi, a, b) - _antiderivative(lo, a, b))
    return np.bincount(segments.group, weights=np.where(hi > lo, area, 0.0), minlength=segments.groups)


def _ramp(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    width = b - a
    rising = np.divide(t - a, width, out=np.zeros_like(t), where=width > 0)
    return np.where(t >= b, 1.0, np.clip(rising, 0.0, 1.0))


def value_at(segments: Segments, t: float) -> np.ndarray:
    """Per group, bytes at time ``t`` (a segment counts on ``[start, end)``)."""
    live = (segments.start <= t) & (t < segments.end)
    times = np.full(segments.size.shape, float(t))
    bytes_now = segments.size * _ramp(times, segments.ramp_from, segments.ramp_to)
    return np.bincount(segments.group, weights=np.where(live, bytes_now, 0.0), minlength=segments.groups)


def _events(segments: Segments, origin: float) -> tuple[np.ndarray, ...]:
    """Every group's curve as events sorted by (group, time): ``(group, time, jump, slope)``, times from
    ``origin``. A segment is ``size * ramp(t)`` switched on at ``start`` and off at ``end``; switching on at
    ``at`` jumps by the ramp's value there (the whole size at ``max(at, a)`` for a step) and, while the ramp
    still rises, adds its slope from ``max(at, a)`` until ``b``; switching off is the same, negated."""
    a, b = segments.ramp_from - origin, segments.ramp_to - origin
    width = b - a
    rising = width > 0
    slope = np.divide(segments.size, width, out=np.zeros_like(segments.size), where=rising)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    # A segment there from the beginning switches on before its ramp starts (a jump of 0).
    since = segments.start - origin
    since = np.where(np.isfinite(since), since, np.minimum(a, 0.0) - 1.0)
    for at, sign in ((since, 1.0), (segments.end - origin, -1.0)):
        on = np.isfinite(at)
        jump_at = np.where(rising, at, np.maximum(at, a))
        jump = np.where(rising, segments.size * _ramp(at, a, b), segments.size)
        parts.append((segments.group[on], jump_at[on], sign * jump[on], np.zeros(on.sum())))
        climbs = on & rising & (at < b)
        parts.append(
            (segments.group[climbs], np.maximum(at, a)[climbs], np.zeros(climbs.sum()), sign * slope[climbs])
        )
        parts.append((segments.group[climbs], b[climbs], np.zeros(climbs.sum()), -sign * slope[climbs]))
    group, time, jump, rate = (np.concatenate([part[i] for part in parts]) for i in range(4))
    order = np.lexsort((time, group))
    return group[order], time[order], jump[order], rate[order]


def _grouped_cumsum(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running sums of ``values`` that restart at each group (``group`` sorted)."""
    running = np.cumsum(values)
    if len(values) == 0:
        return running
    new = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    offsets = np.where(new > 0, running[new - 1], 0.0)
    return running - np.repeat(offsets, np.diff(np.r_[new, len(values)]))


def peak(segments: Segments, window_from: float, window_to: float) -> np.ndarray:
    """Per group, the largest value of its curve over ``[window_from, window_to)``, a few groups at a time (the
    events of every segment at once were most of a backtest's memory at 100,000 topics)."""
    if len(segments.size) <= PEAK_CHUNK:
        return _peak(segments, window_from, window_to)
    order = np.argsort(segments.group, kind="stable")
    counts = np.bincount(segments.group, minlength=segments.groups)
    ends = np.cumsum(counts)
    result = np.zeros(segments.groups)
    first = 0
    while first < segments.groups:
        # Whole groups up to about PEAK_CHUNK segments (a larger group alone).
        start = ends[first - 1] if first else 0
        last = max(first + 1, int(np.searchsorted(ends, start + PEAK_CHUNK, "right")))
        mine = order[start : ends[last - 1]]
        part = Segments(
            segments.group[mine],
            segments.size[mine],
            segments.ramp_from[mine],
            segments.ramp_to[mine],
            segments.start[mine],
            segments.end[mine],
            segments.groups,
        )
        result[first:last] = _peak(part, window_from, window_to)[first:last]
        first = last
    return result


def _peak(segments: Segments, window_from: float, window_to: float) -> np.ndarray:
    """Per group, the largest value of its curve over ``[window_from, window_to)``: at the window's start, or
    just before or just after a time where the curve has events (it is linear between them)."""
    result = value_at(segments, window_from)
    group, time, jump, rate = _events(segments, window_from)
    if len(time) == 0:
        return result
    jumps, slopes = _grouped_cumsum(jump, group), _grouped_cumsum(rate, group)
    weighted = _grouped_cumsum(rate * time, group)
    span = window_to - window_from
    # Several events may share a time: the curve's values there are before the first and after the last.
    last = np.r_[(group[1:] != group[:-1]) | (time[1:] != time[:-1]), True]
    first = np.r_[True, last[:-1]]
    after = jumps + time * slopes - weighted
    keep = last & (time >= 0) & (time < span)
    np.maximum.at(result, group[keep], after[keep])
    previous = np.flatnonzero(first) - 1
    at_first = np.flatnonzero(first)
    carried = previous >= 0
    carried &= group[np.maximum(previous, 0)] == group[at_first]
    p = np.maximum(previous, 0)
    before = np.where(carried, jumps[p] + time[at_first] * slopes[p] - weighted[p], 0.0)
    keep = (time[at_first] > 0) & (time[at_first] <= span)
    np.maximum.at(result, group[at_first][keep], before[keep])
    return result
