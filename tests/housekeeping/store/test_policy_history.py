"""The policy history from the journal (docs/semantics.md §12.4): a load records the policies it loads as of its
time, every admin change the level's whole policies before and after; the history answers what was in force at any
time, equal to what the store had then."""

from __future__ import annotations

import json

import pytest

from housekeeping.store import admin
from housekeeping.store.policy_history import read_policy_history
from housekeeping.store.store import Store
from tests.conftest import cli_json, run_cli, topic_body, write_manifest

pytestmark = pytest.mark.unit

T0 = 1_790_000_000_000
HOUR = 3_600_000
RETAIN_DAY = {"retentionTimeInMinutes": 1440, "retentionSizeInMB": -1}
TOPIC = "persistent://t/ns/a"


def _load(capsys, tmp_path, policies: dict, at: str | None = "2026-09-21T00:00:00Z") -> Store:
    document = {
        "namespaces": {"t/ns": policies, "t/other": {}},
        "topics": {TOPIC: topic_body([(1, 10, 100, T0), (2, 0, 0, None)], {"sub": "1:-1"})},
    }
    args = ["load", "--store", str(tmp_path / "store"), "--manifest", str(write_manifest(tmp_path, document))]
    code, _, err = run_cli(capsys, *args, *(["--at", at] if at else []))
    assert code == 0, err
    return Store.open(tmp_path / "store")


def test_the_history_answers_what_was_in_force_at_each_time(capsys, tmp_path):
    store = _load(capsys, tmp_path, {"retention_policies": RETAIN_DAY})
    loaded = 1_789_948_800_000  # 2026-09-21T00:00:00Z
    in_force = {loaded: admin.policies_of(store, "t/ns")["policies"]}
    steps = [
        ("t/ns", {"message_ttl_in_seconds": 3600}),
        (TOPIC, {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}}),
        ("t/ns", {"retention_policies": None}),
        (TOPIC, {"retention_policies": None, "message_ttl_in_seconds": 60}),
    ]
    seen: dict[str, dict[int, dict]] = {"t/ns": {loaded: in_force[loaded]}, TOPIC: {loaded: {}}}
    for k, (target, changes) in enumerate(steps, start=1):
        at = loaded + k * HOUR
        admin.set_policies(store, target, changes, now_ms=at, actor="op")
        seen[target][at] = admin.policies_of(store, target)["policies"]
    history = read_policy_history(store)
    assert history.begins_ms == loaded
    for target, states in seen.items():
        times = sorted(states)
        for i, at in enumerate(times):
            until = times[i + 1] if i + 1 < len(times) else at + 10 * HOUR
            for moment in (at, (at + until) // 2, until - 1):
                assert history.at(target, moment) == states[at], (target, moment)
    # Before the first record, the first record's: the history cannot know older ones.
    assert history.at("t/ns", loaded - 10 * HOUR) == {"retention_policies": RETAIN_DAY}
    assert history.at("nobody/here", loaded) == {}
    # Up to a time: the changes after it are not read.
    early = read_policy_history(store, until_ms=loaded + HOUR)
    assert early.at("t/ns", loaded + 5 * HOUR) == {
        "message_ttl_in_seconds": 3600,
        "retention_policies": RETAIN_DAY,
    }


def test_a_load_records_its_policies_and_a_new_load_starts_the_history_again(capsys, tmp_path):
    store = _load(capsys, tmp_path, {"retention_policies": RETAIN_DAY})
    (row,) = cli_json(
        capsys, "journal", "--store", str(store.root), "--mechanism", "load", "--format", "json"
    )["entries"]
    assert (row["action"], row["asOf"]) == ("load-policies", "2026-09-21T00:00:00.000Z")
    assert row["detail"]["namespaces"]["t/ns"] == {"retention_policies": RETAIN_DAY}
    admin.set_policies(store, "t/ns", {"message_ttl_in_seconds": 60}, now_ms=T0 + HOUR)
    store = _load(capsys, tmp_path, {}, at="2026-10-01T00:00:00Z")
    history = read_policy_history(store)
    assert history.begins_ms == 1_790_812_800_000  # 2026-10-01
    assert history.at("t/ns", T0 + 2 * HOUR) == {}


def test_a_store_no_load_recorded_begins_at_its_first_change(tmp_path):
    from housekeeping.store.generate import GenerateOptions, generate_store

    store = generate_store(tmp_path / "store", GenerateOptions(topics=4, seed=3, entries_per_ledger=5))
    assert read_policy_history(store).begins_ms is None
    before = admin.policies_of(store, "acme/orders")["policies"]
    admin.set_policies(store, "acme/orders", {"message_ttl_in_seconds": 120}, now_ms=T0)
    history = read_policy_history(store)
    assert history.begins_ms == T0
    assert history.at("acme/orders", T0 - 1) == before
    assert history.at("acme/orders", T0) == {**before, "message_ttl_in_seconds": 120}


def test_a_bad_load_time_is_named_and_loads_nothing(capsys, tmp_path):
    document = {"namespaces": {"t/ns": {}}, "topics": {}}
    args = ["load", "--store", str(tmp_path / "store"), "--manifest", str(write_manifest(tmp_path, document))]
    code, _, err = run_cli(capsys, *args, "--at", "yesterday")
    assert code == 2 and "--at" in err and "yesterday" in err
    assert not (tmp_path / "store" / "metadata.db").exists()
    assert json.dumps(document)  # the manifest itself was valid
