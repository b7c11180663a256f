"""Quality-gate checks for consumed-ledger trim, re-derived from the snapshot apart from the planner: the gate's
declaration on the skeleton every per-topic gate shares (``spark_apps.shared.gate_app``), with
``spark_apps.trim.checks`` topic by topic over every topic of the snapshot and every topic the plan names. Each check
frame has one row per planned action, namespace or due local copy, with a boolean column per invariant; what spans
buckets (the bytes deleted per namespace against the summary and the blast radius) is added up on the driver.
"""

from __future__ import annotations

from collections.abc import Mapping

from housekeeping.engine.contract import CURSORS, LEDGERS, NAMESPACES, table
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.gate import (
    CheckFrame,
    Expectation,
    known_actions,
    must_be_true,
    one_row_each,
)
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.plan import read_summary
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot_reads import read_snapshot_table
from spark_apps.shared.gate_app import GateTopic, TopicPassGate, namespace_frame
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import CheckedFrames, boolean_columns
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


def check(topic: GateTopic, info: RunInfo) -> Mapping[str, list[Row]]:
    facts = TopicFacts(topic.row, topic.rows[LEDGERS.name], topic.rows[CURSORS.name])
    return check_topic(facts, topic.actions, int(info.as_of_ms))


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    """What each per-bucket check frame must meet (the pass ships only the rows that could fail it)."""
    return {
        "actions": [known_actions(spec.action_names), *must_be_true("topic_in_snapshot")],
        "deletions": one_row_each(["topic", "ledgerId"], *DELETION_CHECKS),
        "cursor_moves": one_row_each(["topic", "name"], *CURSOR_CHECKS),
        "local_copies": one_row_each(["topic", "ledgerId"], *LOCAL_COPY_CHECKS),
        "local_copy_selection": must_be_true("planned"),
    }


def namespaces(frames: CheckedFrames, run: RunDir, info: RunInfo) -> list[CheckFrame]:
    """The bytes deleted per namespace, added up over the buckets: as the summary says, within the blast radius."""
    max_share = float(info.max_deleted_share)
    deleted: dict[str | None, int] = {}
    for row in frames.tables["namespace_deleted"].to_pylist():
        deleted[row["namespace"]] = deleted.get(row["namespace"], 0) + row["deletedBytes"]
    stored = {r["namespace"]: r["storedBytes"] for r in read_snapshot_table(run, NAMESPACES)}
    rows = namespace_rows(deleted, stored, read_summary(run.path).get("perNamespace", {}), max_share)
    return [namespace_frame(NAMESPACE_CHECKS, rows, "deleted_share", max_share)]


GATE = TopicPassGate(
    reads=(LEDGERS.name, CURSORS.name),
    frames=FRAMES,
    check=check,
    expectations=expectations,
    every_topic=True,
    driver=namespaces,
)
checks = GATE.checks
