"""The admin paths (``housekeeping.store.admin``): cursor resets, subscriptions and topics deleted by hand, policy
changes, as ``pulsar-admin`` makes them; each journaled with who and when, and bad input refused by name with nothing
changed."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from housekeeping.core.errors import InputError
from housekeeping.engine.restore import restore
from housekeeping.store import admin, clients
from housekeeping.store import metadata_schema as t
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from tests.conftest import write_manifest

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
TOPIC = "persistent://p/ns/orders"
NS = "p/ns"


@pytest.fixture
def store(tmp_path):
    """A topic with ledgers 0 (3 entries published at T0+1..3 s, closed), 1 (2 entries at T0+10..11 s, closed) and
    the current ledger 2 (1 entry at T0+20 s); a subscription at the end."""
    opened = load_manifest(
        tmp_path / "store", write_manifest(tmp_path, {"namespaces": {NS: {}}, "topics": {}})
    )
    clients.create_topic(opened, TOPIC, now_ms=T0)
    clients.connect_producer(opened, TOPIC, now_ms=T0)
    for times in ((1, 2, 3), (10, 11), (20,)):
        clients.publish(
            opened, TOPIC, [{"value": str(s), "publishTime": T0 + s * 1000} for s in times], now_ms=T0
        )
        if times != (20,):
            clients.roll_ledger(opened, TOPIC, now_ms=T0 + times[-1] * 1000)
    clients.subscribe(opened, TOPIC, "sub", now_ms=T0)
    return opened


def position(store, name="sub") -> str:
    return export_manifest(store)["topics"][TOPIC]["cursors"][name]["markDeletePosition"]


def journal_rows(store) -> list:
    with store.engine.connect() as conn:
        return list(
            conn.execute(select(t.journal).where(t.journal.c.mechanism == "admin").order_by(t.journal.c.id))
        )


def test_a_reset_to_a_position_makes_it_the_next_message_read_backward_and_forward(store):
    assert position(store) == "2:0"
    moved = admin.reset_cursor(store, TOPIC, "sub", position="0:1", now_ms=T0 + 60_000, actor="ops@host")
    assert (moved["from"], moved["to"], moved["direction"]) == ("2:0", "0:0", "backward")
    assert position(store) == "0:0"
    assert admin.reset_cursor(store, TOPIC, "sub", position="1:0", now_ms=T0)["to"] == "1:-1"
    assert admin.reset_cursor(store, TOPIC, "sub", position="2:1", now_ms=T0)["to"] == "2:0"  # latest
    (first, *_) = journal_rows(store)
    assert first.action == "reset-cursor" and first.actor == "ops@host" and first.as_of_ms == T0 + 60_000
    assert json.loads(first.detail)["to"] == "0:0"


def test_a_position_the_topic_no_longer_has_moves_to_the_next_it_has(store):
    # Past a closed ledger's last entry: the next ledger's first; before the first ledger: the first ledger's.
    assert admin.reset_cursor(store, TOPIC, "sub", position="0:7", now_ms=T0)["to"] == "1:-1"
    with store.engine.begin() as conn:
        conn.execute(t.ledgers.delete().where((t.ledgers.c.topic == TOPIC) & (t.ledgers.c.ledger_id == 0)))
    assert admin.reset_cursor(store, TOPIC, "sub", position="0:0", now_ms=T0)["to"] == "1:-1"


def test_a_reset_by_time_goes_to_the_newest_entry_published_before_it(store):
    assert admin.reset_cursor(store, TOPIC, "sub", time_ms=T0 + 10_500, now_ms=T0)["to"] == "1:0"
    assert admin.reset_cursor(store, TOPIC, "sub", time_ms=T0 + 10_000, now_ms=T0)["to"] == "0:2"
    assert admin.reset_cursor(store, TOPIC, "sub", time_ms=T0, now_ms=T0)["to"] == "0:-1"
    assert admin.reset_cursor(store, TOPIC, "sub", time_ms=T0 + 99_000, now_ms=T0)["to"] == "2:0"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"topic": "persistent://p/ns/nope", "position": "0:0"},
            "topic persistent://p/ns/nope does not exist",
        ),
        ({"subscription": "nope", "position": "0:0"}, "subscription 'nope' does not exist"),
        ({"position": "zero"}, "position 'zero' must have the form ledgerId:entryId"),
        ({"position": "0:-3"}, "position '0:-3' has a negative entry id"),
        ({"position": "2:2"}, r"position '2:2' is beyond the topic's end \(its last entry is 2:0\)"),
        ({"position": "9:0"}, "beyond the topic's end"),
        ({"position": "0:0", "time_ms": T0}, "give a position or a time, not both"),
        ({"subscription": "__compaction", "position": "0:0"}, "moved by compaction only"),
    ],
)
def test_bad_resets_are_refused_by_name_and_change_nothing(store, kwargs, message):
    before = export_manifest(store)
    arguments = {"topic": TOPIC, "subscription": "sub", **kwargs}
    with pytest.raises(InputError, match=message):
        admin.reset_cursor(
            store, arguments.pop("topic"), arguments.pop("subscription"), now_ms=T0, **arguments
        )
    assert export_manifest(store) == before and journal_rows(store) == []


def test_create_subscription_at_a_position_and_delete_it_refused_while_consumers_are_connected(store):
    created = admin.subscribe(store, TOPIC, "replay", initial="1:1", now_ms=T0)
    assert created["markDelete"] == "1:0" and position(store, "replay") == "1:0"
    clients.connect_consumer(store, TOPIC, "replay", now_ms=T0)
    with pytest.raises(InputError, match="'replay' has 1 connected consumer"):
        admin.delete_subscription(store, TOPIC, "replay", now_ms=T0)
    gone = admin.delete_subscription(store, TOPIC, "replay", now_ms=T0, force=True)
    assert gone["consumersDisconnected"] == 1
    assert "replay" not in export_manifest(store)["topics"][TOPIC]["cursors"]
    assert [r.action for r in journal_rows(store)] == ["create-subscription", "unsubscribe"]


def test_a_topic_deleted_by_hand_waits_for_purge_and_comes_back_whole(store):
    with pytest.raises(InputError, match="1 producer"):
        admin.delete_topic(store, TOPIC, now_ms=T0, purge_grace_seconds=60)
    before = export_manifest(store)["topics"][TOPIC]
    deleted = admin.delete_topic(store, TOPIC, now_ms=T0, purge_grace_seconds=60, force=True)
    assert deleted["ledgers"] == [0, 1, 2] and deleted["forced"]
    assert TOPIC not in export_manifest(store)["topics"]
    assert restore(store, TOPIC, as_of_ms=T0, run_id="r") == [0, 1, 2]
    # Back whole, without the producer the forced delete disconnected.
    assert export_manifest(store)["topics"][TOPIC] == {**before, "producers": 0}


def test_policies_change_journaled_before_and_after_and_removed_with_none(store):
    retention = {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    changed = admin.set_policies(store, NS, {"retention_policies": retention}, now_ms=T0, actor="ops")
    assert changed["changes"] == {"retention_policies": {"before": None, "after": retention}}
    admin.set_policies(store, TOPIC, {"message_ttl_in_seconds": 30}, now_ms=T0)
    assert admin.policies_of(store, TOPIC)["effective"]["message_ttl_seconds"] == 30
    admin.set_policies(store, NS, {"retention_policies": None}, now_ms=T0)
    assert admin.policies_of(store, NS)["policies"] == {}
    assert [json.loads(r.detail)["target"] for r in journal_rows(store)] == [NS, TOPIC, NS]


@pytest.mark.parametrize(
    ("target", "changes", "message"),
    [
        ("nope/ns", {"message_ttl_in_seconds": 1}, "namespace nope/ns does not exist"),
        (
            "persistent://p/ns/nope",
            {"message_ttl_in_seconds": 1},
            "topic persistent://p/ns/nope does not exist",
        ),
        (NS, {"retention": 1}, "unknown policy 'retention'"),
        (NS, {"message_ttl_in_seconds": -5}, "message_ttl_in_seconds"),
        (
            NS,
            {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}},
            "setting a single time or size limit to 0 is invalid",
        ),
        (
            NS,
            {
                "retention_policies": {"retentionTimeInMinutes": 10, "retentionSizeInMB": -1},
                "backlog_quota_map": {"message_age": {"limitTime": 3600, "policy": "producer_request_hold"}},
            },
            "must be less than the retention time",
        ),
    ],
)
def test_bad_policies_are_refused_by_name_and_change_nothing(store, target, changes, message):
    before = export_manifest(store)
    with pytest.raises(InputError, match=message):
        admin.set_policies(store, target, changes, now_ms=T0)
    assert export_manifest(store) == before and journal_rows(store) == []
