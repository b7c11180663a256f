"""Gate strength for ledger offload: mutated plans are each blocked by the expectation that re-derives the broken
invariant, and apply refuses them with nothing changed (tests/gate_mutants.py). The store is built so that every
check has a ledger to catch: an offloaded ledger, an empty one, one under the threshold, the current ledger, and a
topic of a system-service namespace (Pulsar's NullLedgerOffloader)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.plan import read_table
from housekeeping.mechanisms.steps import plan_and_gate_in_process, snapshot_step
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store
from tests.conftest import ledger_topic, write_manifest
from tests.gate_mutants import mutate_and_check

pytestmark = [pytest.mark.spark, pytest.mark.runs]

T0 = 1_767_225_600_000
MIN = 60_000
TOPIC, SYSTEM = "persistent://t/ns/a", "persistent://pulsar/system/s"
AS_OF = "2026-01-02T00:00:00Z"


def manifest() -> dict:
    stamps = [T0] * 10
    a = ledger_topic(
        [
            (1, stamps, T0 + MIN),
            (2, stamps, T0 + 2 * MIN),
            (3, [], T0 + 3 * MIN),
            (4, stamps, T0 + 4 * MIN),
            (5, stamps, T0 + 5 * MIN),
            (6, stamps[:5], None),
        ],
        {"sub": {"markDeletePosition": "1:0"}},
    )
    a["ledgers"][0].update(offloaded=True, offloadContext={"complete": True, "timestamp": T0 + 30 * MIN})
    system = ledger_topic(
        [(1, stamps, T0 + MIN), (2, stamps[:1], None)], {"sub": {"markDeletePosition": "1:0"}}
    )
    return {
        "namespaces": {
            "t/ns": {"offload_policies": {"managedLedgerOffloadThresholdInBytes": 150}},
            "pulsar/system": {"offload_policies": {"managedLedgerOffloadThresholdInBytes": 0}},
        },
        "topics": {TOPIC: a, SYSTEM: system},
    }


@pytest.fixture(scope="module")
def planned_offload(tmp_path_factory):
    root = tmp_path_factory.mktemp("offload-gate")
    with pytest.MonkeyPatch.context() as patch:
        (root / "tier").mkdir()
        patch.setenv("HOUSEKEEPING_OFFLOAD_URL", str(root / "tier"))
        load_manifest(root / "store", write_manifest(root, manifest()))
        store = Store.open(root / "store")
        info = snapshot_step(store, "offload", run_id="mutate-offload", as_of_ms=parse_as_of(AS_OF))
        assert plan_and_gate_in_process(info.run_dir, "offload", "local[2]").success
        assert sorted(a["ledgerId"] for a in read_table(info.run_dir, "actions")) == [2, 4]
        yield store, info.run_dir


def offload(topic: str, ledger_id: int, size: int = 100) -> dict:
    return {
        "topic": topic,
        "action": "offload_ledger",
        "ledgerId": ledger_id,
        "bytes": size,
        "reason": "mutant",
    }


OFFLOAD_MUTANTS: dict[str, tuple[Callable[[list[dict], Path], list[dict]], str]] = {
    "offloads the current ledger": (lambda rows, _: rows + [offload(TOPIC, 6, 50)], "closed_and_not_current"),
    "offloads a ledger offloaded already": (lambda rows, _: rows + [offload(TOPIC, 1)], "not_offloaded_yet"),
    "offloads an empty ledger": (lambda rows, _: rows + [offload(TOPIC, 3, 0)], "not_empty"),
    "offloads a ledger under the threshold": (
        lambda rows, _: rows + [offload(TOPIC, 5)],
        "threshold_selects_it",
    ),
    "offloads in a system-service namespace": (
        lambda rows, _: rows + [offload(SYSTEM, 1)],
        "offloader_applies",
    ),
    "leaves out a ledger the policy offloads": (
        lambda rows, _: [r for r in rows if r["ledgerId"] != 2],
        "planned",
    ),
    "bytes differ from the snapshot": (
        lambda rows, _: [dict(r, bytes=1) for r in rows],
        "bytes_match_snapshot",
    ),
    "offloads one ledger twice": (lambda rows, _: rows + [rows[0]], None),
}


@pytest.mark.parametrize("name", sorted(OFFLOAD_MUTANTS))
def test_offload_gate_blocks_each_mutated_plan_and_nothing_changes(planned_offload, name):
    edit, failing = OFFLOAD_MUTANTS[name]
    if failing is None:  # a compound uniqueness expectation has no single column
        from housekeeping.mechanisms.steps import local_spark
        from spark_apps import validate_plan
        from tests.conftest import restore_table, rewrite_table, table_parts

        store, run_dir = planned_offload
        parts = table_parts(run_dir / "plan" / "actions")
        try:
            rows = [json.loads(line) for text in parts.values() for line in text.splitlines()]
            rewrite_table(run_dir / "plan" / "actions", edit(rows, run_dir))
            document = validate_plan.run(local_spark("local[2]"), run_dir, "offload")
            assert not document.success
            assert any(f.expectation == "expect_compound_columns_to_be_unique" for f in document.failed)
        finally:
            restore_table(parts)
        return
    mutate_and_check(planned_offload, "offload", edit, failing)
