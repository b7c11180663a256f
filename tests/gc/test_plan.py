"""The inactive-topic GC rule (docs/semantics.md §6) on the per-topic rule the planner runs topic by topic
(``spark_apps.gc.rule``), called alone: no Spark."""

from __future__ import annotations

import pytest

from housekeeping.core.names import is_system_topic
from housekeeping.engine.contract import CURSORS, LEDGERS, PARTITIONED_TOPICS, TOPICS
from spark_apps.gc.rule import TopicPlan, metadata_deletion, plan_topic
from tests.conftest import NEVER_OFFLOADED

pytestmark = pytest.mark.unit

AS_OF = 100_000_000
NO_SUBS, CAUGHT_UP = "delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"


def topic(name: str, **facts) -> dict:
    """A snapshot topic row: idle since AS_OF - 1 h, no clients, no retention, 60 s limit, no-subscriptions mode."""
    row = {
        "topic": f"persistent://t/ns/{name}" if "://" not in name else name,
        "namespace": "t/ns",
        "tenant": "t",
        "version": 1,
        "producers": 0,
        "consumers": 0,
        "lastActiveMs": AS_OF - 3_600_000,
        "retentionTimeMs": 0,
        "retentionSizeBytes": 0,
        "retentionSource": "broker",
        "retentionDescription": "none",
        "messageTtlSeconds": 0,
        "messageTtlSource": "broker",
        "sizeQuotaLimitBytes": -1,
        "sizeQuotaPolicy": "producer_request_hold",
        "timeQuotaLimitSeconds": -1,
        "timeQuotaPolicy": "producer_request_hold",
        "policies": "{}",
        "inactiveDeleteMode": NO_SUBS,
        "maxInactiveSeconds": 60,
        "deleteWhileInactive": True,
        "inactivePolicySource": "broker",
        "partitionedTopic": None,
    }
    row.update(facts)
    if "://" in name and "namespace" not in facts:
        row["namespace"] = "/".join(name.split("://")[1].split("/")[:2])
    row.setdefault("isSystemTopic", is_system_topic(row["topic"]))  # as the snapshot computes it
    return row


def plans(topics, cursors=(), gc_enabled=True, as_of=AS_OF, ledgers=None) -> dict[str, TopicPlan]:
    """cursors: (topic local name, cursor name, durable, L, E); every topic has ledgers 1 (5 entries, closed)
    and 2 (3 entries, current) unless ``ledgers`` says otherwise."""

    def ledger(topic: str, ledger_id: int, entries: int, size: int, closed: int | None) -> dict:
        return LEDGERS.row(
            {**NEVER_OFFLOADED["ledgers"], "topic": topic, "ledgerId": ledger_id, "entries": entries, "size": size,
             "closedAtMs": closed, "entriesStored": False}
        )  # fmt: skip

    rows = ledgers if ledgers is not None else [
        ledger(t["topic"], 1, 5, 50, 1000) for t in topics
    ] + [ledger(t["topic"], 2, 3, 30, None) for t in topics]  # fmt: skip
    cursor_rows = [
        CURSORS.row(
            {"topic": f"persistent://t/ns/{tp}", "name": name, "durable": durable, "markDeleteLedger": lg,
             "markDeleteEntry": e, "consumers": 0}
        )
        for tp, name, durable, lg, e in cursors
    ]  # fmt: skip
    return {
        t["topic"].rsplit("/", 1)[-1]: plan_topic(
            TOPICS.row({**NEVER_OFFLOADED["topics"], **t}),
            [r for r in rows if r["topic"] == t["topic"]],
            [c for c in cursor_rows if c["topic"] == t["topic"]],
            as_of,
            gc_enabled,
        )
        for t in topics
    }


def decide(topics, cursors=(), **options) -> dict[str, dict]:
    return {name: plan.decision for name, plan in plans(topics, cursors, **options).items()}


def test_no_subscriptions_mode_any_subscription_or_reader_keeps_the_topic_active():
    result = decide(
        [topic("durable"), topic("reader"), topic("none")],
        [("durable", "s", True, 2, 2), ("reader", "r", False, 1, -1)],
    )
    assert result["durable"]["kind"] == "subscriptions" and result["durable"]["refreshLastActive"]
    assert result["reader"]["kind"] == "subscriptions", "a reader's (non-durable) subscription counts too"
    assert result["none"]["decision"] == "delete" and not result["none"]["refreshLastActive"]


def test_caught_up_mode_only_a_backlog_keeps_the_topic_active():
    topics = [topic(n, inactiveDeleteMode=CAUGHT_UP) for n in ("caught", "behind", "end-of-closed")]
    result = decide(
        topics,
        [("caught", "s", True, 2, 2), ("behind", "s", True, 2, 1), ("end-of-closed", "s", True, 1, 4)],
    )
    assert result["caught"]["decision"] == "delete", "a caught-up subscription does not keep it"
    assert result["behind"]["kind"] == "backlog" and result["behind"]["refreshLastActive"]
    assert result["end-of-closed"]["kind"] == "backlog", "entries 2:0..2:2 are still unacknowledged"


def test_connected_clients_keep_the_topic_active_in_both_modes():
    result = decide(
        [
            topic("producer", producers=1),
            topic("consumer", consumers=1, inactiveDeleteMode=CAUGHT_UP),
        ],
    )
    assert result["producer"]["kind"] == "connected_clients" and result["producer"]["decision"] == "keep"
    assert result["consumer"]["kind"] == "connected_clients"


def test_duration_boundary_is_inclusive():
    result = decide(
        [
            topic("exactly", lastActiveMs=AS_OF - 60_000),
            topic("one-ms-short", lastActiveMs=AS_OF - 59_999),
            topic("future", lastActiveMs=AS_OF + 5_000),
        ],
    )
    assert result["exactly"]["decision"] == "delete", (
        "as-of - lastActive >= maxInactiveDurationSeconds deletes"
    )
    assert result["one-ms-short"]["kind"] == "inactive_less_than_limit"
    assert result["future"]["kind"] == "inactive_less_than_limit", (
        "a backfill before lastActive keeps the topic"
    )
    assert not result["future"]["refreshLastActive"]


def test_delete_while_inactive_off_and_broker_switch_off_keep_everything_without_stamping():
    assert decide([topic("off", deleteWhileInactive=False)])["off"]["kind"] == "delete_while_inactive_off"
    result = decide([topic("idle"), topic("busy", producers=1)], gc_enabled=False)
    assert {r["kind"] for r in result.values()} == {"gc_disabled"}
    assert not any(r["refreshLastActive"] for r in result.values()), "the monitor does not run at all"


def test_retention_time_postpones_and_minus_one_forbids():
    result = decide(
        [
            topic("within", retentionTimeMs=7_200_000),
            topic("past", retentionTimeMs=3_600_000),
            topic("forever", retentionTimeMs=-1, retentionSizeBytes=-1),
            topic("size-only", retentionTimeMs=0, retentionSizeBytes=10**9),
        ],
    )
    assert result["within"]["kind"] == "retention_time"
    assert result["past"]["decision"] == "delete", (
        "retained while as-of - lastActive < retention time, strictly"
    )
    assert result["forever"]["kind"] == "retention_time_infinite"
    assert result["size-only"]["decision"] == "delete", "retention size never keeps an inactive topic"


def test_system_topics_and_heartbeat_topics_are_never_deleted():
    heartbeat = topic("persistent://pulsar/broker-1:8080/healthcheck", namespace="pulsar/broker-1:8080")
    result = decide([topic("__change_events"), heartbeat], ledgers=[])
    assert {r["kind"] for r in result.values()} == {"system_topic"}


def test_unknown_last_active_is_stamped_as_loaded_now():
    result = decide([topic("fresh", lastActiveMs=None)])
    assert result["fresh"]["kind"] == "last_active_unknown" and result["fresh"]["refreshLastActive"]
    actions = plans([topic("fresh", lastActiveMs=None)])["fresh"].actions
    assert [(a["action"], a["lastActiveMs"]) for a in actions] == [("refresh_last_active", AS_OF)]


def test_partitions_are_decided_alone_and_metadata_goes_only_when_enabled_and_none_is_left():
    parent = "persistent://t/ns/pt"
    partitions = [topic(f"pt-partition-{i}", partitionedTopic=parent) for i in range(3)]
    result = decide(partitions, [("pt-partition-2", "s", True, 2, 2)])
    assert [result[f"pt-partition-{i}"]["decision"] for i in range(3)] == ["delete", "delete", "keep"]
    deleted = sum(
        p.decision["decision"] == "delete"
        for p in plans(partitions, [("pt-partition-2", "s", True, 2, 2)]).values()
    )

    def metadata(existing: int, enabled: bool) -> list[str]:
        row = PARTITIONED_TOPICS.row(
            {"partitionedTopic": parent, "namespace": "t/ns", "partitions": 3, "existingPartitions": existing}
        )
        action = metadata_deletion(row, deleted, enabled)
        return [] if action is None else [action["topic"]]

    assert metadata(existing=3, enabled=True) == [], "partition 2 is still there"
    assert metadata(existing=2, enabled=True) == [parent], "both existing partitions go in this run"
    assert metadata(existing=2, enabled=False) == [], (
        "brokerDeleteInactivePartitionedTopicMetadataEnabled off"
    )
