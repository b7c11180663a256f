"""Quality-gate checks for inactive-topic GC, re-derived from the snapshot apart from the planner: the gate's
declaration on the skeleton every per-topic gate shares (``spark_apps.shared.gate_app``), with ``spark_apps.gc.checks``
topic by topic over each topic the plan names; what spans buckets (partitioned metadata, namespaces) is added up on
the driver.
"""

from __future__ import annotations

from collections.abc import Mapping

from housekeeping.engine.contract import CURSORS, LEDGERS, NAMESPACES, PARTITIONED_TOPICS, table
from housekeeping.engine.documents import RunInfo
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
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot_reads import has_snapshot_table, read_snapshot_table
from spark_apps.gc.checks import (
    DELETION_CHECKS,
    METADATA_CHECKS,
    REFRESH_CHECKS,
    TopicFacts,
    check_topic,
    metadata_rows,
    namespace_rows,
)
from spark_apps.shared.gate_app import GateTopic, TopicPassGate, namespace_frame
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import CheckedFrames, boolean_columns, pandas_frame

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


def check(topic: GateTopic, info: RunInfo) -> Mapping[str, list[Row]]:
    facts = TopicFacts(topic.row, topic.rows[LEDGERS.name], topic.rows[CURSORS.name])
    return check_topic(facts, topic.actions, info)


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


def across_buckets(frames: CheckedFrames, run: RunDir, info: RunInfo) -> list[CheckFrame]:
    """The partitioned topics' metadata and the topics deleted per namespace, added up over the buckets."""
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
        bool(info.broker["brokerDeleteInactivePartitionedTopicMetadataEnabled"]),
    )
    topic_counts = {r["namespace"]: r["topicCount"] for r in read_snapshot_table(run, NAMESPACES)}
    namespaces = namespace_rows(deleted, topic_counts, read_summary(run.path).get("perNamespace", {}))
    max_share = float(info.option("maxDeletedTopicShare", 0.5))
    return [
        CheckFrame(
            "partitioned_metadata", pandas_frame(METADATA_FRAME, metadata), must_be_true(*METADATA_CHECKS)
        ),
        namespace_frame(NAMESPACE_CHECKS, namespaces, "deleted_topic_share", max_share),
    ]


GATE = TopicPassGate(
    reads=(LEDGERS.name, CURSORS.name),
    frames=FRAMES,
    check=check,
    expectations=expectations,
    driver=across_buckets,
)
checks = GATE.checks
