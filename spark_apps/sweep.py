"""A policy sweep's points in one Spark application (``housekeeping.what_if.sweep``).

Each point is a snapshot of the same read of the store (``housekeeping.engine.snapshot.read_store_state``) that differs
only in the policies resolved into its topics table. The ledgers, cursors and other tables are read once, from
the first point; each point's topics are read from its own directory; the mechanism's ``sweep_point`` (the same
decisions its planner writes) measures each point, and one union of the points is collected. A planner that plans
topic by topic (``spark_apps.shared.topic_pass``) measures every point in one pass of its own (``sweep_points``).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from housekeeping.engine.contract import TOPICS, RunDir, read_run_info
from spark_apps.shared.io import read_snapshot, read_snapshot_table
from spark_apps.shared.session import run_scoped_cache


def run(spark, run_dirs: Sequence[str | Path], plan_app: str) -> list[dict[str, dict[str, int]]]:
    """Per point (in ``run_dirs``' order): namespace -> the mechanism's measures (``bytesFreed``,
    ``bytesKept`` and its counts), for every namespace with a topic in scope."""
    if not run_dirs:
        return []
    planner = importlib.import_module(plan_app)
    if hasattr(
        planner, "sweep_points"
    ):  # a planner that plans topic by topic measures every point in one pass
        return [dict(sorted(point.items())) for point in planner.sweep_points(spark, list(run_dirs))]
    with run_scoped_cache(spark):
        shared = read_snapshot(spark, run_dirs[0])
        frames = []
        for index, run_dir in enumerate(run_dirs):
            run = RunDir(run_dir)
            topics = read_snapshot_table(spark, run, TOPICS)
            point = planner.sweep_point(spark, {**shared, "topics": topics}, read_run_info(run))
            frames.append(point.withColumn("point", F.lit(index)))
        rows = reduce(lambda left, right: left.unionByName(right), frames).collect()
    points: list[dict[str, dict[str, Any]]] = [{} for _ in run_dirs]
    for row in rows:
        measures = row.asDict()
        index, namespace = measures.pop("point"), measures.pop("namespace")
        points[index][namespace] = {name: int(value or 0) for name, value in measures.items()}
    return [dict(sorted(point.items())) for point in points]
