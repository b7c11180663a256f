"""Operating tiered storage: `housekeeping metrics` has Pulsar's pulsar_storage_offloaded_size and the bytes by tier
per namespace, and the storage report splits the stored bytes by tier and counts deleted local copies apart from
deleted data (include/housekeeping/observe/metrics/storage.py, include/housekeeping/observe/storage_report.py)."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import iso, ledger_topic, run_cli, write_manifest

T0 = 1_767_225_600_000
MIN = 60_000


def manifest() -> dict:
    """t/tiered: L1 only in the tier (100 B), L2 offloaded with its local copy kept (100 B), L3 an offload that
    did not complete (100 B), L4 current (40 B). t/local: nothing offloaded (20 B). Lag 10 min."""
    stamps = [T0 + i for i in range(10)]
    tiered = ledger_topic(
        [(1, stamps, T0 + MIN), (2, stamps, T0 + 2 * MIN), (3, stamps, T0 + 3 * MIN), (4, stamps[:4], None)],
        {"sub": {"markDeletePosition": "1:0"}},
    )
    contexts = {
        1: {"complete": True, "timestamp": T0 + 5 * MIN, "bookkeeperDeleted": True},
        2: {"complete": True, "timestamp": T0 + 5 * MIN},
        3: {"complete": False},
    }
    for ledger in tiered["ledgers"]:
        if ledger["ledgerId"] in contexts:
            ledger["offloadContext"] = contexts[ledger["ledgerId"]]
    local = ledger_topic([(1, stamps[:2], None)], {"sub": {"markDeletePosition": "1:-1"}})
    return {
        "namespaces": {
            "t/tiered": {"offload_policies": {"managedLedgerOffloadDeletionLagInMillis": 10 * MIN}},
            "t/local": {},
        },
        "topics": {"persistent://t/tiered/a": tiered, "persistent://t/local/b": local},
    }


def samples(text: str, name: str) -> dict[tuple, float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


@pytest.mark.spark
@pytest.mark.runs
def test_metrics_and_the_storage_report_split_bytes_by_tier(capsys, tmp_path, object_tier):
    from housekeeping.observe.storage_report import write_storage_report
    from housekeeping.store.store import Store

    store = str(tmp_path / "store")
    code, _, err = run_cli(
        capsys, "load", "--store", store, "--manifest", str(write_manifest(tmp_path, manifest()))
    )
    assert code == 0, err
    as_of = T0 + 60 * MIN
    code, text, err = run_cli(capsys, "metrics", "--store", store, "--as-of", iso(as_of))
    assert code == 0, err
    assert samples(text, "pulsar_storage_offloaded_size") == {
        (("namespace", "t/local"),): 0.0,
        (("namespace", "t/tiered"),): 200.0,  # L1 and L2: complete, whatever their local copy
    }
    assert samples(text, "housekeeping_storage_tier_size") == {
        (("namespace", "t/local"), ("tier", "local")): 20.0,
        (("namespace", "t/local"), ("tier", "offloaded")): 0.0,
        (("namespace", "t/tiered"), ("tier", "local")): 240.0,  # L2, L3, L4
        (("namespace", "t/tiered"), ("tier", "offloaded")): 200.0,
    }
    assert samples(text, "pulsar_storage_size")[(("namespace", "t/tiered"),)] == 340.0  # offloaded ones count

    # Trim lets L2's local copy go (offloaded 55 min ago > 10 min); the report counts it apart.
    code, out, err = run_cli(capsys, "apply", "trim", "--store", store, "--as-of", iso(as_of))
    assert code == 0, err
    assert json.loads(out)["localCopiesDeleted"] == 1
    page = write_storage_report(Store.open(store), as_of)
    data = json.loads((page.parent / "report.json").read_text())
    assert data["storedBytesByTier"] == {
        "t/local": {"localOnly": 20, "both": 0, "tierOnly": 0},
        "t/tiered": {"localOnly": 140, "both": 0, "tierOnly": 200},
    }
    assert data["localCopiesReclaimed"] == {"purged": 0, "pending": 100}
    assert "trim" not in data["reclaimed"], "a local copy is not data deleted"
    html = page.read_text()
    assert 'id="tiers"' in html and "only in the object tier" in html and 'id="local-copies"' in html
    code, text, err = run_cli(capsys, "metrics", "--store", store, "--as-of", iso(as_of))
    assert (
        samples(text, "housekeeping_storage_tier_size")[(("namespace", "t/tiered"), ("tier", "local"))]
        == 140.0
    )
