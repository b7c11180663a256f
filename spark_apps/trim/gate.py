"""Quality-gate checks for consumed-ledger trim, re-derived from the snapshot apart from the planner, in one Spark
pass (``spark_apps.shared.topic_pass.check_pass``): the plan's actions routed to their topic's bucket, then
``spark_apps.trim.checks`` topic by topic over the bucket's snapshot rows; the pass adds the hold checks
(``spark_apps.shared.holds``). Each check frame has one row per planned action, namespace or due local copy, with
a boolean column per invariant; a bucket sends the driver only the rows that could fail an expectation, and Great
Expectations validates them there as the whole frame.
"""

from __future__ import annotations

from pathlib import Path

from housekeeping.engine.contract import (
    CURSORS,
    LEDGERS,
    NAMESPACES,
    RunDir,
    read_run_info,
    read_snapshot_table,
    table,
)
from housekeeping.engine.gate import (
    CheckFrame,
    Expectation,
    expect,
    known_actions,
    must_be_true,
    one_row_each,
)
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import read_summary
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import (
    BucketPlan,
    BucketRows,
    boolean_columns,
    by_topic,
    check_pass,
    pandas_frame,
)
from spark_apps.trim.checks import (
    CURSOR_CHECKS,
    DELETION_CHECKS,
    LOCAL_COPY_CHECKS,
    TopicFacts,
    check_topic,
    namespace_rows,
)

FRAMES = (
    table("actions", "topic string, action string, topic_in_snapshot boolean"),
    table("deletions", "topic string, ledgerId bigint, " + boolean_columns(DELETION_CHECKS)),
    table(
        "cursor_moves", "topic string, name string, from string, to string, " + boolean_columns(CURSOR_CHECKS)
    ),
    table("local_copies", "topic string, ledgerId bigint, " + boolean_columns(LOCAL_COPY_CHECKS)),
    table("local_copy_selection", "topic string, ledgerId bigint, planned boolean"),
    table("namespace_deleted", "namespace string, deletedBytes bigint"),
)
NAMESPACE_CHECKS = table(
    "namespaces",
    "namespace string, namespace_in_snapshot boolean, summary_reconciles boolean, deleted_share double, "
    "within_blast_radius boolean",
)


def check_bucket(bucket: int, plan: BucketPlan, run_dir: str, info: dict) -> dict[str, list[Row]]:
    """Every check frame's rows of one bucket: each topic of the snapshot's bucket and each topic the plan's actions
    of the bucket name."""
    snapshot = BucketRows.read(run_dir, info, (LEDGERS.name, CURSORS.name), bucket)
    planned = by_topic(plan.actions)
    frames: dict[str, list[Row]] = {frame.name: [] for frame in FRAMES}
    as_of_ms = int(info["asOfMs"])
    for topic in dict.fromkeys([*snapshot.topics, *planned]):
        facts = TopicFacts(
            snapshot.topics.get(topic), snapshot.of(LEDGERS.name, topic), snapshot.of(CURSORS.name, topic)
        )
        for name, rows in check_topic(facts, planned.get(topic, []), as_of_ms).items():
            frames[name].extend(rows)
    return frames


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    """What each per-bucket check frame must meet (the pass ships only the rows that could fail it)."""
    return {
        "actions": [known_actions(spec.action_names), *must_be_true("topic_in_snapshot")],
        "deletions": one_row_each(["topic", "ledgerId"], *DELETION_CHECKS),
        "cursor_moves": one_row_each(["topic", "name"], *CURSOR_CHECKS),
        "local_copies": one_row_each(["topic", "ledgerId"], *LOCAL_COPY_CHECKS),
        "local_copy_selection": must_be_true("planned"),
    }


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    info = read_run_info(run)
    max_share = float(info["maxDeletedShare"])
    frames = check_pass(
        spark, run.path, info, checker=check_bucket, frames=FRAMES, expectations=expectations(spec)
    )
    deleted: dict[str | None, int] = {}
    for row in frames.tables["namespace_deleted"].to_pylist():
        deleted[row["namespace"]] = deleted.get(row["namespace"], 0) + row["deletedBytes"]
    stored = {r["namespace"]: r["storedBytes"] for r in read_snapshot_table(run, NAMESPACES)}
    namespaces = namespace_rows(deleted, stored, read_summary(run.path).get("perNamespace", {}), max_share)
    return [
        *(frames.check(name) for name in ("actions", "deletions", "cursor_moves", "local_copies")),
        frames.check("local_copy_selection"),
        CheckFrame(
            "namespaces",
            pandas_frame(NAMESPACE_CHECKS, namespaces),
            [
                *must_be_true("namespace_in_snapshot", "summary_reconciles"),
                expect(
                    "ExpectColumnValuesToBeBetween",
                    column="deleted_share",
                    min_value=0.0,
                    max_value=max_share,
                ),
            ],
        ),
        frames.check("holds"),
    ]
