"""The snapshot's table builders (housekeeping.engine.snapshot_tables): a topic's policy columns, resolved once for
the topics that set no policy of their own, are what resolving each topic alone gives."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from housekeeping.core.policies import BrokerConfig
from housekeeping.engine.snapshot_tables import Selection, topics

pytestmark = pytest.mark.unit

RETAIN_DAY = {"retention_policies": {"retentionTimeInMinutes": 1440, "retentionSizeInMB": -1}}
NAMESPACES = {
    "acme/orders": {**RETAIN_DAY, "message_ttl_in_seconds": 60},
    "acme/audit": {"offload_policies": {"managedLedgerOffloadDeletionLagInMillis": 5}},
    "pulsar/system": {},
}
TOPICS = [
    ("persistent://acme/orders/a", "acme/orders", {}),
    ("persistent://acme/orders/b", "acme/orders", {}),
    # A system topic's name gives it retention (0, 0) where the namespace's retention would apply to another.
    ("persistent://acme/orders/__change_events", "acme/orders", {}),
    ("persistent://acme/orders/__change_events-partition-1", "acme/orders", {}),
    # Its own retention: the source names the topic.
    ("persistent://acme/orders/own", "acme/orders", {"message_ttl_in_seconds": 5}),
    ("persistent://acme/audit/a", "acme/audit", {}),
    ("persistent://acme/audit/b", "acme/audit", {"offload_policies": {"managedLedgerOffloadThresholdInSeconds": 9}}),
    # A system-service namespace: no offloader whatever the tier.
    ("persistent://pulsar/system/a", "pulsar/system", {}),
]  # fmt: skip


class _Overlay:
    """A what-if that gives one topic policies of its own and changes a namespace's."""

    def topic_policies(self, topic: str, stored: dict[str, Any]) -> dict[str, Any]:
        return {**stored, "message_ttl_in_seconds": 7} if topic.endswith("/orders/b") else stored

    def namespace_policies(self, namespace: str, stored: dict[str, Any]) -> dict[str, Any]:
        return {**stored, "message_ttl_in_seconds": 600} if namespace == "acme/audit" else stored


def _selection(overlay: Any = None) -> Selection:
    rows = [
        SimpleNamespace(
            name=name,
            namespace=namespace,
            policies=json.dumps(policies),
            version=1,
            producers=0,
            consumers=0,
            last_active_ms=None,
        )
        for name, namespace, policies in TOPICS
    ]
    state = SimpleNamespace(topic_rows=rows, namespaces=NAMESPACES, holds={})
    return Selection(
        state, BrokerConfig.from_layers(), frozenset(name for name, _, _ in TOPICS), overlay, offloader=True
    )


@pytest.mark.parametrize("overlay", [None, _Overlay()], ids=["stored", "what-if"])
def test_shared_policy_columns_are_what_each_topic_resolved_alone_gives(overlay):
    selection = _selection(overlay)
    built = {row["topic"]: row for row in topics(selection)}
    alone = {
        row.name: selection._resolved_columns(row.name, *selection._levels(row))
        for row in selection.state.topic_rows
    }
    for name, columns in alone.items():
        assert {k: built[name][k] for k in columns} == columns, name
    # The cases differ where they must (otherwise the comparison above proves little).
    assert built["persistent://acme/orders/__change_events"]["retentionTimeMs"] == 0
    assert built["persistent://acme/orders/a"]["retentionTimeMs"] == 1440 * 60_000
    assert built["persistent://acme/orders/own"]["messageTtlSource"] == "topic persistent://acme/orders/own"
    assert (
        not built["persistent://pulsar/system/a"]["offloader"]
        and built["persistent://acme/audit/a"]["offloader"]
    )
    # Resolved once per (namespace, system-topic name) among the topics without policies of their own.
    shared = {("acme/orders", False), ("acme/orders", True), ("acme/audit", False), ("pulsar/system", False)}
    assert set(selection._shared_policy_columns) == shared
    if overlay is not None:
        assert built["persistent://acme/orders/b"]["messageTtlSource"] == "topic persistent://acme/orders/b"
        assert built["persistent://acme/audit/a"]["messageTtlSeconds"] == 600
