"""Fault injection on the object tier: the offload apply and the purge of tier objects are SIGKILLed at their fault
points (as a crash would kill them), then the retried step must converge to the state a crash-free run reaches.

After the kill: no local file and no tier object the metadata does not know, every completed offload's object
there (tests/store_invariants.py). After the retry (and the purge the DAG runs next): every planned ledger offloaded
exactly once, complete at the run's logical time, one object per ledger in the tier (an interrupted attempt's
object named by the pending-deletion log and purged), as in the crash-free reference.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select

from housekeeping.core.timeutil import parse_as_of
from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, purge_step, snapshot_step
from housekeeping.store import metadata_schema as t
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store, read_transaction
from housekeeping.store.tier import parse_object_key
from tests.conftest import ledger_topic, write_manifest
from tests.e2e.test_fault_injection import GRACE, _killed, _killed_apply_step
from tests.store_invariants import assert_no_orphans_and_no_dangling_metadata

pytestmark = [pytest.mark.spark, pytest.mark.processes, pytest.mark.runs]

T0 = 1_767_225_600_000
AS_OF = "2026-01-02T00:00:00Z"
# The second completion falls between two ledgers of one topic.
OFFLOAD_POINTS = [
    "offload_apply_after_prepare",
    "offload_apply_after_upload",
    "offload_apply_after_complete@2",
]
TIER_PURGE_POINTS = ["purge_after_object_removed"]


def manifest() -> dict:
    stamps = [T0 + i for i in range(8)]
    topics = {
        f"persistent://t/ns/{name}": ledger_topic(
            [(i, stamps, T0 + i * 60_000) for i in range(1, 5)] + [(5, stamps[:2], None)],
            {"sub": {"markDeletePosition": "1:0"}},
        )
        for name in ("a", "b")
    }
    return {
        "namespaces": {"t/ns": {"offload_policies": {"managedLedgerOffloadThresholdInSeconds": 0}}},
        "topics": topics,
    }


@dataclass(frozen=True)
class PlannedOffload:
    """A store and its tier planned and gated once, kept pristine; each test restores both in place."""

    base: Path

    @property
    def root(self) -> Path:
        return self.base / "store"

    @property
    def run_dir(self) -> Path:
        return self.root / "runs" / "offload" / "faulty"

    def restore(self) -> Store:
        for name in ("store", "tier"):
            shutil.rmtree(self.base / name, ignore_errors=True)
            shutil.copytree(self.base / f"pristine-{name}", self.base / name)
        return Store.open(self.root)


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    base = tmp_path_factory.mktemp("tier-faults")
    with pytest.MonkeyPatch.context() as patch:
        (base / "tier").mkdir()
        patch.setenv("HOUSEKEEPING_OFFLOAD_URL", str(base / "tier"))
        load_manifest(base / "store", write_manifest(base, manifest()))
        store = Store.open(base / "store")
        info = snapshot_step(store, "offload", run_id="faulty", as_of_ms=parse_as_of(AS_OF))
        assert plan_and_gate_in_process(info.run_dir, "offload", "local[2]").success
        for name in ("store", "tier"):
            shutil.copytree(base / name, base / f"pristine-{name}")
        yield PlannedOffload(base)


def _offload_state(store: Store) -> dict:
    """Per ledger: offloaded, when, local copy deleted; per ledger the number of objects in the tier."""
    with read_transaction(store.engine) as conn:
        rows = list(conn.execute(select(t.ledgers)))
    objects: dict[tuple[str, int], int] = {}
    for item in store.tier.list_objects():
        directory, ledger_id, _ = parse_object_key(item.key)
        key = (f"persistent://{directory}", ledger_id)
        objects[key] = objects.get(key, 0) + 1
    return {
        "ledgers": sorted(
            (r.topic, r.ledger_id, r.offload_complete, r.offloaded_at_ms, r.local_deleted) for r in rows
        ),
        "objects": objects,
    }


@pytest.fixture(scope="module")
def reference(planned) -> dict:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOUSEKEEPING_OFFLOAD_URL", str(planned.base / "tier"))
        store = planned.restore()
        apply_step(store, planned.run_dir, purge_grace_seconds=GRACE)
        purge_step(store, planned.run_dir)
        state = _offload_state(store)
    assert sum(complete for _, _, complete, _, _ in state["ledgers"]) == 8
    assert set(state["objects"].values()) == {1}
    return state


@pytest.mark.parametrize("point", OFFLOAD_POINTS)
def test_offload_apply_killed_at_each_point_converges_when_retried(planned, reference, monkeypatch, point):
    monkeypatch.setenv("HOUSEKEEPING_OFFLOAD_URL", str(planned.base / "tier"))
    store = planned.restore()
    _killed_apply_step(store, planned.run_dir, point)
    assert_no_orphans_and_no_dangling_metadata(store)
    apply_step(store, planned.run_dir, purge_grace_seconds=GRACE)  # the task's retry
    purge_step(store, planned.run_dir)
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _offload_state(store) == reference


@pytest.mark.parametrize("point", TIER_PURGE_POINTS)
def test_purge_killed_after_deleting_an_object_converges_on_rerun(planned, reference, monkeypatch, point):
    """An interrupted attempt's object (the upload done, the process killed) is named by the retry's
    pending-deletion record; a purge killed right after deleting it leaves the record pending, and the next purge
    completes it."""
    monkeypatch.setenv("HOUSEKEEPING_OFFLOAD_URL", str(planned.base / "tier"))
    store = planned.restore()
    _killed_apply_step(store, planned.run_dir, "offload_apply_after_upload")
    apply_step(store, planned.run_dir, purge_grace_seconds=GRACE)
    with read_transaction(store.engine) as conn:
        abandoned = [r.tier_key for r in conn.execute(select(t.pending_deletions)) if r.status == "pending"]
    assert len(abandoned) == 1 and store.tier.info(abandoned[0]) is not None
    _killed(["-m", "housekeeping.cli", "purge", "--store", str(store.root), "--as-of", AS_OF], point)
    assert store.tier.info(abandoned[0]) is None
    assert_no_orphans_and_no_dangling_metadata(store)
    purge_step(store, planned.run_dir)
    with read_transaction(store.engine) as conn:
        assert {r.status for r in conn.execute(select(t.pending_deletions))} == {"purged"}
    assert _offload_state(store) == reference


ERASURE_TIER_POINTS = ["erasure_apply_after_upload"]


@pytest.mark.parametrize("point", ERASURE_TIER_POINTS)
def test_erasure_killed_after_uploading_a_redacted_object_converges_when_retried(
    tmp_path, monkeypatch, point
):
    """An offloaded ledger holding the key gets its redacted copy as a new attempt's object; killed right after
    that upload, the object is named by its staged record (no orphan), and the retried apply switches to it: after
    purge no local file and no object holds the key."""
    import hashlib

    from housekeeping.mechanisms.erasure.requests import add_request
    from tests.offload.test_tier_reads import AS_OF as ERASE_AS_OF
    from tests.offload.test_tier_reads import TOPIC as KEYED
    from tests.offload.test_tier_reads import manifest as keyed_manifest
    from tests.store_invariants import files_holding

    (tmp_path / "tier").mkdir()
    monkeypatch.setenv("HOUSEKEEPING_OFFLOAD_URL", str(tmp_path / "tier"))
    monkeypatch.setenv("HOUSEKEEPING_ERASURE_GRACE_SECONDS", "0")
    load_manifest(tmp_path / "store", write_manifest(tmp_path, keyed_manifest(tiered=True)))
    store = Store.open(tmp_path / "store")
    add_request(store, key="k3", topic=KEYED, reason="test", requested_at_ms=ERASE_AS_OF - 1, actor="test")
    info = snapshot_step(store, "erasure", run_id="faulty", as_of_ms=ERASE_AS_OF)
    assert plan_and_gate_in_process(info.run_dir, "erasure", "local[2]").success
    _killed_apply_step(store, info.run_dir, point)
    assert_no_orphans_and_no_dangling_metadata(store)
    apply_step(store, info.run_dir, purge_grace_seconds=0)
    purge_step(store, info.run_dir)
    assert_no_orphans_and_no_dangling_metadata(store)
    digest = hashlib.sha256(b"k3").hexdigest()
    for item in store.tier.list_objects():
        keys = store.tier.read_ledger(item.key, columns=["key"]).column("key").to_pylist()
        assert digest not in {hashlib.sha256(k.encode()).hexdigest() for k in keys if k}, item.key
    assert files_holding(store.ledgers_root, "k3") == []
