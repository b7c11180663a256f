"""Capacity forecast: when each namespace meets its limits, and each tenant its budgets (docs/semantics.md §12.3).

Growth is fitted to what producers add (the ingest: every ledger the store ever held, deleted ones included),
never to the stored series that housekeeping saws down: a Theil-Sen slope of each namespace's cumulative ingest
over the window's daily points, with its 95 % confidence interval (``scipy.stats.theilslopes``), shared among
its topics by their ingest over the window. What a limit sees of that growth follows the policies:

- ``backlog_quota_size`` / ``backlog_quota_time`` (per topic): the headroom if the slowest subscription stopped
  consuming now: the backlog grows at the topic's ingest, its oldest entry ages one second per second;
- ``retention_size`` (per topic): the bytes kept grow at the ingest until the retention caps them (the time
  limit keeps about ingest x retention time of consumed data);
- ``local_budget`` / ``tier_budget`` (per tenant, settings): the physical bytes; an offload threshold caps what
  stays local and moves the rest to the tier; the local tier counts the write quorum.

``secondsUntil``: 0 when already at or over the limit, null when not met within the horizon; ``low``/``high``:
the same from the fit's upper and lower slopes (the earliest and the latest). A backtest beside it: the fit made
``backtest`` days before the as-of, its ingest prediction against what the record shows happened.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.stats import theilslopes

from housekeeping.core.errors import InputError
from housekeeping.core.names import is_system_topic_name
from housekeeping.core.policies import EffectivePolicies, resolve_policies
from housekeeping.core.timeutil import format_ms
from housekeeping.core.topic_ledgers import Ledger, TopicLedgers
from housekeeping.core.units import parse_seconds
from housekeeping.observe.capacity.curves import Segments, value_at
from housekeeping.observe.capacity.record import Record
from housekeeping.observe.capacity.usage import write_quorum
from housekeeping.store.cursor_history import CursorSeries, read_series

if TYPE_CHECKING:
    from housekeeping.store.store import Store

DAY_MS = 86_400_000
DAY_S = 86_400
HORIZON_RANGE_S = (3600, 5 * 365 * DAY_S)
WINDOW_RANGE_DAYS = (3, 365)
POINTS = 29
MIN_WINDOW_MS = 3_600_000
# Where a change of rate is looked for: the last week (a weekly cycle is whole in it), or the last half of a
# younger window; each side of a change holds at least this many of its steps.
RECENT_MS = 7 * DAY_MS
MIN_SIDE = 4
# A rate differs from a fit when it lies outside the fit's 95 % interval widened by this share of it (an exactly
# linear history has an interval of width 0).
TOLERANCE = 0.10
# A credible change: the new rate at least this factor above or below the window's, and its split of the recent
# steps this clear (Welch's statistic on the increments): the day-to-day wobble of a few dozen topics' rollovers
# reaches a factor of 1.3 and a statistic of 15, so neither alone would do.
CHANGE_FACTOR = 1.5
MIN_SPLIT_SCORE = 4.0
WEEK_MS = 7 * DAY_MS
# The backlog's own trend (a size quota's row): the slowest durable subscription's backlog at the kept runs of the
# cursor history over the last week, one run every 6 hours at most, fitted when there are at least 4.
BACKLOG_TREND_MS = 7 * DAY_MS
BACKLOG_TREND_EVERY_MS = 6 * 3_600_000
MIN_TREND_POINTS = 4
# What the forecast asks of the cursor history: topics, from, to -> topic -> subscription -> its kept positions.
CursorHistory = Callable[[set[str], int, int], Mapping[str, Mapping[str, CursorSeries]]]


@dataclass(frozen=True)
class Fit:
    """Ingest growth in bytes per day: the slope and its 95 % interval."""

    per_day: float
    low: float
    high: float

    @classmethod
    def of(cls, cumulative: np.ndarray, step_days: float) -> Fit:
        """From the cumulative ingest at equally spaced points ``step_days`` apart."""
        if len(cumulative) < 3 or float(cumulative[-1] - cumulative[0]) <= 0:
            return cls(0.0, 0.0, 0.0)
        slope, _, low, high = theilslopes(cumulative, np.arange(len(cumulative)) * step_days)
        return cls(max(float(slope), 0.0), max(float(low), 0.0), max(float(high), 0.0))

    def scaled(self, share: float) -> Fit:
        return Fit(self.per_day * share, self.low * share, self.high * share)

    def excludes(self, rate: float) -> bool:
        """Whether ``rate`` (bytes a day) lies outside this fit's interval, widened by ``TOLERANCE``."""
        return not self.low * (1 - TOLERANCE) <= rate <= self.high * (1 + TOLERANCE)


@dataclass(frozen=True)
class Growth:
    """A namespace's growth as the forecast uses it: the fit, over which span, and why that span. ``window`` is
    the fit over the whole window, the same as ``fit`` unless a change of rate was found."""

    fit: Fit
    basis: str  # "window", "since_first_ingest" (a namespace younger than the window), "since_change"
    from_ms: int
    to_ms: int
    why: str
    window: Fit

    def as_json(self) -> dict[str, Any]:
        return {
            "bytesPerDay": self.fit.per_day,
            "low": self.fit.low,
            "high": self.fit.high,
            "basis": self.basis,
            "from": format_ms(self.from_ms),
            "to": format_ms(self.to_ms),
            "why": self.why,
            "windowBytesPerDay": self.window.per_day,
        }


@dataclass(frozen=True)
class Series:
    """A namespace's cumulative ingest: over its window, over the recent span where a change is looked for, and
    at the recent span's times a week earlier (None where the namespace did not exist yet)."""

    times: list[int]
    cumulative: np.ndarray
    recent_times: list[int] | None = None
    recent: np.ndarray | None = None
    week_earlier: np.ndarray | None = None


def _step_days(times: list[int]) -> float:
    return (times[1] - times[0]) / DAY_MS


def _changed(cumulative: np.ndarray, step_days: float, window: Fit) -> bool:
    """Whether a span's rate is a credible change from the window's fit: its median step's rate (a burst of a few
    steps moves it not at all, where a jump mid-span tilts most of Theil-Sen's pairs) outside the window's interval
    and a factor away from its rate."""
    rate = float(np.median(np.diff(cumulative))) / step_days
    if not window.excludes(rate):
        return False
    if window.per_day <= 0:
        return rate > 0
    return not 1 / CHANGE_FACTOR < rate / window.per_day < CHANGE_FACTOR


def _best_split(increments: np.ndarray) -> int | None:
    """The step index that best splits ``increments`` in two of different means (Welch's statistic), each side
    at least ``MIN_SIDE`` steps; None when the series is too short or no split scores ``MIN_SPLIT_SCORE``."""
    n = len(increments)
    if n < 2 * MIN_SIDE:
        return None
    scale = abs(float(increments.mean())) * 1e-6 + 1e-12
    best, at = -1.0, None
    for k in range(MIN_SIDE, n - MIN_SIDE + 1):
        before, after = increments[:k], increments[k:]
        spread = math.sqrt(before.var() / len(before) + after.var() / len(after)) + scale
        score = abs(float(after.mean() - before.mean())) / spread
        if score > best:
            best, at = score, k
    return at if best >= MIN_SPLIT_SCORE else None


def choose_growth(series: Series, basis: str) -> Growth:
    """The growth the forecast uses (docs/semantics.md §12.3): the Theil-Sen fit over the window, unless the recent
    span shows a credible change of rate; then the fit since the change. A change is credible when the best split
    of the recent steps is clear (``MIN_SPLIT_SCORE``), the fit after it is a factor (``CHANGE_FACTOR``) from the
    window's rate and excludes it while the fit before it agrees with it, and the same hours a week earlier did not
    already run at the new rate (a weekly cycle, not a change); or when the whole recent span's fit is that far
    from the window's rate (a change just before that span)."""
    times, cumulative = series.times, series.cumulative
    window = Fit.of(cumulative, _step_days(times))
    since = "the namespace's first ingest" if basis == "since_first_ingest" else "the window's start"
    plain = Growth(window, basis, times[0], times[-1], f"steady since {since}", window)
    if series.recent is None or series.recent_times is None:
        return plain
    recent, recent_times = series.recent, series.recent_times
    step = _step_days(recent_times)
    split = _best_split(np.diff(recent))
    if split is not None:
        after, before = Fit.of(recent[split:], step), Fit.of(recent[: split + 1], step)
        cycle = False
        if series.week_earlier is not None:
            then = series.week_earlier
            span = (recent_times[-1] - recent_times[split]) / DAY_MS
            cycle = not after.excludes(float(then[-1] - then[split]) / span)
        if _changed(recent[split:], step, window) and not before.excludes(window.per_day) and not cycle:
            return Growth(
                after,
                "since_change",
                recent_times[split],
                recent_times[-1],
                f"the rate changed at {format_ms(recent_times[split])}: {after.per_day:.0f} B/day since, "
                f"{window.per_day:.0f} over the window (outside the interval of the fit since)",
                window,
            )
    whole = Fit.of(recent, step)
    if _changed(recent, step, window):
        return Growth(
            whole,
            "since_change",
            recent_times[0],
            recent_times[-1],
            f"the rate changed before {format_ms(recent_times[0])}: {whole.per_day:.0f} B/day over the last "
            f"{(recent_times[-1] - recent_times[0]) / DAY_MS:.1f} days, {window.per_day:.0f} over the window",
            window,
        )
    return plain


@dataclass(frozen=True)
class Ingest:
    """Every topic's cumulative ingest curve (each ledger ever, from its arrival on), built once per forecast."""

    topics: list[str]
    namespaces: list[str]  # each topic's namespace
    segments: Segments
    first_ms: float  # the record's first arrival
    namespace_first_ms: dict[str, float]  # each namespace's first arrival

    @classmethod
    def of(cls, record: Record) -> Ingest:
        pieces = record.pieces
        on = pieces.on("ingest")
        codes = pieces.topic[on]
        present = np.unique(codes)  # record topic codes with an ingest piece, in code order
        topics = sorted(pieces.topics[c] for c in present)
        index = {topic: i for i, topic in enumerate(topics)}
        remap = np.zeros(len(pieces.topics), dtype=np.int64)
        for code in present:
            remap[code] = index[pieces.topics[code]]
        group = remap[codes]
        ramp_from = pieces.ramp_from[on]
        segments = Segments(
            group,
            pieces.size[on],
            ramp_from,
            pieces.ramp_to[on],
            pieces.start[on],
            pieces.end[on],
            len(topics),
        )
        first_of_topic = np.full(len(topics), math.inf)
        np.minimum.at(first_of_topic, group, ramp_from)
        namespaces = [record.namespace_of[topic] for topic in topics]
        namespace_first: dict[str, float] = {}
        for namespace, first in zip(namespaces, first_of_topic.tolist(), strict=True):
            namespace_first[namespace] = min(namespace_first.get(namespace, math.inf), first)
        first = float(first_of_topic.min()) if len(topics) else math.inf
        return cls(topics, namespaces, segments, first, namespace_first)

    def at(self, points_ms: list[int]) -> np.ndarray:
        """Cumulative ingest per topic at each point (topics x points)."""
        if not self.topics:
            return np.zeros((0, len(points_ms)))
        return np.column_stack([value_at(self.segments, t) for t in points_ms])


def span_points(start_ms: int, end_ms: int) -> list[int]:
    """``POINTS`` equally spaced times from ``start_ms`` to ``end_ms`` (none when less than an hour apart)."""
    if end_ms - start_ms < MIN_WINDOW_MS:
        return []
    return [int(start_ms + (end_ms - start_ms) * k / (POINTS - 1)) for k in range(POINTS)]


def window_start(ingest: Ingest, namespace: str, end_ms: int, window_days: int) -> tuple[int, str]:
    """Where a namespace's window starts, and its basis: ``window_days`` before ``end_ms``, or the namespace's
    own first ingest when it is younger."""
    first = int(min(ingest.namespace_first_ms.get(namespace, math.inf), end_ms))
    start = end_ms - window_days * DAY_MS
    return (first, "since_first_ingest") if first > start else (start, "window")


@dataclass(frozen=True)
class GrowthFits:
    """Per namespace its growth; per topic its share of the growth in use and of the window's."""

    namespaces: dict[str, Growth]
    topics: dict[str, Fit]
    topics_window: dict[str, Fit]


def fit_growth(ingest: Ingest, end_ms: int, window_days: int) -> GrowthFits:
    """Per namespace and per topic, the ingest growth over the window ending at ``end_ms`` (:func:`choose_growth`).
    A namespace's growth is shared among its topics by their ingest over the span its fit covers."""
    by_namespace: dict[str, list[int]] = defaultdict(list)
    for i, namespace in enumerate(ingest.namespaces):
        by_namespace[namespace].append(i)
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def values(points: list[int], rows: list[int]) -> np.ndarray:
        key = tuple(points)
        if key not in cache:  # namespaces of one age share their points: one evaluation over every topic
            cache[key] = ingest.at(points)
        return cache[key][rows]

    fits = GrowthFits({}, {}, {})
    for namespace, rows in by_namespace.items():
        start, basis = window_start(ingest, namespace, end_ms, window_days)
        points = span_points(start, end_ms)
        if not points:
            continue
        matrix = values(points, rows)
        recent_points = span_points(max(start, end_ms - min(RECENT_MS, (end_ms - start) // 2)), end_ms)
        recent = values(recent_points, rows) if recent_points else None
        earlier = None
        if recent_points and recent_points[0] - WEEK_MS >= start:
            earlier = values([t - WEEK_MS for t in recent_points], rows).sum(axis=0)
        series = Series(
            points,
            matrix.sum(axis=0),
            recent_points or None,
            None if recent is None else recent.sum(axis=0),
            earlier,
        )
        growth = fits.namespaces[namespace] = choose_growth(series, basis)
        if growth.basis == "since_change":
            assert recent is not None and recent_points
            first = recent_points.index(growth.from_ms)
            shares = _shares(recent[:, first], recent[:, -1])
        else:
            shares = _shares(matrix[:, 0], matrix[:, -1])
        window_shares = _shares(matrix[:, 0], matrix[:, -1])
        for k, i in enumerate(rows):
            fits.topics[ingest.topics[i]] = growth.fit.scaled(shares[k])
            fits.topics_window[ingest.topics[i]] = growth.window.scaled(window_shares[k])
    return fits


def _shares(first: np.ndarray, last: np.ndarray) -> list[float]:
    """Each topic's share of what its namespace added between two times."""
    added = last - first
    total = float(added.sum())
    return [float(a) / total if total > 0 else 0.0 for a in added]


def _seconds_to(gap: float, per_day: float, horizon_s: int) -> int | None:
    """Seconds until a quantity ``gap`` below its limit meets it at ``per_day``: 0 when already there."""
    if gap <= 0:
        return 0
    if per_day <= 0:
        return None
    seconds = gap / per_day * DAY_S
    return int(seconds) if seconds <= horizon_s else None


@dataclass
class _TopicNow:
    listed: float
    backlog: float
    backlog_age_s: float
    local: float
    tier: float


def _backlog(record: Record, topic: str) -> tuple[float, float]:
    """The slowest durable subscription's estimated backlog bytes and its oldest entry's age (as the metrics)."""
    durable = [
        (c.mark_delete_ledger, c.mark_delete_entry) for c in record.cursors.get(topic, []) if c.durable
    ]
    rows = record.ledgers.get(topic, []) if durable else []  # no durable subscription: no backlog to read
    if not rows:
        return 0.0, 0.0
    ledgers = TopicLedgers([Ledger(r.ledger_id, r.entries, r.size_bytes, r.closed_at_ms) for r in rows])
    slowest = min(durable)
    first = ledgers.first_unacked_ledger(slowest)
    if first is None:
        return float(ledgers.estimated_backlog_bytes(slowest)), 0.0
    since = first.closed_at_ms
    if since is None:
        since = next(r.min_entry_ts_ms for r in rows if r.ledger_id == first.ledger_id)
    age = max(0.0, (record.as_of_ms - since) / 1000) if since is not None else 0.0
    return float(ledgers.estimated_backlog_bytes(slowest)), age


def _now(record: Record) -> dict[str, _TopicNow]:
    topics = sorted(record.topics)
    index = {topic: i for i, topic in enumerate(topics)}
    pieces = record.pieces
    # Each record topic code's row here, -1 for a topic no longer listed.
    remap = np.array([index.get(name, -1) for name in pieces.topics], dtype=np.int64)
    group = remap[pieces.topic] if len(pieces) else np.zeros(0, dtype=np.int64)
    values = {}
    for tier in ("listed", "local", "tier"):
        on = pieces.on(tier) & (group >= 0)
        segments = Segments(
            group[on], pieces.size[on], pieces.ramp_from[on], pieces.ramp_to[on], pieces.start[on], pieces.end[on],
            len(topics),
        )  # fmt: skip
        values[tier] = value_at(segments, record.as_of_ms)
    now = {}
    for topic, i in index.items():
        backlog, age = _backlog(record, topic)
        now[topic] = _TopicNow(values["listed"][i], backlog, age, values["local"][i], values["tier"][i])
    return now


@dataclass(frozen=True)
class BacklogTrend:
    """The slowest durable subscription's backlog fitted over the kept runs: bytes a day (negative: it shrinks), its
    95 % interval, the points and their span."""

    per_day: float
    low: float
    high: float
    points: int
    from_ms: int
    to_ms: int

    def as_json(self, gap: float, horizon_s: int) -> dict[str, Any]:
        return {
            "bytesPerDay": self.per_day,
            "low": self.low,
            "high": self.high,
            "points": self.points,
            "from": format_ms(self.from_ms),
            "to": format_ms(self.to_ms),
            "secondsUntil": _seconds_to(gap, self.per_day, horizon_s),
        }


class _IngestOf:
    """Each topic's ingest pieces (their indices), found without a pass over every piece per topic."""

    def __init__(self, record: Record) -> None:
        pieces = record.pieces
        self.code = {name: i for i, name in enumerate(pieces.topics)}
        self.order = np.flatnonzero(pieces.on("ingest"))
        self.order = self.order[np.argsort(pieces.topic[self.order], kind="stable")]
        self.topic = pieces.topic[self.order]

    def __call__(self, topic: str) -> np.ndarray:
        code = self.code.get(topic)
        if code is None:
            return self.order[:0]
        lo, hi = np.searchsorted(self.topic, code, "left"), np.searchsorted(self.topic, code, "right")
        return self.order[lo:hi]


def backlog_at(
    record: Record, topic: str, series: Mapping[str, CursorSeries], ingest_of: _IngestOf | None = None
) -> list[tuple[int, float]]:
    """The topic's backlog at each kept run: the largest of its durable subscriptions' (the slowest), each the bytes
    arrived by then in the ledgers after its mark-delete, and the part of the mark-delete ledger after it by
    entries (as Pulsar's estimate) when the ledger is still listed."""
    pieces = record.pieces
    mine = (ingest_of or _IngestOf(record))(topic)
    if not len(mine):
        return []
    ledger, size = pieces.ledger[mine], pieces.size[mine]
    ramp_from, ramp_to = pieces.ramp_from[mine], pieces.ramp_to[mine]
    entries = {row.ledger_id: row.entries for row in record.ledgers.get(topic, [])}
    by_time: dict[int, float] = {}
    for kept in series.values():
        for moment, mark_ledger, mark_entry in zip(kept.times, kept.ledger, kept.entry, strict=True):
            width = ramp_to - ramp_from
            arrived = np.where(
                moment >= ramp_to,
                1.0,
                np.clip(np.divide(moment - ramp_from, np.where(width > 0, width, 1.0)), 0, 1),
            ) * (moment >= ramp_from)
            after = float((size * arrived)[ledger > mark_ledger].sum())
            count = entries.get(int(mark_ledger))
            if count:
                at = ledger == mark_ledger
                rest = max(count - 1 - int(mark_entry), 0) / count
                after += float((size * arrived)[at].sum()) * rest
            by_time[int(moment)] = max(by_time.get(int(moment), 0.0), after)
    return sorted(by_time.items())


def kept_cursors(store: Store) -> CursorHistory:
    """The store's cursor history as the forecast reads it: one kept run per ``BACKLOG_TREND_EVERY_MS``."""

    def read(topics: set[str], from_ms: int, to_ms: int) -> Mapping[str, Mapping[str, CursorSeries]]:
        return read_series(store, topics, from_ms=from_ms, to_ms=to_ms, every_ms=BACKLOG_TREND_EVERY_MS)[0]

    return read


def backlog_trends(record: Record, topics: set[str], history: CursorHistory) -> dict[str, BacklogTrend]:
    """Per topic, its backlog's own trend over the last week of kept runs (``MIN_TREND_POINTS`` or more)."""
    since = record.as_of_ms - BACKLOG_TREND_MS
    trends = {}
    ingest_of = _IngestOf(record)
    for topic, series in history(topics, since, record.as_of_ms).items():
        points = backlog_at(record, topic, series, ingest_of)
        if len(points) < MIN_TREND_POINTS:
            continue
        days = np.array([moment for moment, _ in points], dtype=np.float64) / DAY_MS
        values = np.array([value for _, value in points])
        slope, _, low, high = theilslopes(values, days - days[0])
        trends[topic] = BacklogTrend(
            float(slope), float(low), float(high), len(points), points[0][0], points[-1][0]
        )
    return trends


def _row(namespace: str | None, tenant: str, limit: str, **fields: Any) -> dict[str, Any]:
    return {"namespace": namespace, "tenant": tenant, "limit": limit, **fields}


def _earliest(candidates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The candidate that meets its limit first (a null secondsUntil is never)."""
    if not candidates:
        return None
    return min(candidates, key=lambda c: (c["secondsUntil"] is None, c["secondsUntil"] or 0, c["topic"]))


def _topic_limits(
    topic: str, now: _TopicNow, fit: Fit, effective: Any, horizon_s: int, trend: BacklogTrend | None = None
) -> dict[str, dict]:
    """This topic's candidate rows for the per-topic limits in force."""
    found = {}
    size_quota = effective.backlog_quotas["destination_storage"].limit_size
    if size_quota >= 0:
        found["backlog_quota_size"] = {
            "limitBytes": size_quota,
            "currentBytes": now.backlog,
            **_bounds(size_quota - now.backlog, fit, horizon_s),
            "backlogTrend": trend.as_json(size_quota - now.backlog, horizon_s) if trend is not None else None,
        }
    time_quota = effective.backlog_quotas["message_age"].limit_time
    if time_quota >= 0:
        # Under a stall the oldest entry ages one second per second; with no backlog the next entry starts it.
        if now.backlog > 0 or fit.per_day > 0:
            left = max(0, int(time_quota - now.backlog_age_s)) if now.backlog > 0 else time_quota
            seconds = left if left <= horizon_s else None
        else:
            seconds = None
        found["backlog_quota_time"] = {
            "limitSeconds": time_quota,
            "currentSeconds": now.backlog_age_s,
            "limitBytes": None,
            "currentBytes": now.backlog,
            "secondsUntil": seconds,
            "low": seconds,
            "high": seconds,
        }
    retention = effective.retention
    if retention.size_mb > 0:
        cap = retention.size_bytes
        kept = _kept_cap(now, fit.per_day, retention)
        found["retention_size"] = {
            "limitBytes": cap,
            "currentBytes": now.listed,
            **(
                _bounds(cap - now.listed, fit, horizon_s)
                if kept >= cap
                else {"secondsUntil": None, "low": None, "high": None}
            ),
        }
    for row in found.values():
        row["topic"] = topic
        row["bytesPerDay"] = fit.per_day
    return found


def _kept_cap(now: _TopicNow, per_day: float, retention: Any) -> float:
    """What the retention lets the topic keep at this ingest: ingest x retention time (infinite: no time
    limit), at most the retention size, never below what it keeps now."""
    if retention.time_minutes == 0 and retention.size_mb == 0:
        return now.listed
    cap = float("inf")
    if retention.time_minutes > 0:
        cap = per_day * retention.time_minutes / (24 * 60) + now.backlog
    if retention.size_mb > 0:
        cap = min(cap, retention.size_bytes)
    return max(cap, now.listed)


def _bounds(gap: float, fit: Fit, horizon_s: int) -> dict[str, Any]:
    return {
        "secondsUntil": _seconds_to(gap, fit.per_day, horizon_s),
        "low": _seconds_to(gap, fit.high, horizon_s),
        "high": _seconds_to(gap, fit.low, horizon_s),
    }


def _meets(
    current: float, growth: list[tuple[float, float, float]], budget: float, horizon_s: int
) -> int | None:
    """Seconds until ``current`` plus the topics' growth meets ``budget``; each topic grows at ``rate`` bytes a
    day from day ``start`` until day ``stop`` (the total is piecewise linear: a sweep over those days)."""
    if current >= budget:
        return 0
    events = sorted(
        [(start, rate) for rate, start, stop in growth if rate > 0 and stop > start]
        + [(stop, -rate) for rate, start, stop in growth if rate > 0 and stop > start and math.isfinite(stop)]
    )
    total, day, rate = current, 0.0, 0.0
    for when, change in events:
        if rate > 0 and total + rate * (when - day) >= budget:
            break
        total += rate * (when - day)
        day, rate = when, rate + change
    if rate <= 1e-9:
        return None
    seconds = (day + (budget - total) / rate) * DAY_S
    return int(seconds) if seconds <= horizon_s else None


def _budget_growth(now: _TopicNow, per_day: float, effective: Any, quorum: int) -> tuple[tuple, tuple]:
    """A topic's growth ``(bytes per day, from day, until day)`` on the local disks and in the tier: what it
    keeps grows at the ingest until the retention's cap; past an offload threshold the growth is offloaded, and
    leaves the local disks when a deletion lag is set."""
    if per_day <= 0:
        return (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    kept = _kept_cap(now, per_day, effective.retention)
    full = (kept - now.listed) / per_day  # the day the retention caps it (inf: never)
    offload = effective.offload
    if offload is None or not offload.auto_offload:
        return (per_day * quorum, 0.0, full), (0.0, 0.0, 0.0)
    caps = [math.inf]
    if offload.threshold_bytes >= 0:
        caps.append(offload.threshold_bytes)
    if offload.threshold_seconds >= 0:
        caps.append(per_day * offload.threshold_seconds / DAY_S)
    offloads_from = min(full, max(0.0, (min(caps) - now.listed) / per_day))
    deletes_local = offload.deletion_lag_ms is not None and offload.deletion_lag_ms >= 0
    local = (per_day * quorum, 0.0, offloads_from if deletes_local else full)
    return local, (per_day, offloads_from, full)


@dataclass(frozen=True)
class ForecastOptions:
    """What a forecast is asked for: how far it looks, how much ingest history it fits, how long before the as-of its
    backtest's forecast is made. One parser for the CLI's options, the console's query and the capacity DAG's param,
    each naming the option its caller calls it (``name``: the caller's spelling of an option's name)."""

    horizon_s: int = 30 * DAY_S
    window_days: int = 28
    backtest_days: int = 7

    @classmethod
    def parse(
        cls,
        horizon: str = "30d",
        window: str = "28d",
        backtest: str = "7d",
        *,
        name: Callable[[str], str] = lambda option: f"--{option}",
    ) -> ForecastOptions:
        """The options from durations such as ``30d`` (bad input names the option)."""
        options = cls(
            parse_seconds(horizon, name("horizon")),
            parse_seconds(window, name("window")) // DAY_S,
            parse_seconds(backtest, name("backtest")) // DAY_S,
        )
        options.check(name)
        return options

    def check(self, name: Callable[[str], str] = lambda option: f"--{option}") -> None:
        """Each option in its range, or bad input naming it."""
        low, high = HORIZON_RANGE_S
        if not low <= self.horizon_s <= high:
            raise InputError(f"{name('horizon')} {self.horizon_s} s is out of range: from 1h to 5y")
        if not WINDOW_RANGE_DAYS[0] <= self.window_days <= WINDOW_RANGE_DAYS[1]:
            raise InputError(f"{name('window')} {self.window_days} days is out of range: from 3d to 365d")
        if not 1 <= self.backtest_days <= 365:
            raise InputError(f"{name('backtest')} {self.backtest_days} days is out of range: from 1d to 365d")


def forecast(
    record: Record,
    *,
    horizon_s: int,
    window_days: int = 28,
    backtest_days: int = 7,
    budgets: Mapping[str, Mapping[str, int]] | None = None,
    cursor_history: CursorHistory | None = None,
) -> dict[str, Any]:
    """The limits of every namespace in force, each tenant's budgets, and the backtest. With ``cursor_history``,
    each backlog size quota's row also has the backlog's own trend (``backlogTrend``; else null)."""
    ForecastOptions(horizon_s, window_days, backtest_days).check()
    ingest = Ingest.of(record)
    fits = fit_growth(ingest, record.as_of_ms, window_days)
    now = _now(record)
    effective = _effective_policies(record)
    quota_topics = {
        topic for topic, e in effective.items() if e.backlog_quotas["destination_storage"].limit_size >= 0
    }
    trends = backlog_trends(record, quota_topics, cursor_history) if cursor_history else {}
    limits = _limits(record, now, effective, fits.topics, budgets or {}, horizon_s, trends)
    # The soonest credible answer of each limit: the growth in use, or the whole window's when a change was found
    # (an alert wants the earlier of two credible answers, never the later).
    if any(g.basis == "since_change" for g in fits.namespaces.values()):
        by_window = _limits(record, now, effective, fits.topics_window, budgets or {}, horizon_s, trends)
    else:
        by_window = limits
    for row, other in zip(limits, by_window, strict=True):
        row["soonestSecondsUntil"] = _sooner(row["secondsUntil"], other["secondsUntil"])
    return {
        "asOf": format_ms(record.as_of_ms),
        "horizonSeconds": horizon_s,
        "windowDays": window_days,
        "growth": [{"namespace": ns, **g.as_json()} for ns, g in sorted(fits.namespaces.items())],
        "limits": limits,
        "backtest": backtest(record, ingest, window_days, backtest_days),
    }


def _effective_policies(record: Record) -> dict[str, EffectivePolicies]:
    """Each listed topic's policies in force. A topic with no policies of its own (most of a store) gets its
    namespace's, resolved once per namespace: only its own values and a system topic's rules read its name."""
    by_namespace: dict[str, EffectivePolicies] = {}
    effective = {}
    for topic, row in record.topics.items():
        own = json.loads(row.policies)
        namespace = row.namespace
        if own or is_system_topic_name(topic):
            effective[topic] = resolve_policies(
                topic, own, namespace, record.namespaces[namespace], record.broker
            )
            continue
        if namespace not in by_namespace:
            by_namespace[namespace] = resolve_policies(
                topic, own, namespace, record.namespaces[namespace], record.broker
            )
        effective[topic] = by_namespace[namespace]
    return effective


def _sooner(one: int | None, other: int | None) -> int | None:
    if one is None or other is None:
        return other if one is None else one
    return min(one, other)


def _limits(
    record: Record,
    now: dict[str, _TopicNow],
    effective_policies: Mapping[str, Any],
    topic_fits: Mapping[str, Fit],
    budgets: Mapping[str, Mapping[str, int]],
    horizon_s: int,
    trends: Mapping[str, BacklogTrend],
) -> list[dict[str, Any]]:
    """Every namespace's limit rows (the topic that meets each first) and every tenant's budget rows, at the
    topics' growth ``topic_fits`` under their policies in force (``effective_policies``); in one order whatever the
    fits."""
    candidates: dict[tuple[str, str], list[dict]] = defaultdict(list)
    tenant_growth: dict[str, dict[str, list]] = defaultdict(lambda: {"local": [], "tier": []})
    for topic, row in sorted(record.topics.items()):
        namespace = row.namespace
        effective = effective_policies[topic]
        fit = topic_fits.get(topic, Fit(0.0, 0.0, 0.0))
        found = _topic_limits(topic, now[topic], fit, effective, horizon_s, trends.get(topic))
        for limit, candidate in found.items():
            candidates[(namespace, limit)].append(candidate)
        quorum = write_quorum(record.namespaces[namespace], record.broker)
        local, tier = _budget_growth(now[topic], fit.per_day, effective, quorum)
        tenant = namespace.split("/", 1)[0]
        tenant_growth[tenant]["local"].append((local, fit))
        tenant_growth[tenant]["tier"].append((tier, fit))
    limits = []
    for (namespace, limit), rows in sorted(candidates.items()):
        first = _earliest(rows)
        limits.append(_row(namespace, namespace.split("/", 1)[0], limit, **first))
    return limits + _budget_rows(record, now, tenant_growth, budgets, horizon_s)


def _budget_rows(record, now, tenant_growth, budgets, horizon_s) -> list[dict[str, Any]]:
    rows = []
    current: dict[tuple[str, str], float] = defaultdict(float)
    for topic, row in record.topics.items():
        tenant = row.namespace.split("/", 1)[0]
        quorum = write_quorum(record.namespaces[row.namespace], record.broker)
        current[(tenant, "local")] += now[topic].local * quorum
        current[(tenant, "tier")] += now[topic].tier
    for tenant in sorted(record.tenants()):
        budget = budgets.get(tenant) or budgets.get("*") or {}
        for where in ("local", "tier"):
            if where not in budget:
                continue
            growth = tenant_growth[tenant][where]
            at = current[(tenant, where)]

            def meets(pick: str, growth=growth, at=at, limit=budget[where]) -> int | None:
                scaled = [
                    (rate * (getattr(fit, pick) / fit.per_day if fit.per_day else 0.0), start, stop)
                    for (rate, start, stop), fit in growth
                ]
                return _meets(at, scaled, limit, horizon_s)

            rows.append(
                _row(
                    None,
                    tenant,
                    f"{where}_budget",
                    topic=None,
                    limitBytes=budget[where],
                    currentBytes=at,
                    bytesPerDay=sum(rate for (rate, _, _), _ in growth),
                    secondsUntil=meets("per_day"),
                    low=meets("high"),
                    high=meets("low"),
                )
            )
    return rows


def backtest(record: Record, ingest: Ingest, window_days: int, days: int) -> list[dict[str, Any]]:
    """Per namespace: the ingest fitted ``days`` before the as-of, projected to the as-of, against what the
    record shows producers added in those days."""
    made_at = record.as_of_ms - days * DAY_MS
    then = {
        namespace: growth.fit
        for namespace, growth in fit_growth(ingest, made_at, window_days).namespaces.items()
    }
    matrix = ingest.at([made_at, record.as_of_ms])
    added: dict[str, float] = defaultdict(float)
    for i, namespace in enumerate(ingest.namespaces):
        added[namespace] += float(matrix[i, 1] - matrix[i, 0])
    rows = []
    for namespace, fit in sorted(then.items()):
        actual, predicted = added[namespace], fit.per_day * days
        rows.append(
            {
                "namespace": namespace,
                "madeAt": format_ms(made_at),
                "days": days,
                "predictedBytes": predicted,
                "actualBytes": actual,
                "relativeError": (predicted - actual) / actual if actual > 0 else None,
            }
        )
    return rows
