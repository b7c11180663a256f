"""Names are validated and every file path stays inside the store's ledger tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from housekeeping.core.errors import InputError, PathOutsideStore
from housekeeping.core.names import (
    NamespaceName,
    TopicName,
    is_system_topic,
    is_system_topic_name,
    partition_index,
    topic_dir_parts,
)
from housekeeping.store.store import Store

pytestmark = pytest.mark.unit


def test_parse_topic_and_namespace():
    name = TopicName.parse("persistent://acme/orders/payments-partition-3")
    assert (name.tenant, name.namespace, name.local_name) == ("acme", "orders", "payments-partition-3")
    assert name.partitioned_parent == "persistent://acme/orders/payments"
    assert TopicName.parse("persistent://a/b/__change_events").is_system_topic
    assert str(NamespaceName.parse("acme/orders")) == "acme/orders"


# (topic, SystemTopicNames#isSystemTopic: retention (0, 0) by default, BrokerService#isSystemTopic: no TTL,
# backlog quota or GC). apache/pulsar master: SystemTopicNames.java, NamespaceService#isSystemServiceNamespace.
SYSTEM_TOPIC_CASES = [
    # Pulsar's event topics, and their partitions (the partition suffix is stripped first).
    ("persistent://acme/audit/__change_events", True, True),
    ("persistent://acme/audit/__change_events-partition-0", True, True),
    ("persistent://acme/audit/__change_events-partition-12", True, True),
    ("persistent://acme/audit/__transaction_buffer_snapshot", True, True),
    ("persistent://acme/audit/__transaction_buffer_snapshot_segments", True, True),
    ("persistent://acme/audit/__transaction_buffer_snapshot_indexes-partition-3", True, True),
    # Transaction-internal names: the coordinator's topics (a prefix) and pending-ack stores (a suffix).
    ("persistent://pulsar/system/transaction_coordinator_assign-partition-0", True, True),
    ("persistent://pulsar/system/__transaction_log_7", True, True),
    ("persistent://acme/audit/orders-partition-0-billing__transaction_pending_ack", True, True),
    # System namespaces: system topics for expiry, quota and GC, but retention comes from the policies.
    ("persistent://pulsar/system/loadbalancer-broker-load-data", False, True),
    ("persistent://pulsar/broker-1.example.com:8080/healthcheck", False, True),
    # Look-alike user topics: ordinary topics.
    ("persistent://acme/audit/__ledger_copy", False, False),
    ("persistent://acme/audit/__change_events7", False, False),
    ("persistent://acme/audit/my__change_events", False, False),
    ("persistent://acme/audit/__change_events-partition-01", False, False),  # not a partition: "01"
    ("persistent://acme/audit/__change_events-partition--1", False, False),
    ("persistent://acme/audit/__change_events-partition-2147483648", False, False),  # not a Java int
    ("persistent://acme/audit/__transaction_pending_ack_copy", False, False),
    ("persistent://acme/audit/__transaction_log_7", False, False),  # the log prefix is pulsar/system's
    ("persistent://acme/system/__transaction_log_7", False, False),
    ("persistent://pulsar/a:b:8080/healthcheck", False, False),  # not the heartbeat pattern (host has ':')
    ("persistent://pulsar/broker-1:http/healthcheck", False, False),
    ("persistent://pulsar/default/healthcheck", False, False),
]


@pytest.mark.parametrize(("topic", "by_name", "by_broker"), SYSTEM_TOPIC_CASES)
def test_system_topics_are_pulsars_exact_names_and_namespaces(topic, by_name, by_broker):
    assert is_system_topic_name(topic) is by_name
    assert is_system_topic(topic) is by_broker
    parsed = TopicName.parse(topic)
    assert (parsed.is_system_topic_name, parsed.is_system_topic) == (by_name, by_broker)


@pytest.mark.parametrize(
    ("local", "index"),
    [
        ("orders-partition-0", 0),
        ("orders-partition-2147483647", 2147483647),
        ("orders-partition-3-partition-4", 4),
        ("orders-partition-01", None),
        ("orders-partition--1", None),
        ("orders-partition-", None),
        ("orders-partition-2147483648", None),
        ("orders-partition-1a", None),
        ("orders", None),
    ],
)
def test_partition_index_is_pulsars(local, index):
    """Pulsar TopicName#getPartitionIndex: the text after the last -partition-, a canonical Java int."""
    assert partition_index(local) == index
    parent = TopicName.parse(f"persistent://t/ns/{local}").partitioned_parent
    assert parent == (None if index is None else f"persistent://t/ns/{local.rsplit('-partition-', 1)[0]}")


@pytest.mark.parametrize(
    "bad",
    [
        "persistent://a/../c",
        "persistent://a/b/..",
        "persistent://a/b/c/d",
        "persistent://a/b/c\\d",
        "persistent://a/b/c\x00",
        "non-persistent://a/b/c",
        "persistent://a/b/" + "x" * 201,
        "persistent://a/b/c';drop",
        "persistent://a//c",
        "a/b/c",
    ],
)
def test_hostile_topic_names_are_rejected(bad):
    with pytest.raises(InputError):
        TopicName.parse(bad)


def test_dir_parts_are_single_segments():
    for part in topic_dir_parts(TopicName.parse("persistent://a.b/c:d/e=f.g")):
        assert "/" not in part and "\\" not in part and part not in (".", "..")


def test_remove_ledger_dir_refuses_paths_outside_the_ledger_tree(tmp_path):
    store = Store(tmp_path / "store", "sqlite://")
    (store.ledgers_root / "persistent/a/b/c/1").mkdir(parents=True)
    outside = tmp_path / "precious"
    outside.mkdir()
    for rel in ("../precious", "ledgers/../../precious", str(outside), "ledgers", "metadata.db"):
        with pytest.raises(PathOutsideStore):
            store.remove_ledger_dir(rel)
    assert outside.is_dir()
    link = store.ledgers_root / "persistent/a/b/c/2"
    link.symlink_to(outside)
    with pytest.raises(PathOutsideStore):
        store.remove_ledger_dir("ledgers/persistent/a/b/c/2")
    assert outside.is_dir()
    assert store.remove_ledger_dir("ledgers/persistent/a/b/c/1") is True
    assert store.remove_ledger_dir("ledgers/persistent/a/b/c/1") is False  # idempotent
    assert not Path(store.ledgers_root / "persistent/a/b/c/1").exists()
