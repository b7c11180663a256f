"""Units the offload planner and its gate both convert (a conversion, not a decision: the gate still derives
every selection on its own)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

LONG_MAX = 2**63 - 1


def threshold_ms(seconds: Column) -> Column:
    """Seconds in milliseconds, saturating at Long.MAX_VALUE as Java's ``TimeUnit.SECONDS.toMillis`` does (Pulsar's
    ``(100, Long.MAX_VALUE)`` case: never by time), where a plain multiplication would overflow."""
    return F.when(seconds > LONG_MAX // 1000, F.lit(LONG_MAX)).otherwise(seconds * 1000)
