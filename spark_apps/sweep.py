"""A policy sweep's points in one Spark application (``housekeeping.what_if.sweep``).

Each point is a snapshot of the same read of the store (``housekeeping.engine.snapshot.read_store_state``) that differs
only in the policies resolved into its topics table. Every mechanism a sweep varies plans topic by topic
(``spark_apps.shared.topic_pass``), so its planner's ``sweep_points`` measures every point in one pass of its own:
per namespace, the same decisions its planner writes, added up.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path


def run(spark, run_dirs: Sequence[str | Path], plan_app: str) -> list[dict[str, dict[str, int]]]:
    """Per point (in ``run_dirs``' order): namespace -> the mechanism's measures (``bytesFreed``,
    ``bytesKept`` and its counts), for every namespace with a topic in scope."""
    if not run_dirs:
        return []
    points = importlib.import_module(plan_app).sweep_points(spark, list(run_dirs))
    return [dict(sorted(point.items())) for point in points]
