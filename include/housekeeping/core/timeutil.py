"""Logical time. Decision rules never read the wall clock: "now" is the run's as-of time in epoch ms."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from housekeeping.core.errors import InputError


def wall_clock_ms() -> int:
    """The clock now, in epoch milliseconds: for audit columns and the time of a person's action (a hold, a restore),
    never for a rule's decision."""
    return int(time.time() * 1000)


def parse_as_of(text: str) -> int:
    """ISO 8601 (a timezone is required, or ``Z``) -> epoch milliseconds."""
    try:
        value = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"as_of {text!r} is not an ISO 8601 timestamp (e.g. 2026-11-22T06:00:00Z)") from None
    if value.tzinfo is None:
        raise InputError(f"as_of {text!r} has no timezone; write it in UTC, e.g. {text}Z")
    return int(value.timestamp() * 1000)


def format_ms(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "-"
    return (
        datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def format_duration_ms(ms: int) -> str:
    seconds = abs(ms) // 1000
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")) if v]
    return ("-" if ms < 0 else "") + (" ".join(parts[:2]) or "0s")
