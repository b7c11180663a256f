"""Inactive-topic GC through the `housekeeping` CLI contract, on Pulsar's own scenarios.

The cases follow apache/pulsar's InactiveTopicDeleteTest (read there, not copied): the broker's 1 s monitor
becomes explicit GC runs at chosen logical times, and the clients' actions go through the store's client
paths (housekeeping.store.clients), which keep lastActive as docs/semantics.md §6.1 describes.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, snapshot_step
from housekeeping.store import clients
from housekeeping.store import metadata_schema as t
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from tests.conftest import iso, run_cli, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
S = 1_000
NS = "prop/ns-abc"


def _p(name: str, ns: str = NS) -> str:
    return f"persistent://{ns}/{name}"


def _inactive(mode: str, seconds: int) -> dict:
    return {
        "inactive_topic_policies": {
            "inactiveTopicDeleteMode": mode,
            "maxInactiveDurationSeconds": seconds,
            "deleteWhileInactive": True,
        }
    }


def _plan(capsys, store, at_ms: int) -> dict:
    code, out, err = run_cli(
        capsys, "plan", "gc", "--store", str(store.root), "--as-of", iso(at_ms), "--format", "json"
    )
    assert code == 0, err
    return json.loads(out)


def _decisions(plan: dict) -> dict[str, str]:
    """topic -> 'delete' or the kind that keeps it."""
    kept = {b["topic"]: b["kind"] for b in plan["blockers"]}
    deleted = {a["topic"]: "delete" for a in plan["actions"] if a["action"] == "delete_topic"}
    return {**kept, **deleted}


def _topics(store) -> set[str]:
    return set(export_manifest(store)["topics"])


@pytest.fixture(scope="module")
def pulsar_store(tmp_path_factory):
    """Topics of several InactiveTopicDeleteTest cases in one store: broker frequency 1 s (so the broker-level
    max inactive duration is 1 s), partitioned metadata deletion on."""
    root = tmp_path_factory.mktemp("gc-pulsar")
    document = {
        "broker": {
            "brokerDeleteInactiveTopicsEnabled": True,
            "brokerDeleteInactiveTopicsFrequencySeconds": 1,
            "brokerDeleteInactivePartitionedTopicMetadataEnabled": True,
        },
        "namespaces": {
            NS: {},
            "prop/ns-caught-up": _inactive("delete_when_subscriptions_caught_up", 1),
            "prop/ns-max5": _inactive("delete_when_subscriptions_caught_up", 5),
            "pulsar/broker-1:8080": {},
        },
        "topics": {},
    }
    store = load_manifest(root / "store", write_manifest(root, document))
    # testDeleteWhenNoSubscriptions: producer and consumer come and go; the subscription stays.
    topic = _p("no-subs")
    clients.create_topic(store, topic, now_ms=T0)
    clients.connect_producer(store, topic, now_ms=T0)
    clients.subscribe(store, topic, "sub", now_ms=T0)
    clients.connect_consumer(store, topic, "sub", now_ms=T0 + 100)
    clients.publish(store, topic, [{"value": "Pulsar"}] * 3, now_ms=T0 + 100)
    clients.disconnect_consumer(store, topic, "sub", now_ms=T0 + 200)
    clients.disconnect_producer(store, topic, now_ms=T0 + 300)
    # testDeleteAndCleanZkNode / testWhenSubPartitionNotDelete: 5 partitions, a subscription on each.
    for partition in clients.create_partitioned_topic(store, _p("pt"), 5, now_ms=T0):
        clients.connect_producer(store, partition, now_ms=T0)
        clients.disconnect_producer(store, partition, now_ms=T0 + 100)
        clients.subscribe(store, partition, "sub", now_ms=T0 + 100)
    # testDeleteWhenNoBacklogs: caught-up mode, a subscription with 10 unacknowledged messages.
    backlog = _p("backlog", "prop/ns-caught-up")
    clients.create_topic(store, backlog, now_ms=T0)
    clients.subscribe(store, backlog, "sub", now_ms=T0)
    clients.connect_producer(store, backlog, now_ms=T0)
    clients.publish(store, backlog, [{"value": "Pulsar"}] * 10, now_ms=T0 + 100)
    clients.disconnect_producer(store, backlog, now_ms=T0 + 500)
    # testMaxInactiveDuration: caught-up mode, max 5 s; a producer is created and closed.
    max5 = _p("max5", "prop/ns-max5")
    clients.create_topic(store, max5, now_ms=T0)
    clients.connect_producer(store, max5, now_ms=T0 + 500)
    clients.disconnect_producer(store, max5, now_ms=T0 + 500)
    # System topics and testHealthTopicInactiveNotClean's heartbeat topic: never collected.
    clients.create_topic(store, _p("__change_events"), now_ms=T0 - 3600 * S)
    clients.create_topic(store, _p("healthcheck", "pulsar/broker-1:8080"), now_ms=T0 - 3600 * S)
    return store


def test_inactive_topic_delete_scenarios(capsys, pulsar_store):
    store = pulsar_store
    before = _topics(store)

    first = _decisions(_plan(capsys, store, T0 + 2 * S))
    assert first[_p("no-subs")] == "subscriptions"
    assert {first[_p(f"pt-partition-{i}")] for i in range(5)} == {"subscriptions"}
    assert first[_p("backlog", "prop/ns-caught-up")] == "backlog"
    assert first[_p("max5", "prop/ns-max5")] == "inactive_less_than_limit", "1.5 s < 5 s"
    assert first[_p("__change_events")] == first[_p("healthcheck", "pulsar/broker-1:8080")] == "system_topic"
    assert _topics(store) == before, "plan changes nothing"

    # the subscriptions go (deleteSubscription / skipAllMessages at T0 + 3 s)
    clients.unsubscribe(store, _p("no-subs"), "sub", now_ms=T0 + 3 * S)
    for i in range(5):
        clients.unsubscribe(store, _p(f"pt-partition-{i}"), "sub", now_ms=T0 + 3 * S)
    clients.subscribe(store, _p("backlog", "prop/ns-caught-up"), "probe", now_ms=T0 + 3 * S)  # caught up
    clients.unsubscribe(store, _p("backlog", "prop/ns-caught-up"), "probe", now_ms=T0 + 3 * S)
    clients.acknowledge(store, _p("backlog", "prop/ns-caught-up"), "sub", "0:9", now_ms=T0 + 3 * S)

    second = _decisions(_plan(capsys, store, T0 + 3 * S + 999))
    assert second[_p("no-subs")] == "inactive_less_than_limit", "lastActive was refreshed by the unsubscribe"
    assert second[_p("backlog", "prop/ns-caught-up")] == "inactive_less_than_limit"

    at = T0 + 6 * S
    code, _, err = run_cli(capsys, "apply", "gc", "--store", str(store.root), "--as-of", iso(at))
    assert code == 3 and "deleted_topic_share" in err, (
        "6 of prop/ns-abc's 7 topics exceed the 0.5 blast radius"
    )
    assert _topics(store) == before, "a rejected plan changes nothing"

    code, out, err = run_cli(
        capsys,
        "apply",
        "gc",
        "--store",
        str(store.root),
        "--as-of",
        iso(at),
        "--max-deleted-topic-share",
        "1",
    )
    assert code == 0, err
    result = json.loads(out)
    deleted = {_p("no-subs"), _p("backlog", "prop/ns-caught-up"), _p("max5", "prop/ns-max5")}
    deleted |= {_p(f"pt-partition-{i}") for i in range(5)}
    assert set(result["topicsDeleted"]) == deleted
    assert result["partitionedMetadataDeleted"] == [_p("pt")], "no partition left, metadata deletion on"
    assert _topics(store) == before - deleted
    assert "partitionedTopics" not in export_manifest(store)
    report = (store.root / "runs" / "gc").glob("cli-gc-*/report/report.md")
    assert any("Deleted topics per namespace" in p.read_text() for p in report)

    # restore within the grace period: the topic comes back whole with its entries; a partition brings the
    # partitioned metadata it went with
    code, out, err = run_cli(
        capsys, "restore", _p("no-subs"), "--store", str(store.root), "--as-of", iso(at + S)
    )
    assert code == 0, err
    assert json.loads(out)["restoredLedgers"] == [0]
    exported = export_manifest(store, with_messages=True)
    assert [m["value"] for m in exported["topics"][_p("no-subs")]["messages"]] == ["Pulsar"] * 3
    assert run_cli(capsys, "restore", _p("pt-partition-3"), "--store", str(store.root))[0] == 0
    assert export_manifest(store)["partitionedTopics"] == {_p("pt"): {"partitions": 5}}

    # after the purge (default grace 24 h) the files are gone and restore refuses
    code, out, _ = run_cli(capsys, "purge", "--store", str(store.root), "--as-of", iso(at + 86_400 * S))
    assert code == 0 and _p("backlog", "prop/ns-caught-up") in json.loads(out)["topicsPurged"]
    code, _, err = run_cli(capsys, "restore", _p("backlog", "prop/ns-caught-up"), "--store", str(store.root))
    assert code == 2 and "purged" in err and "cannot be restored" in err
    assert not (store.root / "ledgers" / "persistent" / "prop" / "ns-caught-up").exists(), "empty dirs pruned"


def test_metadata_setting_off_and_clients_appearing_between_plan_and_apply(tmp_path):
    """testNotEnabledDeleteZkNode (partitions go, the partitioned metadata stays), and Pulsar's delete()
    re-check: a producer or a subscription that appears after the plan makes apply skip the topic."""
    document = {
        "broker": {"brokerDeleteInactiveTopicsFrequencySeconds": 1},
        "namespaces": {NS: {}},
        "topics": {},
    }
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, document))
    partitions = clients.create_partitioned_topic(store, _p("pt2"), 3, now_ms=T0)
    for name in ("topic2", "racer-producer", "racer-subscription", "racer-policy"):
        clients.create_topic(store, _p(name), now_ms=T0)
    info = snapshot_step(store, "gc", run_id="race", as_of_ms=T0 + 60 * S, max_deleted_topic_share=1.0)
    assert plan_and_gate_in_process(info.run_dir, "gc", "local[2]").success

    clients.connect_producer(store, _p("racer-producer"), now_ms=T0 + 61 * S)
    clients.subscribe(store, _p("racer-subscription"), "late", now_ms=T0 + 61 * S)
    with store.engine.begin() as conn:  # an operator turns deletion off for one topic after the plan
        conn.execute(
            t.topics.update()
            .where(t.topics.c.name == _p("racer-policy"))
            .values(policies=json.dumps({"inactive_topic_policies": {"deleteWhileInactive": False}}))
        )
    result = apply_step(store, info.run_dir, purge_grace_seconds=3600)
    assert set(result["topicsDeleted"]) == {*partitions, _p("topic2")}
    assert result["partitionedMetadataDeleted"] == []
    skipped = result["skippedTopics"]
    assert "producer(s)" in skipped[_p("racer-producer")]
    assert (
        "subscription" in skipped[_p("racer-subscription")]
        or "lastActive" in skipped[_p("racer-subscription")]
    )
    assert "policies changed" in skipped[_p("racer-policy")]
    remaining = export_manifest(store)
    assert set(remaining["topics"]) == {_p("racer-producer"), _p("racer-subscription"), _p("racer-policy")}
    assert remaining["partitionedTopics"] == {_p("pt2"): {"partitions": 3}}, (
        "metadata deletion is off by default"
    )
    with store.engine.connect() as conn:
        journal = {(r.topic, r.status) for r in conn.execute(select(t.journal.c.topic, t.journal.c.status))}
    assert (_p("racer-producer"), "skipped_conflict") in journal
    again = apply_step(store, info.run_dir, purge_grace_seconds=3600)
    assert again["topicsDeleted"] == [] and set(again["alreadyAppliedTopics"]) >= {*partitions, _p("topic2")}
