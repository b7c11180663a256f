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
from typing import Any

import numpy as np
from scipy.stats import theilslopes

from housekeeping.core.errors import InputError
from housekeeping.core.policies import resolve_policies
from housekeeping.core.timeutil import format_ms
from housekeeping.core.topic_ledgers import Ledger, TopicLedgers
from housekeeping.core.units import parse_seconds
from housekeeping.observe.capacity.curves import Segments, value_at
from housekeeping.observe.capacity.record import Record
from housekeeping.observe.capacity.usage import write_quorum

DAY_MS = 86_400_000
DAY_S = 86_400
HORIZON_RANGE_S = (3600, 5 * 365 * DAY_S)
WINDOW_RANGE_DAYS = (3, 365)
POINTS = 29
MIN_WINDOW_MS = 3_600_000


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


@dataclass(frozen=True)
class Ingest:
    """Every topic's cumulative ingest curve (each ledger ever, from its arrival on), built once per forecast."""

    topics: list[str]
    namespaces: list[str]  # each topic's namespace
    segments: Segments
    first_ms: float  # the record's first arrival

    @classmethod
    def of(cls, record: Record) -> Ingest:
        pieces = [p for p in record.pieces if p.tier == "ingest"]
        topics = sorted({p.topic for p in pieces})
        index = {topic: i for i, topic in enumerate(topics)}
        rows = [(index[p.topic], p.size, p.ramp_from, p.ramp_to, p.start, p.end) for p in pieces]
        first = min((p.ramp_from for p in pieces), default=math.inf)
        namespaces = [record.namespace_of[topic] for topic in topics]
        return cls(topics, namespaces, Segments.of(rows, len(topics)), first)

    def at(self, points_ms: list[int]) -> np.ndarray:
        """Cumulative ingest per topic at each point (topics x points)."""
        if not self.topics:
            return np.zeros((0, len(points_ms)))
        return np.column_stack([value_at(self.segments, t) for t in points_ms])


def window_points(ingest: Ingest, end_ms: int, window_days: int) -> list[int]:
    """``POINTS`` equally spaced times over the last ``window_days`` before ``end_ms``, or since the record's first
    entry when it is younger (none when it holds less than an hour before ``end_ms``)."""
    start = max(end_ms - window_days * DAY_MS, int(min(ingest.first_ms, end_ms)))
    if end_ms - start < MIN_WINDOW_MS:
        return []
    return [int(start + (end_ms - start) * k / (POINTS - 1)) for k in range(POINTS)]


def fit_growth(ingest: Ingest, end_ms: int, window_days: int) -> tuple[dict[str, Fit], dict[str, Fit]]:
    """Per namespace and per topic, the ingest fit over the window ending at ``end_ms``."""
    points = window_points(ingest, end_ms, window_days)
    if not points:
        return {}, {}
    step_days = (points[1] - points[0]) / DAY_MS
    matrix = ingest.at(points)
    by_namespace: dict[str, list[int]] = defaultdict(list)
    for i, namespace in enumerate(ingest.namespaces):
        by_namespace[namespace].append(i)
    namespace_fits, topic_fits = {}, {}
    for namespace, rows in by_namespace.items():
        cumulative = matrix[rows].sum(axis=0)
        fit = namespace_fits[namespace] = Fit.of(cumulative, step_days)
        added = cumulative[-1] - cumulative[0]
        for i in rows:
            share = float(matrix[i, -1] - matrix[i, 0]) / added if added > 0 else 0.0
            topic_fits[ingest.topics[i]] = fit.scaled(share)
    return namespace_fits, topic_fits


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
    rows = record.ledgers.get(topic, [])
    ledgers = TopicLedgers([Ledger(r.ledger_id, r.entries, r.size_bytes, r.closed_at_ms) for r in rows])
    durable = [
        (c.mark_delete_ledger, c.mark_delete_entry) for c in record.cursors.get(topic, []) if c.durable
    ]
    if not durable or not rows:
        return 0.0, 0.0
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
    values = {}
    for tier in ("listed", "local", "tier"):
        rows = [
            (index[p.topic], p.size, p.ramp_from, p.ramp_to, p.start, p.end)
            for p in record.pieces
            if p.tier == tier and p.topic in index
        ]
        values[tier] = value_at(Segments.of(rows, len(topics)), record.as_of_ms)
    now = {}
    for topic, i in index.items():
        backlog, age = _backlog(record, topic)
        now[topic] = _TopicNow(values["listed"][i], backlog, age, values["local"][i], values["tier"][i])
    return now


def _row(namespace: str | None, tenant: str, limit: str, **fields: Any) -> dict[str, Any]:
    return {"namespace": namespace, "tenant": tenant, "limit": limit, **fields}


def _earliest(candidates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The candidate that meets its limit first (a null secondsUntil is never)."""
    if not candidates:
        return None
    return min(candidates, key=lambda c: (c["secondsUntil"] is None, c["secondsUntil"] or 0, c["topic"]))


def _topic_limits(topic: str, now: _TopicNow, fit: Fit, effective: Any, horizon_s: int) -> dict[str, dict]:
    """This topic's candidate rows for the per-topic limits in force."""
    found = {}
    size_quota = effective.backlog_quotas["destination_storage"].limit_size
    if size_quota >= 0:
        found["backlog_quota_size"] = {
            "limitBytes": size_quota,
            "currentBytes": now.backlog,
            **_bounds(size_quota - now.backlog, fit, horizon_s),
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
) -> dict[str, Any]:
    """The limits of every namespace in force, each tenant's budgets, and the backtest."""
    ForecastOptions(horizon_s, window_days, backtest_days).check()
    ingest = Ingest.of(record)
    namespace_fits, topic_fits = fit_growth(ingest, record.as_of_ms, window_days)
    now = _now(record)
    candidates: dict[tuple[str, str], list[dict]] = defaultdict(list)
    tenant_growth: dict[str, dict[str, list]] = defaultdict(lambda: {"local": [], "tier": []})
    for topic, row in sorted(record.topics.items()):
        namespace = row.namespace
        effective = resolve_policies(
            topic, json.loads(row.policies), namespace, record.namespaces[namespace], record.broker
        )
        fit = topic_fits.get(topic, Fit(0.0, 0.0, 0.0))
        for limit, candidate in _topic_limits(topic, now[topic], fit, effective, horizon_s).items():
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
    limits += _budget_rows(record, now, tenant_growth, budgets or {}, horizon_s)
    return {
        "asOf": format_ms(record.as_of_ms),
        "horizonSeconds": horizon_s,
        "windowDays": window_days,
        "growth": [
            {"namespace": ns, "bytesPerDay": f.per_day, "low": f.low, "high": f.high}
            for ns, f in sorted(namespace_fits.items())
        ],
        "limits": limits,
        "backtest": backtest(record, ingest, window_days, backtest_days),
    }


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
    then, _ = fit_growth(ingest, made_at, window_days)
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
