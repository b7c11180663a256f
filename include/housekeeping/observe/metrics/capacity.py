"""The newest capacity report's figures (``capacity_report`` DAG, docs/semantics.md §12): seconds until each limit,
the ingest growth per namespace, byte-hours per tenant and tier over its period; absent before the first report."""

from __future__ import annotations

import math

from housekeeping.core.timeutil import parse_as_of
from housekeeping.observe.capacity.report import read_latest
from housekeeping.observe.metrics.families import Families, Family, StoreView, seconds


def capacity(view: StoreView) -> list[Family]:
    made = Families()
    latest = read_latest(view.store)
    if latest is None:
        return made
    until = made.family(
        "housekeeping_capacity_seconds_until",
        "Seconds until the limit is met at the forecast growth (0: met or exceeded; +Inf: not within the horizon). "
        "limit: backlog_quota_size, backlog_quota_time, retention_size (per namespace), local_budget, tier_budget "
        "(per tenant, namespace empty).",
        ("tenant", "namespace", "limit"),
    )
    soonest = made.family(
        "housekeeping_capacity_soonest_seconds_until",
        "Seconds until the limit is met at the sooner of the credible growths: the one in use, and the whole "
        "window's when a change of rate was found (what the alerts read; as housekeeping_capacity_seconds_until "
        "otherwise).",
        ("tenant", "namespace", "limit"),
    )
    for row in latest["forecast"]["limits"]:
        labels = (row["tenant"], row["namespace"] or "", row["limit"])
        value = row["secondsUntil"]
        until.set(labels, math.inf if value is None else value)
        value = row.get("soonestSecondsUntil", value)  # a report from before the soonest answer was recorded
        soonest.set(labels, math.inf if value is None else value)
    growth = made.family(
        "housekeeping_capacity_ingest_bytes_per_day",
        "Bytes producers add per day, fitted (Theil-Sen) to the ingest over the forecast's window, or since a change "
        "of rate it found.",
        ("namespace",),
    )
    for row in latest["forecast"]["growth"]:
        growth.set((row["namespace"],), row["bytesPerDay"])
    byte_hours = made.family(
        "housekeeping_capacity_byte_hours",
        "Byte-hours of the newest report's period per tenant and tier (local: x write quorum; listed: the "
        "policies' view).",
        ("tenant", "tier"),
    )
    for row in latest["usage"]["tenant"]["rows"]:
        byte_hours.set((row["tenant"], row["tier"]), row["byteHours"])
    made.family(
        "housekeeping_capacity_report_timestamp_seconds", "The as-of of the newest capacity report.", ()
    ).set((), seconds(parse_as_of(latest["asOf"])))
    return made
