"""The console's browser of one topic (``observe.browse.topic_view``): its ledgers with their times and where they
are, what of it waits for purge, its subscriptions, the policies in force with the level each comes from, the holds
that cover it and the runs that touched it."""

from __future__ import annotations

import pytest

from housekeeping.core.errors import NotFound
from housekeeping.observe.browse import topic_view
from housekeeping.store import admin
from housekeeping.store.holds import place_hold
from housekeeping.store.manifest.load import load_manifest
from tests.conftest import ledger_topic, write_manifest

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
MINUTE = 60_000
TOPIC = "persistent://acme/orders/t"


@pytest.fixture
def store(tmp_path):
    document = {
        "namespaces": {
            "acme/orders": {
                "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1},
                "backlog_quota_map": {
                    "destination_storage": {
                        "limitSize": 4096,
                        "limitTime": -1,
                        "policy": "producer_request_hold",
                    }
                },
            }
        },
        "topics": {
            TOPIC: ledger_topic(
                [
                    (1, [T0, T0 + MINUTE], T0 + 2 * MINUTE),
                    (2, [T0 + 3 * MINUTE], T0 + 4 * MINUTE),
                    (3, [], None),
                ],
                {"billing": {"markDeletePosition": "1:1"}},
                policies={"message_ttl_in_seconds": 600},
            )
        },
    }
    return load_manifest(tmp_path / "store", write_manifest(tmp_path, document))


def test_a_topic_shows_its_ledgers_subscriptions_and_the_policies_in_force_with_their_levels(store):
    view = topic_view(store, TOPIC)
    assert [(r["ledgerId"], r["entries"], r["closed"] is not None, r["where"]) for r in view["ledgers"]] == [
        (1, 2, True, "local"),
        (2, 1, True, "local"),
        (3, 0, False, "local"),
    ]
    assert view["ledgers"][0]["firstEntry"] == "2026-01-01T00:00:00.000Z"
    assert view["ledgers"][0]["lastEntry"] == "2026-01-01T00:01:00.000Z"
    assert [(s["name"], s["markDelete"]) for s in view["subscriptions"]] == [("billing", "1:1")]
    effective = view["effective"]
    assert effective["messageTtlSeconds"] == {"value": 600, "source": f"topic {TOPIC}"}
    assert (
        effective["retention"]["source"].startswith("namespace")
        and effective["retention"]["time_minutes"] == 60
    )
    assert "destination_storage" in view["namespacePolicies"]["backlog_quota_map"]
    assert view["pending"] == [] and view["holds"] == []


def test_holds_that_cover_it_pending_deletions_and_the_runs_that_touched_it(store):
    place_hold(store, "acme/orders", reason="audit", actor="tester")
    admin.set_policies(store, TOPIC, {"message_ttl_in_seconds": 60}, now_ms=T0 + 5 * MINUTE, actor="tester")
    view = topic_view(store, TOPIC)
    assert [h["target"] for h in view["holds"]] == ["acme/orders"]
    assert view["effective"]["messageTtlSeconds"]["value"] == 60
    assert [r["mechanism"] for r in view["runs"]] == ["admin"]


def test_a_ledger_waiting_for_purge_is_listed_with_its_run(store):
    from sqlalchemy import insert

    from housekeeping.store import metadata_schema as t
    from housekeeping.store.store import write_transaction

    with write_transaction(store.engine) as conn:
        conn.execute(
            insert(t.pending_deletions).values(
                topic=TOPIC,
                ledger_id=0,
                path=store.ledger_rel_path(TOPIC, 0),
                ledger_row="{}",
                size_bytes=20,
                run_id="trim-run",
                deleted_as_of_ms=T0,
                purge_after_ms=T0 + 86_400_000,
                status="pending",
            )
        )
    pending = topic_view(store, TOPIC)["pending"]
    assert [(r["ledgerId"], r["runId"], r["purgeAfter"]) for r in pending] == [
        (0, "trim-run", "2026-01-02T00:00:00.000Z")
    ]


def test_an_unknown_topic_is_named(store):
    with pytest.raises(NotFound, match="no topic persistent://acme/orders/nope"):
        topic_view(store, "persistent://acme/orders/nope")


def test_a_namespace_and_its_topics_read_the_same_on_either_metadata_database(tmp_path, metadata_backend):
    """The namespace page's queries (topics paged and found by name, their ledgers counted, offloaded ones
    among them) on SQLite and on PostgreSQL (a cast of a boolean to a number, which PostgreSQL refuses, once made the
    namespace page an Internal Server Error there)."""
    from housekeeping.observe.browse import namespace_view

    document = {
        "namespaces": {"acme/orders": {}},
        "topics": {
            f"persistent://acme/orders/t-{i}": ledger_topic(
                [(1, [T0], T0 + MINUTE), (2, [T0 + 2 * MINUTE], None)], {"sub": {"markDeletePosition": "1:0"}}
            )
            for i in range(3)
        },
    }
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, document))
    assert store.engine.dialect.name == metadata_backend
    view = namespace_view(store, "acme/orders", limit=2)
    assert view["topics"]["total"] == 3
    rows = view["topics"]["rows"]
    assert [r["topic"] for r in rows] == ["persistent://acme/orders/t-0", "persistent://acme/orders/t-1"]
    assert all((r["ledgers"], r["offloadedLedgers"]) == (2, 0) for r in rows), rows
    assert [s["name"] for s in rows[0]["subscriptions"]] == ["sub"]
    found = namespace_view(store, "acme/orders", search="t-2")
    assert [r["topic"] for r in found["topics"]["rows"]] == ["persistent://acme/orders/t-2"]
    assert topic_view(store, "persistent://acme/orders/t-2")["ledgers"][0]["where"] == "local"
