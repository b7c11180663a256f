"""Units the offload planner and its gate both convert (a conversion, not a decision: the gate still derives
every selection on its own)."""

from __future__ import annotations

LONG_MAX = 2**63 - 1


def threshold_ms(seconds: int) -> int:
    """Seconds in milliseconds, saturating at Long.MAX_VALUE as Java's ``TimeUnit.SECONDS.toMillis`` does (Pulsar's
    ``(100, Long.MAX_VALUE)`` case: never by time), where a plain multiplication would overflow a long."""
    return LONG_MAX if seconds > LONG_MAX // 1000 else seconds * 1000
