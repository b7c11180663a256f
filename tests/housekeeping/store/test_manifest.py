"""The manifest: validation with errors that name the object, nothing changed on error, round trip."""

from __future__ import annotations

import copy
import json

import pytest

from housekeeping.core.errors import InputError
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store
from tests.conftest import SAMPLES, topic_body, write_manifest

pytestmark = pytest.mark.unit

GOOD = {
    "broker": {"defaultRetentionTimeInMinutes": 0, "defaultRetentionSizeInMB": 0},
    "namespaces": {
        "acme/orders": {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}}
    },
    "topics": {
        "persistent://acme/orders/a": topic_body(
            [(1, 2, 20, 1000), (2, 1, 10, None)],
            {"sub": "1:1", "reader": {"markDeletePosition": "1:0", "durable": False}},
            producers=1,
            consumers=2,
            lastActive=5000,
            messages=[
                {"ledgerId": 1, "entryId": 0, "publishTime": 10, "key": "k", "value": "v1"},
                {"ledgerId": 1, "entryId": 1, "publishTime": 20, "brokerTimestamp": 25, "value": None},
                {"ledgerId": 2, "entryId": 0, "publishTime": 30, "value": "v3", "properties": {"p": "q"}},
            ],
        ),
    },
}


def test_load_inspect_round_trip(tmp_path):
    store = load_manifest(tmp_path / "s", write_manifest(tmp_path, GOOD))
    exported = export_manifest(store, with_messages=True)
    topic = exported["topics"]["persistent://acme/orders/a"]
    assert topic["ledgers"] == [
        {"ledgerId": 1, "entries": 2, "size": 20, "timestamp": 1000},
        {"ledgerId": 2, "entries": 1, "size": 10},
    ]
    assert topic["cursors"]["reader"] == {"markDeletePosition": "1:0", "durable": False}
    assert [m["value"] for m in topic["messages"]] == ["v1", None, "v3"]
    assert topic["messages"][1]["brokerTimestamp"] == 25
    assert (store.root / "ledgers/persistent/acme/orders/a/1/part-00000.parquet").is_file()
    again = load_manifest(tmp_path / "s2", write_manifest(tmp_path, exported, "exported.json"))
    second = export_manifest(again, with_messages=True)
    assert {k: v for k, v in second.items() if k != "store"} == {
        k: v for k, v in exported.items() if k != "store"
    }


def mutate(path: str, value):
    document = copy.deepcopy(GOOD)
    target = document
    keys = path.split("|")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if isinstance(target, list):
        target[int(last)] = value
    elif value is KeyError:
        del target[last]
    else:
        target[last] = value
    return document


T = "topics|persistent://acme/orders/a"
BAD = [
    (
        mutate(
            "namespaces|acme/orders|retention_policies", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 5}
        ),
        "namespace acme/orders.*single time or size limit to 0",
    ),
    (
        mutate(
            "namespaces|acme/orders|retention_policies",
            {"retentionTimeInMinutes": -3, "retentionSizeInMB": 5},
        ),
        "retentionTimeInMinutes",
    ),
    (
        mutate(
            "namespaces|acme/orders|backlog_quota_map",
            {"message_age": {"limitTime": 10, "policy": "evict_all"}},
        ),
        "evict_all",
    ),
    (
        mutate(f"{T}|cursors|sub", {"markDeletePosition": "2:5"}),
        "topic persistent://acme/orders/a cursor 'sub'.*beyond",
    ),
    (mutate(f"{T}|cursors|sub", {"markDeletePosition": "9:0"}), "beyond the topic's last entry"),
    (
        mutate(f"{T}|ledgers|1", {"ledgerId": 1, "entries": 1, "size": 10}),
        "ledger ids must be unique and increasing",
    ),
    (mutate(f"{T}|ledgers|0", {"ledgerId": 1, "entries": 2, "size": -20, "timestamp": 1000}), "minimum"),
    (
        mutate(f"{T}|ledgers|1", {"ledgerId": 2, "entries": 1, "size": 10, "timestamp": 5}),
        "current .*must have no timestamp",
    ),
    (
        mutate(f"{T}|ledgers|0", {"ledgerId": 1, "entries": 2, "size": 20}),
        "only the last .* may lack a close timestamp",
    ),
    (
        mutate(f"{T}|messages|1", {"ledgerId": 1, "entryId": 5, "publishTime": 1, "value": "x"}),
        "ledger 1: messages must be exactly entries",
    ),
    (
        mutate(f"{T}|messages|0", {"ledgerId": 7, "entryId": 0, "publishTime": 1, "value": "x"}),
        "ledger 7, which is not in its ledgers",
    ),
    (
        mutate("topics|persistent://other/ns/b", topic_body([(1, 0, 0, None)])),
        "namespace other/ns is not declared",
    ),
    (mutate("topics|persistent://acme/../b", topic_body([(1, 0, 0, None)])), "not a valid name"),
    (mutate("broker", {"backlogQuotaDefaultRetentionPolicy": "nope"}), "backlogQuotaDefaultRetentionPolicy"),
    (mutate("namespaces|acme/orders|bogus_policy", 1), "bogus_policy"),
]


@pytest.mark.parametrize("document,message", BAD)
def test_bad_manifests_are_rejected_with_a_named_error_and_change_nothing(tmp_path, document, message):
    store_root = tmp_path / "s"
    load_manifest(store_root, write_manifest(tmp_path, GOOD))
    before = export_manifest(Store.open(store_root), with_messages=True)
    files_before = sorted(p.relative_to(store_root) for p in store_root.rglob("*.parquet"))
    with pytest.raises(InputError, match=message):
        load_manifest(store_root, write_manifest(tmp_path, document, "bad.json"))
    assert export_manifest(Store.open(store_root), with_messages=True) == before
    assert sorted(p.relative_to(store_root) for p in store_root.rglob("*.parquet")) == files_before


def test_not_json_and_missing_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match="broken.json is not valid JSON"):
        load_manifest(tmp_path / "s", path)
    with pytest.raises(InputError, match="does not exist"):
        load_manifest(tmp_path / "s", tmp_path / "nope.json")


def test_reference_sample_assembles_into_a_manifest(tmp_path):
    """stats-internal from a real Pulsar 4.x broker (tests/samples) plus close times -> a loadable topic."""
    sample = json.loads((SAMPLES / "stats_internal_sample_4x.json").read_text())
    ledgers = sample["ledgers"]
    body = {
        "ledgers": [
            {
                "ledgerId": ledger["ledgerId"],
                "entries": ledger["entries"],
                "size": ledger["size"],
                **({"timestamp": 1761410000000} if i < len(ledgers) - 1 else {}),
            }
            for i, ledger in enumerate(ledgers)
        ],
        "cursors": {
            name: {"markDeletePosition": c["markDeletePosition"]} for name, c in sample["cursors"].items()
        },
    }
    document = {
        "namespaces": {"public/default": {}},
        "topics": {"persistent://public/default/pt-zgc-partition-1": body},
    }
    store = load_manifest(tmp_path / "s", write_manifest(tmp_path, document))
    assert export_manifest(store)["topics"]["persistent://public/default/pt-zgc-partition-1"]["cursors"][
        "taosx-test"
    ] == {"markDeletePosition": "94:3", "durable": True}


# A topic taken from a cluster after a compaction: ledger 1 was trimmed once compacted (its key "a" survives in the
# compacted ledger only), the horizon is the __compaction cursor at 2:1, entry 3:0 arrived after it.
C = "persistent://acme/orders/compacted"


def _m(ledger: int, entry: int, key: str | None, value: str | None, ts: int = 100) -> dict:
    return {"ledgerId": ledger, "entryId": entry, "publishTime": ts, "key": key, "value": value}


COMPACTED = copy.deepcopy(GOOD)
COMPACTED["topics"][C] = topic_body(
    [(2, 2, 4, 1000), (3, 1, 2, None)],
    {"__compaction": "2:1", "sub": "3:0"},
    messages=[_m(2, 0, "b", "b1"), _m(2, 1, "b", "b2", 200), _m(3, 0, "a", "a2", 300)],
    compactedLedger={
        "ledgerId": 90,
        "entries": 2,
        "size": 4,
        "compactedAt": 250,
        "messages": [_m(1, 0, "a", "a1", 50), _m(2, 1, "b", "b2", 200)],
    },
)


def test_a_compacted_ledger_loads_and_round_trips(tmp_path):
    from sqlalchemy import select

    from housekeeping.store import metadata_schema as t
    from housekeeping.store.store import read_transaction

    store = load_manifest(tmp_path / "s", write_manifest(tmp_path, COMPACTED))
    with read_transaction(store.engine) as conn:
        row = conn.execute(select(t.compacted_ledgers)).one()
    assert (row.topic, row.ledger_id, row.status, row.horizon_ledger, row.horizon_entry) == (
        C,
        90,
        "current",
        2,
        1,
    )
    assert (row.entries, row.size_bytes, row.min_entry_ts_ms, row.max_entry_ts_ms) == (2, 4, 50, 200)
    assert (row.tombstones, row.compacted_as_of_ms) == (0, 250)
    exported = export_manifest(store, with_messages=True)
    assert exported["topics"][C]["compactedLedger"] == COMPACTED["topics"][C]["compactedLedger"]
    assert exported["store"]["compactedLedgers"][C]["horizon"] == "2:1"
    assert "compactedLedger" not in export_manifest(store)["topics"][C]  # only loadable with its entries
    again = load_manifest(tmp_path / "s2", write_manifest(tmp_path, exported, "exported.json"))
    second = export_manifest(again, with_messages=True)
    assert {k: v for k, v in second.items() if k != "store"} == {
        k: v for k, v in exported.items() if k != "store"
    }
    # Loading over a store that has a compacted ledger replaces it too.
    replaced = load_manifest(tmp_path / "s", write_manifest(tmp_path, GOOD, "good.json"))
    assert "compactedLedgers" not in export_manifest(replaced)["store"]
    assert not (replaced.root / "ledgers/persistent/acme/orders/compacted").exists()


def compacted_mutant(path: str, value) -> dict:
    document = copy.deepcopy(COMPACTED)
    target = document["topics"][C]
    keys = path.split("|")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is KeyError:
        del target[keys[-1]]
    elif isinstance(target, list):
        target[int(keys[-1])] = value
    else:
        target[keys[-1]] = value
    return document


WHERE = f"topic {C} compactedLedger 90"
BAD_COMPACTED = [
    (compacted_mutant("cursors|__compaction", KeyError), f"{WHERE}: needs the durable __compaction cursor"),
    (
        compacted_mutant("cursors|__compaction", {"markDeletePosition": "2:1", "durable": False}),
        "needs the durable __compaction cursor",
    ),
    (compacted_mutant("compactedLedger|ledgerId", 3), "the id is one of the topic's ledgers"),
    (compacted_mutant("compactedLedger|entries", 3), "entries=3 but 2 messages are given"),
    (
        compacted_mutant("compactedLedger|messages|1", _m(3, 0, "b", "b9")),
        f"{WHERE} message 3:0: is after the compaction horizon 2:1",
    ),
    (compacted_mutant("compactedLedger|messages|0", _m(1, 0, None, "x")), "message 1:0: has no key"),
    (compacted_mutant("compactedLedger|messages|0", _m(1, 0, "b", "x")), "key 'b' appears twice"),
    (compacted_mutant("compactedLedger|messages|0", _m(2, 1, "a", "x")), "in publish order"),
    (
        compacted_mutant("compactedLedger|messages|1", _m(2, 1, "b", "changed", 200)),
        "message 2:1: differs from the raw entry at the same position in value",
    ),
    (compacted_mutant("compactedLedger|messages", KeyError), "'messages' is a required property"),
    (compacted_mutant("compactedLedger|compactedAt", 10**16), "compactedAt"),
]


@pytest.mark.parametrize("document,message", BAD_COMPACTED)
def test_bad_compacted_ledgers_are_rejected_with_a_named_error_and_change_nothing(
    tmp_path, document, message
):

    store_root = tmp_path / "s"
    load_manifest(store_root, write_manifest(tmp_path, COMPACTED))
    before = export_manifest(Store.open(store_root), with_messages=True)
    files_before = sorted(p.relative_to(store_root) for p in store_root.rglob("*.parquet"))
    with pytest.raises(InputError, match=message):
        load_manifest(store_root, write_manifest(tmp_path, document, "bad.json"))
    assert export_manifest(Store.open(store_root), with_messages=True) == before
    assert sorted(p.relative_to(store_root) for p in store_root.rglob("*.parquet")) == files_before


def test_a_keyless_compacted_entry_loads_when_the_broker_retains_null_keys(tmp_path):
    document = compacted_mutant("compactedLedger|messages|0", _m(1, 0, None, "keyless"))
    document["broker"]["topicCompactionRetainNullKey"] = True
    store = load_manifest(tmp_path / "s", write_manifest(tmp_path, document))
    messages = export_manifest(store, with_messages=True)["topics"][C]["compactedLedger"]["messages"]
    assert [m.get("key") for m in messages] == [None, "b"]
