"""Quality-gate checks for message expiry, re-derived from the snapshot and, where timestamps decide, from the
entries themselves, apart from the planner, in one Spark pass (``spark_apps.shared.topic_pass.check_pass``): the
plan's actions routed to their topic's bucket, then ``spark_apps.expiry.checks`` topic by topic over the bucket's
snapshot rows, reading the entries it needs inside the task; the pass adds the hold checks. Great Expectations
validates every frame on the driver, and the summary's cursor count against the moves checked.
"""

from __future__ import annotations

from pathlib import Path

from housekeeping.engine.contract import CURSORS, LEDGERS, RunDir, read_run_info, table
from housekeeping.engine.gate import CheckFrame, Expectation, known_actions, must_be_true, one_row_each
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import read_summary
from spark_apps.expiry.checks import EXPIRY_CHECKS, check_topic
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
        "cursor_moves", "topic string, name string, from string, to string, " + boolean_columns(EXPIRY_CHECKS)
    ),
)


def check_bucket(bucket: int, plan: BucketPlan, run_dir: str, info: dict) -> dict[str, list[Row]]:
    """Every check frame's rows of one bucket: each topic the plan's actions of the bucket name."""
    snapshot = BucketRows.read(run_dir, info, (LEDGERS.name, CURSORS.name), bucket)
    files = LedgerFiles.of(info)
    frames: dict[str, list[Row]] = {frame.name: [] for frame in FRAMES}
    for topic, topic_actions in by_topic(plan.actions).items():
        facts = TopicFacts(
            snapshot.topics.get(topic), snapshot.of(LEDGERS.name, topic), snapshot.of(CURSORS.name, topic)
        )
        reads = TopicEntryReads(files, topic) if topic is not None else (lambda ledger_id, size: [])
        for name, rows in check_topic(facts, topic_actions, info, reads).items():
            frames[name].extend(rows)
    return frames


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    """What each per-bucket check frame must meet (the pass ships only the rows that could fail it)."""
    return {
        "actions": [known_actions(spec.action_names)],
        "cursor_moves": one_row_each(["topic", "name"], *EXPIRY_CHECKS),
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
    summary = summary_rows(read_summary(run.path), frames.rows["cursor_moves"])
    return [
        frames.check("actions"),
        frames.check("cursor_moves"),
        CheckFrame("summary", pandas_frame(SUMMARY_CHECKS, summary), must_be_true("summary_reconciles")),
        frames.check("holds"),
    ]
