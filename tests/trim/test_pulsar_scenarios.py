"""Pulsar's own trim scenarios through the `housekeeping` command (ConsumedLedgersTrimTest, ManagedLedgerTest, the
stats-internal 4.x sample): load -> plan trim --format json -> apply -> inspect."""

from __future__ import annotations

import json

import pytest

from tests.conftest import iso, load_store, run_cli, topic_body

pytestmark = pytest.mark.spark

MIB = 1024 * 1024
MINUTE = 60_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def plan_json(capsys, store: str, as_of_ms: int) -> dict:
    code, out, err = run_cli(
        capsys, "plan", "trim", "--store", store, "--as-of", iso(as_of_ms), "--format", "json"
    )
    assert code == 0, err
    return json.loads(out)


def deleted_ids(plan: dict, topic: str) -> list[int]:
    return sorted(
        a["ledgerId"] for a in plan["actions"] if a["topic"] == topic and a["action"] == "delete_ledger"
    )


def consumed_ledgers_trim_manifest(mark_delete: str) -> dict:
    """ConsumedLedgersTrimTest#TestConsumedLedgersTrim: retention 1 MB / (1 min here, 1 s there), 2 entries of
    1 MiB per ledger, 10 messages -> 5 full ledgers + the eagerly created empty current ledger."""
    ledgers = [(10 + i, 2, 2 * MIB, T0 + i * 1000) for i in range(5)] + [(15, 0, 0, None)]
    return {
        "namespaces": {
            "prop/ns-abc": {"retention_policies": {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1}}
        },
        "topics": {
            "persistent://prop/ns-abc/TestConsumedLedgersTrim": topic_body(
                ledgers, {"my-subscriber-name": mark_delete}, producers=1, consumers=1
            )
        },
    }


@pytest.mark.runs
def test_consumed_ledgers_trim_unconsumed_ledgers_are_retained(capsys, tmp_path, spark):
    store = load_store(capsys, tmp_path, consumed_ledgers_trim_manifest("10:-1"))
    plan = plan_json(capsys, store, T0 + 10 * MINUTE)
    assert plan["actions"] == []
    assert {b["kind"] for b in plan["blockers"]} == {"slowest_subscription", "current_ledger"}
    assert plan["mechanism"] == "trim" and plan["asOf"] == iso(T0 + 10 * MINUTE)


@pytest.mark.runs
def test_consumed_ledgers_trim_all_consumed_leaves_only_the_current_ledger(capsys, tmp_path, spark):
    store = load_store(capsys, tmp_path, consumed_ledgers_trim_manifest("14:1"))
    topic = "persistent://prop/ns-abc/TestConsumedLedgersTrim"
    assert deleted_ids(plan_json(capsys, store, T0 + 10 * MINUTE), topic) == [10, 11, 12, 13, 14]
    # within the retention time, size alone: 10 MiB total, 1 MiB quota -> delete while >= 1 MiB remains
    # 10 MiB total, 1 MiB quota, nothing expired yet -> delete while >= 1 MiB would remain: 10..13 go,
    # deleting 14 would leave 0 bytes < 1 MiB.
    assert deleted_ids(plan_json(capsys, store, T0 + 30_000), topic) == [10, 11, 12, 13]


@pytest.mark.runs
def test_consumed_ledgers_trim_no_subscriptions(capsys, tmp_path, spark):
    """testConsumedLedgersTrimNoSubscriptions: no subscription; the recovered ledger (7 entries) is deleted once
    its retention time has passed; the empty current ledger stays."""
    doc = {
        "namespaces": {
            "prop/ns-abc": {"retention_policies": {"retentionTimeInMinutes": 1, "retentionSizeInMB": -1}}
        },
        "topics": {"persistent://prop/ns-abc/NoSubs": topic_body([(3, 7, 7 * MIB, T0), (4, 0, 0, None)])},
    }
    store = load_store(capsys, tmp_path, doc)
    assert deleted_ids(plan_json(capsys, store, T0 + MINUTE), "persistent://prop/ns-abc/NoSubs") == []
    assert deleted_ids(plan_json(capsys, store, T0 + MINUTE + 1), "persistent://prop/ns-abc/NoSubs") == [3]


@pytest.mark.runs
def test_admin_trim_ledgers_scenario(capsys, tmp_path, spark):
    """TestAdminTrimLedgers: 50 empty payloads, 2 per ledger, all acknowledged -> one ledger left."""
    ledgers = [(100 + i, 2, 0, T0 + i) for i in range(25)] + [(125, 0, 0, None)]
    doc = {
        "namespaces": {
            "prop/ns-abc": {"retention_policies": {"retentionTimeInMinutes": 1, "retentionSizeInMB": -1}}
        },
        "topics": {"persistent://prop/ns-abc/Admin-partition-0": topic_body(ledgers, {"my-sub": "124:1"})},
    }
    store = load_store(capsys, tmp_path, doc)
    assert deleted_ids(
        plan_json(capsys, store, T0 + 2 * MINUTE), "persistent://prop/ns-abc/Admin-partition-0"
    ) == list(range(100, 125))


@pytest.mark.runs
def test_stats_internal_4x_sample(capsys, tmp_path, spark):
    """docs/semantics.md §3: slowest durable cursor taosx-test at 94:3 pins ledger 94; at 94:9 it goes."""

    def doc(taosx: str) -> dict:
        return {
            "namespaces": {"public/default": {}},
            "topics": {
                "persistent://public/default/pt-zgc-partition-1": topic_body(
                    [(94, 10, 1260, T0), (146, 0, 0, None)],
                    {"test_subscription": "94:9", "taosx-test": taosx, "s1": "94:8"},
                )
            },
        }

    topic = "persistent://public/default/pt-zgc-partition-1"
    plan = plan_json(capsys, load_store(capsys, tmp_path, doc("94:3")), T0 + MINUTE)
    assert deleted_ids(plan, topic) == []
    pinned = [b for b in plan["blockers"] if b["kind"] == "slowest_subscription"]
    assert pinned[0]["bytes"] == 1260 and "'taosx-test' at mark-delete 94:3" in pinned[0]["detail"]
    # s1 at 94:8 is now the slowest and pins 94; only when every durable cursor is at 94:9 does 94 go.
    assert deleted_ids(plan_json(capsys, load_store(capsys, tmp_path, doc("94:9")), T0 + MINUTE), topic) == []
    doc_all = doc("94:9")
    doc_all["topics"][topic]["cursors"]["s1"] = {"markDeletePosition": "94:9"}
    assert deleted_ids(plan_json(capsys, load_store(capsys, tmp_path, doc_all), T0 + MINUTE), topic) == [94]


@pytest.mark.runs
@pytest.mark.parametrize("eager_rollover", [False, True])
def test_managed_ledger_retention_size_scenario(capsys, tmp_path, spark, eager_rollover):
    """ManagedLedgerTest#testRetentionSize: retention 5 MB / 1 h, one 1 MiB entry per ledger, 10 messages, all
    acknowledged -> 5 ledgers (5 MiB) remain. Before PR #22034 the full 10th ledger stayed the current one;
    since, it is closed and an empty current ledger follows, which the test counts as one more ledger."""
    ids = list(range(1, 11))
    ledgers = [(i, 1, MIB, T0 + i) for i in ids[:-1]]
    ledgers += [(10, 1, MIB, T0 + 10), (11, 0, 0, None)] if eager_rollover else [(10, 1, MIB, None)]
    doc = {
        "namespaces": {
            "ml/test": {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 5}}
        },
        "topics": {"persistent://ml/test/retention_size_ledger": topic_body(ledgers, {"c1": "10:0"})},
    }
    store = load_store(capsys, tmp_path, doc)
    topic = "persistent://ml/test/retention_size_ledger"
    assert deleted_ids(plan_json(capsys, store, T0 + MINUTE), topic) == [1, 2, 3, 4, 5]
    code, out, err = run_cli(
        capsys, "apply", "trim", "--store", store, "--as-of", iso(T0 + MINUTE), "--max-deleted-share", "1"
    )
    assert code == 0, err
    _, state, _ = run_cli(capsys, "inspect", "--store", store)
    remaining = json.loads(state)["topics"][topic]["ledgers"]
    assert len(remaining) == (6 if eager_rollover else 5)
    assert sum(ledger["size"] for ledger in remaining) <= 5 * MIB
