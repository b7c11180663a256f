"""Quality-gate checks for ledger offload, re-derived from the snapshot apart from the planner, in one Spark pass
(``spark_apps.shared.topic_pass.check_pass``): the plan's actions routed to their topic's bucket, then
``spark_apps.offload.checks`` topic by topic over the bucket's snapshot rows; the pass adds the hold checks (an
offload deletes nothing: no hold stops it). Great Expectations validates every frame on the driver.
"""

from __future__ import annotations

from pathlib import Path

from housekeeping.engine.contract import LEDGERS, RunDir, read_run_info, table
from housekeeping.engine.gate import CheckFrame, Expectation, known_actions, must_be_true, one_row_each
from housekeeping.engine.mechanism import Mechanism
from spark_apps.offload.checks import OFFLOAD_CHECKS, check_topic
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import BucketPlan, BucketRows, boolean_columns, by_topic, check_pass

FRAMES = (
    table("actions", "topic string, action string, topic_in_snapshot boolean"),
    table("offloads", "topic string, ledgerId bigint, " + boolean_columns(OFFLOAD_CHECKS)),
    table("selection", "topic string, ledgerId bigint, planned boolean"),
)


def check_bucket(bucket: int, plan: BucketPlan, run_dir: str, info: dict) -> dict[str, list[Row]]:
    """Every check frame's rows of one bucket: each topic of the snapshot's bucket and each topic the plan's actions
    of the bucket name."""
    snapshot = BucketRows.read(run_dir, info, (LEDGERS.name,), bucket)
    planned = by_topic(plan.actions)
    frames: dict[str, list[Row]] = {frame.name: [] for frame in FRAMES}
    as_of_ms = int(info["asOfMs"])
    for topic in dict.fromkeys([*snapshot.topics, *planned]):
        checked = check_topic(
            snapshot.topics.get(topic), snapshot.of(LEDGERS.name, topic), planned.get(topic, []), as_of_ms
        )
        for name, rows in checked.items():
            frames[name].extend(rows)
    return frames


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    """What each per-bucket check frame must meet (the pass ships only the rows that could fail it)."""
    return {
        "actions": [known_actions(spec.action_names), *must_be_true("topic_in_snapshot")],
        "offloads": one_row_each(["topic", "ledgerId"], *OFFLOAD_CHECKS),
        "selection": must_be_true("planned"),
    }


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    frames = check_pass(
        spark,
        run.path,
        read_run_info(run),
        checker=check_bucket,
        frames=FRAMES,
        expectations=expectations(spec),
    )
    return [frames.check(name) for name in ("actions", "offloads", "selection", "holds")]
