"""GC's gate invariants (``spark_apps.gc.checks``) on one topic, called alone: no Spark. A genuine plan from the rule
passes every check; each corruption fails the check that guards it. The gate's one pass and its mutants end to end
are tests/gc/test_gate.py."""

from __future__ import annotations

import pytest

from housekeeping.engine.contract import TOPICS
from housekeeping.engine.documents import RunInfo
from spark_apps.gc.checks import TopicFacts, check_topic, metadata_rows, namespace_rows
from spark_apps.gc.rule import plan_topic
from tests.conftest import NEVER_OFFLOADED
from tests.gc.test_plan import AS_OF, topic

pytestmark = pytest.mark.unit

INFO = RunInfo(
    run_id="r",
    mechanism="gc",
    as_of_ms=AS_OF,
    broker={
        "brokerDeleteInactiveTopicsEnabled": True,
        "brokerDeleteInactivePartitionedTopicMetadataEnabled": True,
    },
)


def row(name: str, **facts) -> dict:
    return TOPICS.row({**NEVER_OFFLOADED["topics"], **topic(name, **facts)})


def failing(frames: dict[str, list[dict]]) -> set[str]:
    return {f"{name}.{c}" for name, rows in frames.items() for r in rows for c, v in r.items() if v is False}


def cursor(t: dict, name: str = "s") -> dict:
    return {"topic": t["topic"], "name": name, "durable": True, "markDeleteLedger": 1, "markDeleteEntry": 0,
            "lastActiveMs": None, "consumers": 0}  # fmt: skip


def test_the_rule_s_plan_passes_every_check():
    idle, busy = row("idle"), row("busy", producers=1)
    for t in (idle, busy):
        actions = plan_topic(t, [], [], AS_OF, True).actions
        assert actions, t["topic"]
        assert failing(check_topic(TopicFacts(t, [], []), actions, INFO)) == set()


def test_each_corruption_fails_the_check_that_guards_it():
    idle = row("idle")
    delete = plan_topic(idle, [], [], AS_OF, True).actions[0]
    assert failing(check_topic(TopicFacts(idle, [], [cursor(idle)]), [delete], INFO)) == {
        "topic_deletions.no_subscription_keeps_it_active"
    }
    assert failing(check_topic(TopicFacts(idle, [], []), [{**delete, "lastActiveMs": 1}], INFO)) == {
        "topic_deletions.last_active_matches_snapshot"
    }
    young = row("young", lastActiveMs=AS_OF - 1_000)
    assert "topic_deletions.inactive_for_at_least_the_limit" in failing(
        check_topic(
            TopicFacts(young, [], []),
            [{**delete, "topic": young["topic"], "lastActiveMs": AS_OF - 1_000}],
            INFO,
        )
    )
    refresh = {"topic": idle["topic"], "action": "refresh_last_active", "lastActiveMs": AS_OF}
    assert failing(check_topic(TopicFacts(idle, [], []), [delete, refresh], INFO)) == {
        "last_active_refreshes.topic_is_active_or_unknown",
        "last_active_refreshes.not_also_deleted",
    }
    assert "topic_deletions.topic_in_snapshot" in failing(
        check_topic(TopicFacts(None, [], []), [delete], INFO)
    )


def test_partitioned_metadata_needs_every_existing_partition_deleted():
    parent = "persistent://t/ns/pt"
    known = {parent: {"partitionedTopic": parent, "existingPartitions": 2}}
    assert metadata_rows([parent], known, {parent: 2}, True)[0]["no_partition_left"]
    assert not metadata_rows([parent], known, {parent: 1}, True)[0]["no_partition_left"]
    assert not metadata_rows([parent], known, {parent: 2}, False)[0]["metadata_deletion_enabled"]
    assert not metadata_rows(["persistent://t/ns/other"], known, {}, True)[0]["metadata_in_snapshot"]


def test_namespaces_reconcile_with_the_summary():
    rows = {
        r["namespace"]: r
        for r in namespace_rows({"t/ns": (1, 80)}, {"t/ns": 4}, {"t/ns": {"topics": 1, "bytes": 80}})
    }
    assert rows["t/ns"]["summary_reconciles"] and rows["t/ns"]["deleted_topic_share"] == 0.25
    rows = {
        r["namespace"]: r
        for r in namespace_rows({"t/ns": (1, 80)}, {"t/ns": 4}, {"t/ns": {"topics": 1, "bytes": 79}})
    }
    assert not rows["t/ns"]["summary_reconciles"]


@pytest.mark.parametrize("column", ["bytes", "lastActiveMs"])
def test_a_null_in_a_planned_row_fails_a_check_and_never_raises(column):
    """The checks are plain booleans: a null the plan holds (a tampered row) makes the check that reads it false."""
    idle = row("idle")
    delete = plan_topic(idle, [], [], AS_OF, True).actions[0]
    refresh = {"topic": idle["topic"], "action": "refresh_last_active", "lastActiveMs": AS_OF}
    for action in (delete, refresh):
        if column in action:
            assert failing(check_topic(TopicFacts(idle, [], []), [{**action, column: None}], INFO)), action
