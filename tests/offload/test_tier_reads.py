"""Every reader through the tier: a topic whose older ledgers exist only in the object tier (offloaded, local copy
deleted) is compacted, expired and exported exactly as the same topic kept on the local disk. The Spark apps read
those ledgers from the tier with pyarrow (mapInArrow; no s3a), on a directory tier and on a real S3 API server."""

from __future__ import annotations

import json

import pytest

from tests.conftest import iso, run_cli, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

T0 = 1_767_225_600_000
MIN = 60_000
TOPIC = "persistent://t/ns/keyed"
AS_OF = T0 + 3 * 24 * 60 * MIN


def manifest(tiered: bool) -> dict:
    """Four ledgers of keyed entries (8 keys, a tombstone), L4 current; with ``tiered`` L1 and L2 are offloaded:
    L1's local copy is deleted (it is only in the tier), L2's kept. TTL 1 day, a compaction threshold of 1 byte."""
    messages, ledgers = [], []
    for ledger_id in range(1, 5):
        count = 12 if ledger_id < 4 else 4
        for entry_id in range(count):
            n = (ledger_id - 1) * 12 + entry_id
            messages.append(
                {
                    "ledgerId": ledger_id,
                    "entryId": entry_id,
                    "publishTime": T0 + n * MIN,
                    "key": f"k{n % 8}",
                    "value": "" if n == 37 else f"value-{n}",  # k5's last entry: a tombstone
                }
            )
        size = sum(len(m["value"]) for m in messages if m["ledgerId"] == ledger_id)
        ledger = {"ledgerId": ledger_id, "entries": count, "size": size}
        if ledger_id < 4:
            ledger["timestamp"] = T0 + (ledger_id * 12) * MIN
        if tiered and ledger_id < 3:
            ledger["offloadContext"] = {
                "complete": True,
                "timestamp": T0 + 60 * MIN,
                "bookkeeperDeleted": ledger_id == 1,
            }
        ledgers.append(ledger)
    return {
        "namespaces": {"t/ns": {"message_ttl_in_seconds": 86400, "compaction_threshold": 1}},
        "topics": {
            TOPIC: {
                "ledgers": ledgers,
                "cursors": {
                    "sub": {"markDeletePosition": "1:0"},
                    "__compaction": {"markDeletePosition": "1:-1"},
                },
                "messages": messages,
            }
        },
    }


def ok(capsys, *argv) -> dict:
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    return json.loads(out)


def store_of(capsys, tmp_path, name: str, tiered: bool) -> str:
    store = str(tmp_path / name)
    ok_load = run_cli(
        capsys,
        "load",
        "--store",
        store,
        "--manifest",
        str(write_manifest(tmp_path, manifest(tiered), f"{name}.json")),
    )
    assert ok_load[0] == 0, ok_load[2]
    return store


def plan(capsys, store: str, mechanism: str) -> dict:
    document = ok(capsys, "plan", mechanism, "--store", store, "--as-of", iso(AS_OF), "--format", "json")
    assert document["gate"]["success"], document["gate"]
    document.pop("runId")
    return document


def test_tier_only_ledgers_are_read_as_local_ones(capsys, tmp_path, object_tier):
    local = store_of(capsys, tmp_path, "local", tiered=False)
    tiered = store_of(capsys, tmp_path, "tiered", tiered=True)
    assert sorted(p.name for p in (tmp_path / "tiered/ledgers/persistent/t/ns/keyed").iterdir()) == [
        "2",
        "3",
        "4",
    ]
    # Expiry reads publish times of the ledgers the cursor's backlog straddles (L1 and L2: in the tier).
    local_expiry = plan(capsys, local, "expiry")
    assert plan(capsys, tiered, "expiry") == local_expiry
    assert local_expiry["actions"], "expiry has something to do here"
    # Compaction reads every raw entry: its plan and the compacted view it writes are the same.
    assert plan(capsys, tiered, "compaction") == plan(capsys, local, "compaction")
    for store in (local, tiered):
        ok(capsys, "apply", "compaction", "--store", store, "--as-of", iso(AS_OF))
    views = [
        ok(capsys, "inspect", "--store", s, "--messages")["topics"][TOPIC]["compactedLedger"]
        for s in (local, tiered)
    ]
    assert views[0]["messages"] == views[1]["messages"] and views[0]["entries"] == 8 - 1  # k5's tombstone
    # inspect --messages reads the raw ledgers from the tier too.
    raw = [
        ok(capsys, "inspect", "--store", s, "--messages")["topics"][TOPIC]["messages"]
        for s in (local, tiered)
    ]
    assert raw[0] == raw[1]


@pytest.mark.processes
def test_key_erasure_reaches_the_tier_and_equals_the_local_store(capsys, tmp_path, s3_tier):
    """L1 only in the tier, L2 offloaded and local: after the erasure and its purge no local file and no object
    holds the key, the offloaded ledgers are offloaded still (new attempts, read from the tier), and every entry
    equals the same erasure on the local store; the proof scanned the tier too."""
    import hashlib

    from housekeeping.store.store import Store
    from housekeeping.store.tier import parse_object_key
    from tests.store_invariants import assert_no_orphans_and_no_dangling_metadata, files_holding

    key = "k3"
    digest = hashlib.sha256(key.encode()).hexdigest()
    stores = {
        "local": store_of(capsys, tmp_path, "local", tiered=False),
        "tiered": store_of(capsys, tmp_path, "tiered", tiered=True),
    }
    for name, store in stores.items():
        ok(
            capsys,
            "erase",
            "request",
            key,
            "--store",
            store,
            "--topic",
            TOPIC,
            "--reason",
            "test",
            "--requested-at",
            iso(AS_OF - MIN),
        )
        result = ok(capsys, "apply", "erasure", "--store", store, "--as-of", iso(AS_OF))
        assert result["ledgersRewritten"] >= 3, (name, result)
        ok(capsys, "purge", "--store", store, "--as-of", iso(AS_OF + 10 * 24 * 60 * MIN))
        assert files_holding(tmp_path / name / "ledgers", key) == []
    tiered = Store.open(stores["tiered"])
    holding = [
        o.key
        for o in s3_tier.list_objects()
        if key in str(s3_tier.read_ledger(o.key).column("key").to_pylist())
    ]
    assert holding == []
    assert {parse_object_key(o.key)[1] for o in s3_tier.list_objects()} == {1, 2}  # the new attempts only
    assert_no_orphans_and_no_dangling_metadata(tiered)
    exported = {
        n: ok(capsys, "inspect", "--store", s, "--messages")["topics"][TOPIC] for n, s in stores.items()
    }
    assert exported["tiered"]["messages"] == exported["local"]["messages"]
    assert [
        ledger.get("offloadContext", {}).get("bookkeeperDeleted")
        for ledger in exported["tiered"]["ledgers"][:2]
    ] == [True, False]  # L1 still only in the tier, L2 rewritten in both
    # The next run's proof finds the key nowhere: local files and tier objects alike.
    ok(capsys, "apply", "erasure", "--store", stores["tiered"], "--as-of", iso(AS_OF + 11 * 24 * 60 * MIN))
    (request,) = ok(capsys, "erase", "list", "--store", stores["tiered"], "--format", "json")["requests"]
    assert request["state"] == "done" and request["keyDigest"] == digest
    proof = json.loads(open(request["detail"]).read())
    assert proof["finalScan"]["filesScanned"] >= 4  # the local ledgers and the tier's objects
