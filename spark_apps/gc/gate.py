"""Quality-gate checks for inactive-topic GC, re-derived from the snapshot apart from the planner, in one Spark pass
(``spark_apps.shared.topic_pass.check_pass``): the plan's actions routed to their topic's bucket, then
``spark_apps.gc.checks`` topic by topic over the bucket's snapshot rows; what spans buckets (partitioned metadata,
namespaces) is added up on the driver. Great Expectations validates every frame there.
"""

from __future__ import annotations

from pathlib import Path

from housekeeping.engine.contract import (
    CURSORS,
    LEDGERS,
    NAMESPACES,
    PARTITIONED_TOPICS,
    RunDir,
    has_snapshot_table,
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
from spark_apps.gc.checks import (
    DELETION_CHECKS,
    METADATA_CHECKS,
    REFRESH_CHECKS,
    TopicFacts,
    check_topic,
    metadata_rows,
    namespace_rows,
)
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
    table("topic_deletions", "topic string, " + boolean_columns(DELETION_CHECKS)),
    table("last_active_refreshes", "topic string, " + boolean_columns(REFRESH_CHECKS)),
    table("namespace_deleted", "namespace string, deletedTopics bigint, deletedBytes bigint"),
    table("partition_deletions", "partitionedTopic string"),
    table("planned_metadata", "partitionedTopic string"),
)
METADATA_FRAME = table("partitioned_metadata", "partitionedTopic string, " + boolean_columns(METADATA_CHECKS))
NAMESPACE_CHECKS = table(
    "namespaces",
    "namespace string, namespace_in_snapshot boolean, summary_reconciles boolean, deleted_topics bigint, "
    "deleted_topic_share double",
)


def check_bucket(bucket: int, plan: BucketPlan, run_dir: str, info: dict) -> dict[str, list[Row]]:
    """Every per-bucket frame's rows: each topic of the snapshot's bucket and each topic the bucket's actions name."""
    snapshot = BucketRows.read(run_dir, info, (LEDGERS.name, CURSORS.name), bucket)
    planned = by_topic(plan.actions)
    frames: dict[str, list[Row]] = {frame.name: [] for frame in FRAMES}
    for topic, topic_actions in planned.items():
        facts = TopicFacts(
            snapshot.topics.get(topic), snapshot.of(LEDGERS.name, topic), snapshot.of(CURSORS.name, topic)
        )
        for name, rows in check_topic(facts, topic_actions, info).items():
            frames[name].extend(rows)
    return frames


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    """What each per-bucket check frame must meet (the pass ships only the rows that could fail it)."""
    return {
        "actions": [known_actions(spec.action_names), *one_row_each(["topic", "action"])],
        "topic_deletions": [
            expect("ExpectColumnValuesToBeUnique", column="topic"),
            *must_be_true(*DELETION_CHECKS),
        ],
        "last_active_refreshes": must_be_true(*REFRESH_CHECKS),
    }


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    info = read_run_info(run)
    frames = check_pass(
        spark, run.path, info, checker=check_bucket, frames=FRAMES, expectations=expectations(spec)
    )
    deleted: dict[str | None, tuple[int, int]] = {}
    for row in frames.tables["namespace_deleted"].to_pylist():
        topics, size = deleted.get(row["namespace"], (0, 0))
        deleted[row["namespace"]] = (topics + row["deletedTopics"], size + row["deletedBytes"])
    partitions: dict[str, int] = {}
    for parent in frames.tables["partition_deletions"].column("partitionedTopic").to_pylist():
        partitions[parent] = partitions.get(parent, 0) + 1
    partitioned = (
        {r["partitionedTopic"]: r for r in read_snapshot_table(run, PARTITIONED_TOPICS)}
        if has_snapshot_table(run, PARTITIONED_TOPICS)
        else {}
    )
    metadata = metadata_rows(
        frames.tables["planned_metadata"].column("partitionedTopic").to_pylist(),
        partitioned,
        partitions,
        bool(info["broker"]["brokerDeleteInactivePartitionedTopicMetadataEnabled"]),
    )
    topic_counts = {r["namespace"]: r["topicCount"] for r in read_snapshot_table(run, NAMESPACES)}
    namespaces = namespace_rows(deleted, topic_counts, read_summary(run.path).get("perNamespace", {}))
    max_share = float(info.get("maxDeletedTopicShare", 0.5))
    return [
        *(frames.check(name) for name in ("actions", "topic_deletions", "last_active_refreshes")),
        CheckFrame(
            "partitioned_metadata",
            pandas_frame(METADATA_FRAME, metadata),
            must_be_true(*METADATA_CHECKS),
        ),
        CheckFrame(
            "namespaces",
            pandas_frame(NAMESPACE_CHECKS, namespaces),
            [
                *must_be_true("namespace_in_snapshot", "summary_reconciles"),
                expect(
                    "ExpectColumnValuesToBeBetween",
                    column="deleted_topic_share",
                    min_value=0.0,
                    max_value=max_share,
                ),
            ],
        ),
        frames.check("holds"),
    ]
