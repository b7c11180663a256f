"""Ledger offload through the `housekeeping` CLI (load -> plan/apply offload -> inspect), on a directory tier and on a
real S3 API server: what Pulsar's OffloadPrefixTest pins (thresholds, the current ledger never), the upload read
back whole and recorded complete at the run's logical time, a second run offloading nothing, no offloader, a hold,
and the local copy left in place (only trim's offload-deletion lag removes it)."""

from __future__ import annotations

import pytest

from housekeeping.store.tier import object_key, parse_object_key
from tests.conftest import cli_json, iso, ledger_topic, load_store, run_cli

pytestmark = [pytest.mark.spark, pytest.mark.runs]

T0 = 1_767_225_600_000
MIN = 60_000
TOPIC = "persistent://t/ns/a"
AS_OF = T0 + 24 * 60 * MIN


def manifest(policies: dict, ledgers: int = 5) -> dict:
    """``ledgers`` ledgers of 10 entries of 10 bytes, closed a minute apart; the last is current (5 entries)."""
    stamps = [T0 + i for i in range(10)]
    spec = [(i, stamps, T0 + i * MIN) for i in range(1, ledgers)] + [(ledgers, stamps[:5], None)]
    return {
        "namespaces": {"t/ns": {"offload_policies": policies}},
        "topics": {TOPIC: ledger_topic(spec, {"sub": {"markDeletePosition": "1:0"}})},
    }


def ledgers(capsys, store: str) -> dict[int, dict]:
    state = cli_json(capsys, "inspect", "--store", store)
    return {ledger["ledgerId"]: ledger for ledger in state["topics"][TOPIC]["ledgers"]}


@pytest.mark.usefixtures("directory_tier")
@pytest.mark.parametrize(
    "policies, expected",
    [
        ({"managedLedgerOffloadThresholdInBytes": 100}, [1, 2, 3]),
        ({"managedLedgerOffloadThresholdInSeconds": 0}, [1, 2, 3, 4]),
        ({"managedLedgerOffloadThresholdInBytes": -1, "managedLedgerOffloadThresholdInSeconds": -1}, []),
    ],
)
def test_the_plan_follows_pulsars_thresholds(capsys, tmp_path, policies, expected):
    """OffloadPrefixTest#multipleAutoTriggers: five ledgers, L5 current."""
    store = load_store(capsys, tmp_path, manifest(policies))
    plan = cli_json(capsys, "plan", "offload", "--store", store, "--as-of", iso(AS_OF), "--format", "json")
    assert sorted(a["ledgerId"] for a in plan["actions"]) == expected
    assert plan["gate"]["success"] and plan["summary"]["ledgersToOffload"] == len(expected)


def test_apply_uploads_reads_back_and_records_complete_then_nothing_is_left(capsys, tmp_path, object_tier):
    document = manifest({"managedLedgerOffloadThresholdInBytes": 100})
    store = load_store(capsys, tmp_path, document)
    result = cli_json(capsys, "apply", "offload", "--store", store, "--as-of", iso(AS_OF))
    assert (result["ledgersOffloaded"], result["bytesOffloaded"]) == (3, 300)
    after = ledgers(capsys, store)
    for ledger_id in (1, 2, 3):
        assert after[ledger_id]["offloaded"] is True
        assert after[ledger_id]["offloadContext"] == {
            "complete": True,
            "timestamp": AS_OF,
            "bookkeeperDeleted": False,
        }
    assert "offloadContext" not in after[4] and "offloadContext" not in after[5]
    # One object per ledger, named by its attempt; every local copy still there (only trim's lag deletes them).
    objects = sorted(parse_object_key(o.key)[1] for o in object_tier.list_objects())
    assert objects == [1, 2, 3]
    assert sorted(p.name for p in (tmp_path / "store/ledgers/persistent/t/ns/a").iterdir()) == [
        "1",
        "2",
        "3",
        "4",
        "5",
    ]
    # The objects hold the ledgers' entries exactly.
    exported = cli_json(capsys, "inspect", "--store", store, "--messages")
    first = [m for m in exported["topics"][TOPIC]["messages"] if m["ledgerId"] == 1]
    uuid = next(
        parse_object_key(o.key)[2] for o in object_tier.list_objects() if parse_object_key(o.key)[1] == 1
    )
    from_tier = object_tier.read_ledger(object_key(TOPIC, 1, uuid)).to_pylist()
    assert [(r["entryId"], r["publishTime"], r["value"].decode()) for r in from_tier] == [
        (m["entryId"], m["publishTime"], m["value"]) for m in first
    ]
    # A second run finds nothing to do.
    again = cli_json(
        capsys, "plan", "offload", "--store", store, "--as-of", iso(AS_OF + MIN), "--format", "json"
    )
    assert again["actions"] == []


def test_without_a_tier_nothing_is_offloaded_and_the_report_says_why(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("HOUSEKEEPING_OFFLOAD_URL", raising=False)
    store = load_store(capsys, tmp_path, manifest({"managedLedgerOffloadThresholdInSeconds": 0}))
    result = cli_json(capsys, "apply", "offload", "--store", store, "--as-of", iso(AS_OF))
    assert result["ledgersOffloaded"] == 0
    report = (tmp_path / "store" / "runs" / "offload").glob("*/report/report.md")
    text = next(report).read_text()
    assert "Nothing is offloaded" in text and "HOUSEKEEPING_OFFLOAD_URL" in text
    assert all("offloadContext" not in ledger for ledger in ledgers(capsys, store).values())


@pytest.mark.usefixtures("object_tier")
def test_a_hold_does_not_stop_an_offload_it_only_copies(capsys, tmp_path):
    store = load_store(capsys, tmp_path, manifest({"managedLedgerOffloadThresholdInSeconds": 0}))
    code, _, err = run_cli(capsys, "hold", "add", "t/ns", "--store", store, "--reason", "legal")
    assert code == 0, err
    result = cli_json(capsys, "apply", "offload", "--store", store, "--as-of", iso(AS_OF))
    assert result["ledgersOffloaded"] == 4
