"""Tiered storage in the manifest: `load` accepts and `inspect` writes a ledger's ``offloaded`` (as stats-internal
shows it) and its ``offloadContext``; offloaded ledgers' messages go to the object tier (and not to the local disk
once ``bookkeeperDeleted``) and come back from it; a manifest without messages loads the metadata only; bad offload
facts are refused naming the ledger, changing nothing; a tier belongs to one store."""

from __future__ import annotations

import copy
import json

import pytest

from housekeeping.core.errors import InputError
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store
from housekeeping.store.tier import parse_object_key
from tests.conftest import ledger_topic, write_manifest

pytestmark = pytest.mark.unit

TOPIC = "persistent://t/ns/a"
T0 = 1_767_225_600_000
MIN = 60_000


def manifest(with_messages: bool = True) -> dict:
    body = ledger_topic(
        [
            (1, [T0, T0 + 1], T0 + MIN),
            (2, [T0 + 2 * MIN], T0 + 3 * MIN),
            (3, [T0 + 4 * MIN], T0 + 5 * MIN),
            (4, [], None),
        ],
        {"sub": {"markDeletePosition": "1:0"}},
    )
    # 1: offloaded, local copy deleted; 2: offloaded, local copy kept; 3: an attempt that did not complete.
    body["ledgers"][0].update(
        offloaded=True,
        offloadContext={"complete": True, "timestamp": T0 + 10 * MIN, "bookkeeperDeleted": True},
    )
    body["ledgers"][1].update(offloaded=True, offloadContext={"complete": True, "timestamp": T0 + 11 * MIN})
    body["ledgers"][2].update(offloaded=False, offloadContext={"complete": False})
    if not with_messages:
        body.pop("messages")
    return {
        "namespaces": {"t/ns": {"offload_policies": {"managedLedgerOffloadThresholdInSeconds": 0}}},
        "topics": {TOPIC: body},
    }


def test_metadata_only_round_trip_keeps_the_offload_context(tmp_path):
    load_manifest(tmp_path / "s", write_manifest(tmp_path, manifest(with_messages=False)))
    exported = export_manifest(Store.open(tmp_path / "s"))
    ledgers = exported["topics"][TOPIC]["ledgers"]
    assert [(ledger.get("offloaded"), ledger.get("offloadContext")) for ledger in ledgers] == [
        (True, {"complete": True, "timestamp": T0 + 10 * MIN, "bookkeeperDeleted": True}),
        (True, {"complete": True, "timestamp": T0 + 11 * MIN, "bookkeeperDeleted": False}),
        (False, {"complete": False, "bookkeeperDeleted": False}),
        (None, None),
    ]
    assert exported["namespaces"]["t/ns"]["offload_policies"] == {"managedLedgerOffloadThresholdInSeconds": 0}
    # What inspect wrote loads again to the same thing.
    again = tmp_path / "again.json"
    again.write_text(json.dumps(exported))
    load_manifest(tmp_path / "s2", again)
    assert export_manifest(Store.open(tmp_path / "s2"))["topics"] == exported["topics"]


def test_offloaded_messages_go_to_the_tier_and_come_back(tmp_path, object_tier):
    document = manifest()
    store_root = tmp_path / "s"
    load_manifest(store_root, write_manifest(tmp_path, document))
    store = Store.open(store_root)
    objects = {parse_object_key(o.key)[1] for o in object_tier.list_objects()}
    assert objects == {1, 2}  # the completed offloads; the incomplete attempt has no object
    local = sorted(p.name for p in (store_root / "ledgers/persistent/t/ns/a").iterdir())
    assert local == ["2", "3"]  # ledger 1's local copy is deleted; 4 (current) is empty
    exported = export_manifest(store, with_messages=True)
    assert exported["topics"][TOPIC]["messages"] == document["topics"][TOPIC]["messages"]


def test_offloaded_messages_without_a_tier_are_bad_input_changing_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("HOUSEKEEPING_OFFLOAD_URL", raising=False)
    store_root = tmp_path / "s"
    load_manifest(store_root, write_manifest(tmp_path, manifest(with_messages=False)))
    before = export_manifest(Store.open(store_root))
    with pytest.raises(InputError, match=f"topic {TOPIC} ledger 1 is offloaded.*HOUSEKEEPING_OFFLOAD_URL"):
        load_manifest(store_root, write_manifest(tmp_path, manifest(), "with-messages.json"))
    assert export_manifest(Store.open(store_root)) == before


def _bad(change) -> dict:
    document = manifest(with_messages=False)
    change(document["topics"][TOPIC]["ledgers"])
    return document


BAD = [
    (_bad(lambda ls: ls[3].update(offloadContext={"complete": True})), "current .* never offloaded"),
    (_bad(lambda ls: ls[0].update(offloaded=False)), "contradicts offloadContext.complete"),
    (
        _bad(lambda ls: ls[2].update(offloadContext={"complete": False, "bookkeeperDeleted": True})),
        "needs complete=true",
    ),
    (_bad(lambda ls: ls[1]["offloadContext"].update(timestamp=T0)), "before the ledger closed"),
    (_bad(lambda ls: ls[0].pop("offloadContext")), "offloadContext is missing"),
    (_bad(lambda ls: ls[2]["offloadContext"].update(timestamp=T0 + 20 * MIN)), "not complete"),
]


@pytest.mark.parametrize("document, message", BAD)
def test_bad_offload_facts_are_refused_naming_the_ledger(tmp_path, document, message):
    store_root = tmp_path / "s"
    load_manifest(store_root, write_manifest(tmp_path, manifest(with_messages=False)))
    before = export_manifest(Store.open(store_root))
    with pytest.raises(InputError, match=message) as raised:
        load_manifest(store_root, write_manifest(tmp_path, document, "bad.json"))
    assert f"topic {TOPIC} ledger" in str(raised.value)
    assert export_manifest(Store.open(store_root)) == before


def test_a_tier_belongs_to_one_store(tmp_path, object_tier):
    load_manifest(tmp_path / "first", write_manifest(tmp_path, manifest()))
    # Loading again keeps the store's identity: the same tier is still its own.
    load_manifest(tmp_path / "first", write_manifest(tmp_path, copy.deepcopy(manifest()), "again.json"))
    with pytest.raises(InputError, match="belongs to another store"):
        load_manifest(tmp_path / "second", write_manifest(tmp_path, manifest(), "second.json"))
