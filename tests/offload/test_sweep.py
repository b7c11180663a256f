"""What-if sweeps of the offload policies (include/housekeeping/what_if/sweep.py, `what-if offload --sweep
offload-threshold=...`, `what-if trim --sweep offload-deletion-lag=...`): the overlay each value is (unit), and on a
generated store with a directory tier, every point equals that value's plan made on its own, measured by this test
from the plan's actions and the snapshot (runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from housekeeping.core.policies import BrokerConfig
from housekeeping.what_if.overlay import PolicyOverlay
from housekeeping.what_if.sweep import KNOBS, Sweep, knob_mechanism, point_overlays
from tests.conftest import run_cli

OFFLOADED_AT = "2026-11-01T00:00:00Z"
LAG_AS_OF = "2026-11-01T06:00:00Z"  # 6 h after the offload: 0 and 4 h let the local copies go, 1 d and -1 not


@pytest.mark.unit
def test_the_offload_knobs_read_as_pulsar_admin_and_belong_to_offload_and_trim():
    assert Sweep.parse("offload-threshold=0,1G,-1").values == (0, 2**30, -1)
    assert Sweep.parse("offload-deletion-lag=0,4h,-1").values == (0, 14_400_000, -1)
    assert knob_mechanism("offload-threshold") == "offload"
    assert knob_mechanism("offload-deletion-lag") == "trim"
    assert KNOBS["offload-deletion-lag"].measures == ("localBytesFreed", "localBytesLeft")


@pytest.mark.unit
def test_a_point_sets_one_offload_field_keeping_the_namespaces_other_offload_fields():
    stored = {
        "a/own": {
            "offload_policies": {
                "managedLedgerOffloadThresholdInSeconds": 60,
                "managedLedgerOffloadDriver": "S3",
            },
            "offload_deletion_lag_ms": 1000,  # legacy: the new field set by the sweep wins over it
        },
        "a/none": {},
    }
    (point,) = point_overlays(
        Sweep.parse("offload-deletion-lag=1h"), PolicyOverlay(), stored, BrokerConfig.from_layers()
    )
    assert point.namespaces == {
        "a/own": {
            "offload_policies": {
                "managedLedgerOffloadThresholdInSeconds": 60,
                "managedLedgerOffloadDriver": "S3",
                "managedLedgerOffloadDeletionLagInMillis": 3_600_000,
            }
        },
        "a/none": {"offload_policies": {"managedLedgerOffloadDeletionLagInMillis": 3_600_000}},
    }


def _overlay(manifest: dict, field: str, value: int) -> PolicyOverlay:
    """The overlay an operator would write by hand for one value (the test's own reading of the rule)."""
    return PolicyOverlay(
        namespaces={
            name: {"offload_policies": {**(stored.get("offload_policies") or {}), field: value}}
            for name, stored in manifest["namespaces"].items()
        }
    )


def _plan_alone(store, mechanism: str, overlay: PolicyOverlay, as_of: str, run_dir: Path) -> dict:
    """That value's plan on its own, measured from its actions and its snapshot's ledgers."""
    from housekeeping.core.timeutil import parse_as_of
    from housekeeping.engine import launcher
    from housekeeping.engine.actions import namespace_of
    from housekeeping.engine.contract import LEDGERS, TOPICS
    from housekeeping.engine.plan import read_table
    from housekeeping.engine.snapshot_reads import read_snapshot_table
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.mechanisms.steps import snapshot_step

    snapshot_step(
        store, mechanism, run_id="alone", as_of_ms=parse_as_of(as_of), run_dir=run_dir, policy_overlay=overlay
    )
    launcher.plan_in_process(launcher.local_spark("local[2]"), run_dir, get_mechanism(mechanism))
    ledgers = {(r["topic"], r["ledgerId"]): r for r in read_snapshot_table(run_dir, LEDGERS)}
    topics = {r["topic"]: r for r in read_snapshot_table(run_dir, TOPICS)}
    actions = {
        (a["action"], a["topic"], a["ledgerId"])
        for a in read_table(run_dir, "actions")
        if a.get("ledgerId") is not None
    }
    measured: dict[str, dict[str, int]] = {}
    for (topic, ledger_id), ledger in ledgers.items():
        namespace = namespace_of(topic)
        size, local = ledger["size"], not ledger["localDeleted"]
        if mechanism == "offload":
            m = measured.setdefault(
                namespace, {"bytesOffloaded": 0, "ledgersOffloaded": 0, "localBytesLeft": 0}
            )
            chosen = ("offload_ledger", topic, ledger_id) in actions
            lag = topics[topic]["offloadDeletionLagMs"]
            copy_goes = (
                (ledger["offloadComplete"] or chosen) and topics[topic]["offloader"] and (lag or -1) >= 0
            )
            m["bytesOffloaded"] += size if chosen else 0
            m["ledgersOffloaded"] += chosen
            m["localBytesLeft"] += size if local and not copy_goes else 0
        else:
            m = measured.setdefault(
                namespace,
                {
                    "bytesFreed": 0,
                    "bytesKept": 0,
                    "ledgersDeleted": 0,
                    "localBytesFreed": 0,
                    "localBytesLeft": 0,
                },
            )
            deleted = ("delete_ledger", topic, ledger_id) in actions
            copy_deleted = ("delete_local_copy", topic, ledger_id) in actions
            m["bytesFreed" if deleted else "bytesKept"] += size
            m["ledgersDeleted"] += deleted
            if local:
                m["localBytesFreed" if deleted or copy_deleted else "localBytesLeft"] += size
    return dict(sorted(measured.items()))


def _set_namespace_policies(store, overlay: PolicyOverlay) -> None:
    """Test setup: the overlay's namespace policies become the stored ones."""
    from sqlalchemy import update

    from housekeeping.store import metadata_schema as t
    from housekeeping.store.store import write_transaction

    with write_transaction(store.engine) as conn:
        for name, policies in overlay.namespaces.items():
            row = conn.execute(t.namespaces.select().where(t.namespaces.c.name == name)).one()
            merged = {**json.loads(row.policies), **policies}
            conn.execute(
                update(t.namespaces).where(t.namespaces.c.name == name).values(policies=json.dumps(merged))
            )


def _sweep(capsys, store, mechanism: str, as_of: str, sweep: str, report_dir: Path) -> dict:
    code, out, err = run_cli(
        capsys, "what-if", mechanism, "--store", str(store.root), "--as-of", as_of, "--sweep", sweep,
        "--format", "json", "--report-dir", str(report_dir),
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)


@pytest.mark.spark
@pytest.mark.runs
def test_every_offload_point_equals_its_plan_alone_and_the_store_is_untouched(
    spark, tmp_path, capsys, monkeypatch
):
    from housekeeping.store.generate import GenerateOptions, generate_store
    from housekeeping.store.manifest.export import export_manifest
    from housekeeping.store.tier import OFFLOAD_URL_ENV
    from tests.store_invariants import store_contents

    (tmp_path / "tier").mkdir()
    monkeypatch.setenv(OFFLOAD_URL_ENV, str(tmp_path / "tier"))
    store = generate_store(tmp_path / "store", GenerateOptions(topics=28, seed=7, entries_per_ledger=60))
    manifest = export_manifest(store)
    before = store_contents(store.root)
    thresholds = _sweep(
        capsys, store, "offload", OFFLOADED_AT, "offload-threshold=0,100k,-1", tmp_path / "threshold"
    )
    assert store_contents(store.root) == before, "a sweep changed the store"
    for index, (label, value) in enumerate(zip(("0", "100k", "-1"), (0, 102_400, -1), strict=True)):
        point = thresholds["points"][index]
        assert point["value"] == label
        overlay = _overlay(manifest, "managedLedgerOffloadThresholdInBytes", value)
        alone = _plan_alone(store, "offload", overlay, OFFLOADED_AT, tmp_path / f"threshold-{index}")
        assert point["perNamespace"] == alone, label
    offloaded = [p["total"]["bytesOffloaded"] for p in thresholds["points"]]
    assert offloaded[0] > offloaded[1] > 0, offloaded  # -1 still offloads acme/audit by its time threshold

    # Offload everything (threshold 0 set in every namespace), then sweep the lag 6 h later: 0 and 4 h free the
    # local copies, 1 d and -1 (never) keep them; local bytes freed + left is the same at every value.
    _set_namespace_policies(store, _overlay(manifest, "managedLedgerOffloadThresholdInBytes", 0))
    code, _, err = run_cli(capsys, "apply", "offload", "--store", str(store.root), "--as-of", OFFLOADED_AT)
    assert code == 0, err
    lags = _sweep(capsys, store, "trim", LAG_AS_OF, "offload-deletion-lag=0,4h,1d,-1", tmp_path / "lag")
    manifest = export_manifest(store)
    for index, (label, value) in enumerate(
        zip(("0", "4h", "1d", "-1"), (0, 14_400_000, 86_400_000, -1), strict=True)
    ):
        overlay = _overlay(manifest, "managedLedgerOffloadDeletionLagInMillis", value)
        alone = _plan_alone(store, "trim", overlay, LAG_AS_OF, tmp_path / f"lag-{index}")
        assert lags["points"][index]["perNamespace"] == alone, label
    freed = [p["total"]["localBytesFreed"] for p in lags["points"]]
    assert freed[0] == freed[1] > freed[2] == freed[3], freed
    assert len({p["total"]["localBytesFreed"] + p["total"]["localBytesLeft"] for p in lags["points"]}) == 1
    page = (tmp_path / "lag" / "index.html").read_text()
    assert "Local bytes freed / left per namespace" in page and "<svg" in page
