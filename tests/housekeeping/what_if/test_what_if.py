"""Policy what-if (include/housekeeping/what_if/what_if.py, `housekeeping what-if`): the overlay's shape and validation,
the measures of a plan's actions and their difference (unit); and on generated stores, for every mechanism, that
the candidate plan is action for action the plan the store gets once the overlay is really loaded, and that a
what-if leaves the store as it was: every file byte for byte, the metadata row for row (runs)."""

from __future__ import annotations

import json

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.topic_ledgers import Ledger, TopicLedgers
from housekeeping.engine.actions import Effect
from housekeeping.what_if.overlay import PolicyOverlay
from housekeeping.what_if.what_if import difference
from tests.conftest import run_cli, write_manifest
from tests.store_invariants import store_contents

AS_OF = "2026-11-01T00:00:00Z"
COMPACT = "persistent://globex/tables/t-00006"

# Per mechanism, a change that alters its plan on the generated store (GenerateOptions(28, seed 7)); gc's stops
# deleting the inactive topics of public/default, the others act on more.
OVERLAYS = {
    "trim": {
        "namespaces": {
            "acme/orders": {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}}
        }
    },
    "expiry": {"namespaces": {"acme/orders": {"message_ttl_in_seconds": 60}}},
    "backlog": {
        "namespaces": {
            "acme/metrics": {
                "backlog_quota_map": {
                    "destination_storage": {
                        "limitSize": 1024,
                        "limitTime": -1,
                        "policy": "consumer_backlog_eviction",
                    }
                }
            }
        }
    },
    "gc": {
        "namespaces": {
            "public/default": {
                "inactive_topic_policies": {
                    "deleteWhileInactive": False,
                    "inactiveTopicDeleteMode": "delete_when_no_subscriptions",
                    "maxInactiveDurationSeconds": 60,
                }
            }
        }
    },
    "compaction": {
        "namespaces": {
            "globex/tables": {"compacted_retention": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}}
        }
    },
}


# --- the overlay's shape (unit) ----------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("document", "named"),
    [
        ([], "JSON object"),
        ({"policies": {}}, "unknown overlay key(s) ['policies']"),
        ({"broker": {"defaultRetentionTimeInMinuts": 5}}, "'defaultRetentionTimeInMinuts'"),
        ({"namespaces": {"acme/orders": 5}}, "namespace acme/orders"),
        ({"topics": {"persistent://acme/orders/t": {"ledgers": []}}}, "topic persistent://acme/orders/t"),
    ],
)
def test_a_malformed_overlay_is_refused_naming_what_is_wrong(document, named):
    with pytest.raises(InputError) as refused:
        PolicyOverlay.from_document(document, "overlay.json")
    assert named in str(refused.value) and "overlay.json" in str(refused.value)


@pytest.mark.unit
def test_an_overlay_replaces_the_policies_it_names_and_null_removes_one():
    overlay = PolicyOverlay.from_document(
        {"namespaces": {"acme/orders": {"message_ttl_in_seconds": 60, "retention_policies": None}}}, "o"
    )
    stored = {"message_ttl_in_seconds": 86400, "retention_policies": {"retentionTimeInMinutes": 5}, "x": 1}
    assert overlay.namespace_policies("acme/orders", stored) == {"message_ttl_in_seconds": 60, "x": 1}
    assert overlay.namespace_policies("acme/audit", stored) == stored
    manifest = {"broker": {}, "namespaces": {"acme/orders": stored}, "topics": {}}
    assert overlay.applied_to(manifest)["namespaces"]["acme/orders"] == {"message_ttl_in_seconds": 60, "x": 1}
    assert manifest["namespaces"]["acme/orders"] is stored and "retention_policies" in stored  # not mutated
    with pytest.raises(InputError, match="namespace acme/nope does not exist"):
        PolicyOverlay.from_document({"namespaces": {"acme/nope": {}}}, "o").applied_to(manifest)
    with pytest.raises(InputError, match="topic persistent://acme/orders/x does not exist"):
        PolicyOverlay.from_document(
            {"topics": {"persistent://acme/orders/x": {"policies": {}}}}, "o"
        ).applied_to(manifest)


@pytest.mark.unit
def test_entries_between_two_mark_delete_positions():
    ledgers = TopicLedgers([Ledger(i, n, 10 * n, None) for i, n in [(1, 10), (2, 0), (3, 5), (4, 7)]])
    assert ledgers.entries_between((1, 4), (1, 9)) == 5  # (1:4, 1:9]
    assert ledgers.entries_between((1, -1), (3, 2)) == 10 + 3
    assert ledgers.entries_between((1, 9), (4, 6)) == 5 + 7
    assert ledgers.entries_between((3, 4), (3, 4)) == 0


@pytest.mark.unit
def test_difference_counts_actions_one_plan_has_whole_and_shared_ones_by_their_change():
    def effect(ns, key, **measures):
        return Effect(ns, key, **measures)

    current = {
        ("delete_ledger", "t1", 1): effect(
            "a/x", ("delete_ledger", "t1", 1), ledgers=1, bytes=100, entries=10
        ),
        ("move_cursor", "t2", "s"): effect("b/y", ("move_cursor", "t2", "s"), cursors=1, entries=5),
    }
    candidate = {
        ("delete_ledger", "t1", 2): effect("a/x", ("delete_ledger", "t1", 2), ledgers=1, bytes=40, entries=4),
        ("move_cursor", "t2", "s"): effect("b/y", ("move_cursor", "t2", "s"), cursors=1, entries=8),
    }
    found = difference(current, candidate)
    assert found["perNamespace"]["a/x"]["ledgers"] == {"added": 1, "removed": 1}
    assert found["perNamespace"]["a/x"]["bytes"] == {"added": 40, "removed": 100}
    assert found["perNamespace"]["b/y"]["cursors"] == {"added": 0, "removed": 0}  # the same cursor moves
    assert found["perNamespace"]["b/y"]["entries"] == {"added": 3, "removed": 0}  # ... 3 entries further
    assert found["total"]["entries"] == {"added": 7, "removed": 10}


# --- on generated stores (runs) ----------------------------------------------------------------------------


def _canonical(actions: list[dict]) -> list[str]:
    return sorted(json.dumps(a, sort_keys=True) for a in actions)


@pytest.mark.spark
@pytest.mark.runs
@pytest.mark.parametrize("mechanism", list(OVERLAYS))
def test_the_candidate_plan_is_the_plan_after_the_change_and_the_store_is_untouched(
    mechanism, spark, tmp_path, capsys
):
    from housekeeping.store.generate import GenerateOptions, generate_store
    from housekeeping.store.manifest.export import export_manifest
    from housekeeping.store.manifest.load import load_manifest

    store = generate_store(tmp_path / "store", GenerateOptions(topics=28, seed=7, entries_per_ledger=60))
    overlay_file = write_manifest(tmp_path, OVERLAYS[mechanism], "overlay.json")
    before = store_contents(store.root)
    compact = ["--compact-topic", COMPACT] if mechanism == "compaction" else []

    code, out, err = run_cli(
        capsys, "what-if", mechanism, "--store", str(store.root), "--as-of", AS_OF,
        "--policies", str(overlay_file), "--format", "json", *compact,
    )  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    assert store_contents(store.root) == before, "a what-if changed the store"
    candidate, current = document["candidate"], document["current"]
    assert _canonical(candidate["actions"]) != _canonical(current["actions"]), "the overlay changes this plan"

    # The change made for real: the store's state with the overlay in place, loaded as a store of its own.
    changed = PolicyOverlay.read(overlay_file).applied_to(export_manifest(store, with_messages=True))
    changed.pop("store", None)
    load_manifest(tmp_path / "changed", write_manifest(tmp_path, changed, "changed.json"))
    code, out, err = run_cli(
        capsys, "plan", mechanism, "--store", str(tmp_path / "changed"), "--as-of", AS_OF, "--format", "json",
        *compact,
    )  # fmt: skip
    assert code == 0, err
    real = json.loads(out)
    assert _canonical(candidate["actions"]) == _canonical(real["actions"])
    assert _canonical(candidate["blockers"]) == _canonical(real["blockers"])
    assert candidate["gate"] == real["gate"], "the gate's verdict on the change is the verdict it would give"

    # The plan as it stands is what `plan` prints on the unchanged store (the same code path for every
    # mechanism: checked on one, to keep the suite's time).
    if mechanism == "trim":
        code, out, err = run_cli(
            capsys, "plan", mechanism, "--store", str(store.root), "--as-of", AS_OF, "--format", "json"
        )
        assert _canonical(current["actions"]) == _canonical(json.loads(out)["actions"])
        assert current["gate"] == json.loads(out)["gate"]
    added = document["difference"]["total"]
    assert any(added[m]["added"] or added[m]["removed"] for m in added), document["difference"]


@pytest.mark.unit
def test_a_bad_overlay_exits_2_naming_the_namespace_and_changes_nothing(tmp_path, capsys):
    from housekeeping.store.generate import GenerateOptions, generate_store

    store = generate_store(tmp_path / "store", GenerateOptions(topics=8, seed=7, entries_per_ledger=10))
    before = store_contents(store.root)
    bad = {"namespaces": {"acme/orders": {"retention_policies": {"retentionTimeInMinutes": "soon"}}}}
    code, _, err = run_cli(
        capsys, "what-if", "trim", "--store", str(store.root), "--as-of", AS_OF,
        "--policies", str(write_manifest(tmp_path, bad, "bad.json")),
    )  # fmt: skip
    assert code == 2 and "acme/orders" in err, err
    assert store_contents(store.root) == before


@pytest.mark.unit
def test_an_overlay_is_checked_across_the_levels_it_touches(tmp_path):
    """A topic's backlog quota must stay below the retention in force at the topic, which an overlay of the
    namespace changes: refused naming the topic (the policies-only check still resolves every level)."""
    from housekeeping.store.generate import GenerateOptions, generate_store

    store = generate_store(tmp_path / "store", GenerateOptions(topics=8, seed=7, entries_per_ledger=10))
    topic = "persistent://acme/orders/t-00002"
    quota = {"destination_storage": {"limitSize": 3 * 2**20, "limitTime": -1, "policy": "producer_exception"}}
    PolicyOverlay(topics={topic: {"backlog_quota_map": quota}}).validate_against(store)  # retention size -1
    too_small = {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 2}}
    with pytest.raises(InputError) as refused:
        PolicyOverlay(
            namespaces={"acme/orders": too_small}, topics={topic: {"backlog_quota_map": quota}}
        ).validate_against(store)
    assert f"topic {topic}" in str(refused.value) and "retention size" in str(refused.value)
