"""Quality-gate checks for backlog-quota enforcement, re-derived from the snapshot apart from the planner, in one Spark
pass (``spark_apps.shared.topic_pass.check_pass``): the plan's actions and eviction steps routed to their topic's
bucket, then ``spark_apps.backlog.checks`` topic by topic over the bucket's snapshot rows (reading in the task the
entries precise mode needs); the pass adds the hold checks. Great Expectations validates every frame on the driver,
and the summary's cursor count against the moves checked.
"""

from __future__ import annotations

from pathlib import Path

from housekeeping.engine.contract import CURSORS, LEDGERS, RunDir, read_run_info, table
from housekeeping.engine.gate import CheckFrame, Expectation, known_actions, must_be_true, one_row_each
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import read_summary
from housekeeping.mechanisms.backlog.tables import EVICTION_STEPS
from spark_apps.backlog.checks import FLAG_CHECKS, MOVE_CHECKS, STEP_CHECKS, check_topic
from spark_apps.shared.io import LedgerFiles, TopicEntryReads
from spark_apps.shared.move_checks import SUMMARY_CHECKS, TopicFacts, summary_rows
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import (
    BucketPlan,
    BucketRows,
    boolean_columns,
    by_topic,
    check_pass,
    pandas_frame,
)

FRAMES = (
    table("actions", "topic string, action string"),
    table(
        "cursor_moves",
        "topic string, name string, from string, to string, quotaType string, "
        + boolean_columns(MOVE_CHECKS),
    ),
    table("eviction_steps", "topic string, step int, cursor string, " + boolean_columns(STEP_CHECKS)),
    table("quota_flags", "topic string, quotaType string, " + boolean_columns(FLAG_CHECKS)),
)


def check_bucket(bucket: int, plan: BucketPlan, run_dir: str, info: dict) -> dict[str, list[Row]]:
    """Every check frame's rows of one bucket: each topic the plan's actions or eviction steps of the bucket
    name."""
    snapshot = BucketRows.read(run_dir, info, (LEDGERS.name, CURSORS.name), bucket)
    files = LedgerFiles.of(info)
    actions, steps = by_topic(plan.actions), by_topic(plan.tables[EVICTION_STEPS.name])
    frames: dict[str, list[Row]] = {frame.name: [] for frame in FRAMES}
    for topic in dict.fromkeys([*actions, *steps]):
        facts = TopicFacts(
            snapshot.topics.get(topic), snapshot.of(LEDGERS.name, topic), snapshot.of(CURSORS.name, topic)
        )
        reads = TopicEntryReads(files, topic) if topic is not None else (lambda ledger_id, size: [])
        checked = check_topic(facts, actions.get(topic, []), steps.get(topic, []), info, reads)
        for name, rows in checked.items():
            frames[name].extend(rows)
    return frames


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    """What each per-bucket check frame must meet (the pass ships only the rows that could fail it)."""
    return {
        "actions": [known_actions(spec.action_names)],
        "cursor_moves": one_row_each(["topic", "name"], *MOVE_CHECKS),
        "eviction_steps": one_row_each(["topic", "step"], *STEP_CHECKS),
        "quota_flags": one_row_each(["topic", "quotaType"], *FLAG_CHECKS),
    }


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    frames = check_pass(
        spark, run.path, read_run_info(run), checker=check_bucket, frames=FRAMES,
        expectations=expectations(spec), routed=(EVICTION_STEPS,),
    )  # fmt: skip
    summary = summary_rows(read_summary(run.path), frames.rows["cursor_moves"])
    return [
        *(frames.check(name) for name in ("actions", "cursor_moves", "eviction_steps", "quota_flags")),
        CheckFrame("summary", pandas_frame(SUMMARY_CHECKS, summary), must_be_true("summary_reconciles")),
        frames.check("holds"),
    ]
