"""The store's metrics (``housekeeping metrics``): every figure checked against values worked out by hand from the
manifest (Pulsar's position arithmetic), and deletion lag through real trim runs: a dry run's plan is evidence,
a newer plan under changed policies withdraws it, an apply moves the data to the pending-deletion log and the
grace period's end starts the clock again."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from housekeeping.observe.metrics.exposition import exposition
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store
from tests.conftest import iso, ledger_topic, run_cli, run_steps, write_manifest

T = 1_793_491_200_000  # 2026-11-01T00:00:00Z
S, H = 1000, 3_600_000


def samples(text: bytes | str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, parsed by prometheus_client's own parser (the text is valid)."""
    if isinstance(text, bytes):
        text = text.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


# acme/orders/a: ledgers 1 (10 entries, 1000 B, closed T-3h), 2 (10, 1000 B, closed T-2h), 3 (5, 500 B, open).
# sub1 at 1:4 (5 entries acked), sub2 at 2:9 (ledger 2 complete), a reader (non-durable) at 3:4.
TOPIC_A = ledger_topic(
    [
        (1, [T - 4 * H + i * S for i in range(10)], T - 3 * H),
        (2, [T - 3 * H + i * S for i in range(10)], T - 2 * H),
        (3, [T - H + i * S for i in range(5)], None),
    ],
    {
        "sub1": {"markDeletePosition": "1:4"},
        "sub2": {"markDeletePosition": "2:9"},
        "reader": {"markDeletePosition": "3:4", "durable": False},
    },
    entry_size=100,
)
DOCUMENT = {
    "namespaces": {
        "acme/orders": {
            "backlog_quota_map": {
                "destination_storage": {"limitSize": 4000, "policy": "producer_request_hold"},
                "message_age": {"limitTime": 7200, "policy": "producer_request_hold"},
            }
        },
        "public/default": {},
    },
    "topics": {
        "persistent://acme/orders/a": TOPIC_A,
        # A topic-level quota stricter than its namespace's: the namespace series shows the strictest.
        "persistent://acme/orders/b": ledger_topic(
            [(7, [T - 30 * S, T - 20 * S], None)],
            {},
            policies={"backlog_quota_map": {"destination_storage": {"limitSize": 3000}}},
            entry_size=50,
        ),
        "persistent://public/default/c": ledger_topic(
            [(1, [T - 10 * S], None)], {"s": {"markDeletePosition": "1:0"}}
        ),
    },
}


@pytest.mark.unit
def test_storage_backlog_and_quota_figures_match_pulsars_arithmetic(tmp_path):
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, DOCUMENT))
    found = samples(exposition(store, as_of_ms=T))
    orders = {"namespace": "acme/orders"}
    assert value(found, "pulsar_storage_size", **orders) == 2500 + 100
    assert value(found, "housekeeping_storage_ledgers", **orders) == 4
    assert value(found, "housekeeping_storage_entries", **orders) == 27
    assert value(found, "housekeeping_topics", **orders) == 2
    # Slowest durable cursor of a is sub1 at 1:4: 2500 - consumedLedgerSize(1000, 10, 4) = 2500 - 5 * 100.
    # b has no subscription: no backlog. The reader never counts.
    assert value(found, "pulsar_storage_backlog_size", **orders) == 2000
    # Its first unacknowledged entry is in ledger 1, closed T-3h (Pulsar's estimate uses the close time).
    assert value(found, "pulsar_storage_backlog_age_seconds", **orders) == 3 * 3600
    assert value(found, "pulsar_storage_backlog_quota_limit", **orders) == 3000
    assert value(found, "pulsar_storage_backlog_quota_limit_time", **orders) == 7200
    assert value(found, "pulsar_storage_backlog_quota_limit", namespace="public/default") == -1
    # c's subscription has read its only entry of the open ledger: nothing waits.
    assert value(found, "pulsar_storage_backlog_size", namespace="public/default") == 0
    assert value(found, "pulsar_storage_backlog_age_seconds", namespace="public/default") == 0
    assert not any(name.startswith("pulsar_subscription") for name, _ in found), (
        "per-topic series need the flag"
    )
    # Nothing was ever deleted or planned.
    assert value(found, "housekeeping_deletion_lag_seconds", **orders) == 0
    assert value(found, "housekeeping_pending_purge_bytes", **orders) == 0
    assert value(found, "housekeeping_metrics_as_of_timestamp_seconds") == T / 1000


@pytest.mark.unit
def test_per_topic_series_name_each_topic_and_subscription(tmp_path):
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, DOCUMENT))
    found = samples(exposition(store, as_of_ms=T, per_topic=True))
    a = {"namespace": "acme/orders", "topic": "persistent://acme/orders/a"}
    assert value(found, "pulsar_storage_size", **a) == 2500
    assert value(found, "pulsar_storage_backlog_quota_limit", **a) == 4000
    assert (
        value(
            found,
            "pulsar_storage_backlog_quota_limit",
            namespace="acme/orders",
            topic="persistent://acme/orders/b",
        )
        == 3000
    )
    assert value(found, "pulsar_subscription_back_log", **a, subscription="sub1") == 20
    assert value(found, "housekeeping_subscription_backlog_size", **a, subscription="sub1") == 2000
    assert value(found, "housekeeping_subscription_backlog_age_seconds", **a, subscription="sub1") == 3 * 3600
    # sub2 finished ledger 2: 5 entries of the open ledger 3 wait, 500 B, the oldest published T-1h.
    assert value(found, "pulsar_subscription_back_log", **a, subscription="sub2") == 5
    assert value(found, "housekeeping_subscription_backlog_size", **a, subscription="sub2") == 500
    assert value(found, "housekeeping_subscription_backlog_age_seconds", **a, subscription="sub2") == 3600
    assert (
        "pulsar_subscription_back_log",
        tuple(sorted({**a, "subscription": "reader"}.items())),
    ) not in found
    # A namespace's figure is the sum of its topics' either way.
    per_namespace = samples(exposition(store, as_of_ms=T))
    assert value(per_namespace, "pulsar_storage_size", namespace="acme/orders") == sum(
        v
        for (name, labels), v in found.items()
        if name == "pulsar_storage_size" and ("namespace", "acme/orders") in labels
    )


@pytest.mark.unit
def test_the_cli_prints_the_exposition_and_refuses_a_bad_as_of(tmp_path, capsys):
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, DOCUMENT))
    code, out, _ = run_cli(capsys, "metrics", "--store", str(store.root), "--as-of", iso(T))
    assert code == 0
    assert out.encode() == exposition(Store.open(store.root), as_of_ms=T)
    code, out, err = run_cli(capsys, "metrics", "--store", str(store.root), "--as-of", "yesterday")
    assert code == 2 and out == "" and "yesterday" in err


# Deletion lag through real runs. acme/orders keeps nothing consumed (retention 0, 0): the consumed ledgers 1 and
# 2 of a topic are deletable as soon as a plan sees them.
LAG_DOCUMENT = {
    "namespaces": {
        "acme/orders": {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}}
    },
    "topics": {
        "persistent://acme/orders/a": ledger_topic(
            [
                (1, [T - 4 * H], T - 3 * H),
                (2, [T - 3 * H], T - 2 * H),
                (3, [T - H], None),
            ],
            {"sub": {"markDeletePosition": "2:0"}},
            entry_size=100,
        ),
    },
}


def _lag(store: Store, as_of_ms: int) -> tuple[float, float]:
    found = samples(exposition(store, as_of_ms=as_of_ms))
    return (
        value(found, "housekeeping_deletion_lag_seconds", namespace="acme/orders"),
        value(found, "housekeeping_deletable_bytes", namespace="acme/orders"),
    )


@pytest.mark.spark
@pytest.mark.runs
def test_deletion_lag_follows_plans_policies_applies_and_the_grace_period(tmp_path, spark):
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, LAG_DOCUMENT))
    # A dry run at T finds ledgers 1 and 2 deletable; nothing deletes them.
    run_steps(store, "trim", T, "dry-1", dry_run=True)
    assert _lag(store, T + H) == (3600, 200)
    # A later dry run lists them again: the clock still runs from the first plan that found them deletable.
    run_steps(store, "trim", T + 2 * H, "dry-2", dry_run=True)
    assert _lag(store, T + 3 * H) == (3 * 3600, 200)
    # Evidence is only what was known at the as-of: at T + 1h the second plan did not exist yet.
    assert _lag(store, T + H) == (3600, 200)

    # The namespace now keeps everything: the newest plan deletes nothing, so nothing is deletable now.
    with store.engine.begin() as conn:
        from housekeeping.store import metadata_schema as t

        conn.execute(
            t.namespaces.update()
            .where(t.namespaces.c.name == "acme/orders")
            .values(
                policies=json.dumps(
                    {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}
                )
            )
        )
    run_steps(store, "trim", T + 4 * H, "dry-3", dry_run=True)
    assert _lag(store, T + 5 * H) == (0, 0)

    # Back to retention 0 and applied with a 1 h grace: the ledgers leave the list (pending purge): no lag until
    # the grace ends, then the lag counts from its end.
    with store.engine.begin() as conn:
        conn.execute(
            t.namespaces.update()
            .where(t.namespaces.c.name == "acme/orders")
            .values(policies=json.dumps(LAG_DOCUMENT["namespaces"]["acme/orders"]))
        )
    run_steps(store, "trim", T + 6 * H, "apply-1", grace=3600)
    assert _lag(store, T + 6 * H + 30 * 60 * S) == (0, 0)
    found = samples(exposition(store, as_of_ms=T + 9 * H))
    assert value(found, "housekeeping_deletion_lag_seconds", namespace="acme/orders") == 2 * 3600
    assert value(found, "housekeeping_pending_purge_bytes", namespace="acme/orders") == 200
    assert (
        value(found, "housekeeping_oldest_pending_deletion_age_seconds", namespace="acme/orders") == 3 * 3600
    )
    assert value(found, "housekeeping_deleted_bytes_total", mechanism="trim", namespace="acme/orders") == 200
    assert value(found, "housekeeping_deleted_ledgers_total", mechanism="trim", namespace="acme/orders") == 2
    assert value(found, "housekeeping_last_success_timestamp_seconds", mechanism="trim") == (T + 6 * H) / 1000
    assert value(found, "housekeeping_last_gate_passed", mechanism="trim") == 1

    from housekeeping.engine.purge import purge

    purge(store, as_of_ms=T + 9 * H, run_id="purge-1")
    found = samples(exposition(store, as_of_ms=T + 9 * H))
    assert value(found, "housekeeping_deletion_lag_seconds", namespace="acme/orders") == 0
    assert value(found, "housekeeping_purged_bytes_total", mechanism="trim", namespace="acme/orders") == 200
    assert value(found, "housekeeping_pending_purge_bytes", namespace="acme/orders") == 0
    assert value(found, "pulsar_storage_size", namespace="acme/orders") == 100


@pytest.mark.unit
def test_deletion_lag_objectives_most_specific_wins_and_bad_settings_name_the_key(tmp_path):
    from housekeeping.core.errors import InputError
    from housekeeping.core.settings import lag_objective, parse_lag_objectives

    objectives = parse_lag_objectives('{"*": 7200, "acme/*": 3600, "acme/orders": 600}')
    assert lag_objective("acme/orders", objectives) == 600
    assert lag_objective("acme/audit", objectives) == 3600
    assert lag_objective("public/default", objectives) == 7200
    assert lag_objective("public/default", {"acme/*": 1}) is None
    assert parse_lag_objectives(None) == parse_lag_objectives("") == {"*": 21600}
    for text, named in (
        ('{"acme": 60}', "'acme'"),
        ('{"*": 0}', "of *"),
        ('{"acme/orders": "1h"}', "acme/orders"),
        ("[60]", "JSON object"),
        ("{", "not JSON"),
    ):
        with pytest.raises(InputError, match="HOUSEKEEPING_DELETION_LAG_OBJECTIVES") as raised:
            parse_lag_objectives(text)
        assert named in str(raised.value)
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, DOCUMENT))
    found = samples(exposition(store, as_of_ms=T, objectives=objectives))
    assert value(found, "housekeeping_deletion_lag_objective_seconds", namespace="acme/orders") == 600
    assert value(found, "housekeeping_deletion_lag_objective_seconds", namespace="public/default") == 7200


@pytest.mark.spark
@pytest.mark.runs
def test_a_backlog_eviction_counts_once_per_topic_and_quota_type(tmp_path, spark):
    """A consumer_backlog_eviction run that moves the slowest subscription of one topic (2000 bytes over a
    1000-byte quota): one destination_storage eviction in its namespace, one cursor moved by backlog."""
    stamps = [T - 3 * H + i * S for i in range(20)]
    document = {
        "namespaces": {
            "acme/evict": {
                "backlog_quota_map": {
                    "destination_storage": {"limitSize": 1000, "policy": "consumer_backlog_eviction"}
                }
            }
        },
        "topics": {
            "persistent://acme/evict/big": ledger_topic(
                [(1, stamps, stamps[-1] + 1), (2, [], None)],
                {"sub": {"markDeletePosition": "1:-1"}},
                entry_size=100,
            ),
            "persistent://acme/evict/small": ledger_topic(
                [(1, stamps[:5], stamps[4] + 1), (2, [], None)],
                {"sub": {"markDeletePosition": "1:-1"}},
                entry_size=100,
            ),
        },
    }
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, document))
    run_steps(store, "backlog", T, "backlog-1")
    found = samples(exposition(store, as_of_ms=T))
    evictions = {
        labels: v
        for (name, labels), v in found.items()
        if name == "pulsar_storage_backlog_quota_exceeded_evictions_total"
    }
    assert evictions == {(("namespace", "acme/evict"), ("quota_type", "destination_storage")): 1}
    assert value(found, "housekeeping_cursors_moved_total", mechanism="backlog", namespace="acme/evict") == 1
