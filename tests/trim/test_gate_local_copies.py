"""Gate strength for trim's offload-deletion lag (``delete_local_copy``): mutated plans are each blocked by the
expectation that re-derives the broken invariant, and apply refuses them with nothing changed
(tests/gate_mutants.py). The store has a local copy due, one whose lag has not passed, a ledger never offloaded and
a held topic with a due local copy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from housekeeping.engine.plan import read_table
from housekeeping.mechanisms.steps import plan_and_gate_in_process, snapshot_step
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store
from tests.conftest import topic_body, write_manifest
from tests.gate_mutants import mutate_and_check

pytestmark = [pytest.mark.spark, pytest.mark.runs]

T0 = 1_767_225_600_000
MIN = 60_000
TOPIC, HELD = "persistent://t/ns/a", "persistent://t/held/b"
AS_OF = T0 + 15 * MIN  # L1 offloaded 14 min ago (lag 10 min: due), L2 4 min ago (not due)


def offloaded(ledgers: list[dict], contexts: dict[int, int]) -> list[dict]:
    for ledger in ledgers:
        if ledger["ledgerId"] in contexts:
            ledger["offloadContext"] = {"complete": True, "timestamp": contexts[ledger["ledgerId"]]}
    return ledgers


def manifest() -> dict:
    ledgers = [(1, 10, 100, T0), (2, 10, 100, T0 + MIN), (3, 10, 100, T0 + 2 * MIN), (4, 5, 50, None)]
    a = topic_body(ledgers, {"sub": "1:0"})
    offloaded(a["ledgers"], {1: T0 + MIN, 2: T0 + 11 * MIN})
    b = topic_body(ledgers, {"sub": "1:0"})
    offloaded(b["ledgers"], {1: T0 + MIN})
    policies = {"offload_policies": {"managedLedgerOffloadDeletionLagInMillis": 10 * MIN}}
    return {"namespaces": {"t/ns": policies, "t/held": policies}, "topics": {TOPIC: a, HELD: b}}


@pytest.fixture(scope="module")
def planned_trim(tmp_path_factory):
    root = tmp_path_factory.mktemp("local-copy-gate")
    with pytest.MonkeyPatch.context() as patch:
        (root / "tier").mkdir()
        patch.setenv("HOUSEKEEPING_OFFLOAD_URL", str(root / "tier"))  # an offloader applies
        load_manifest(root / "store", write_manifest(root, manifest()))
        store = Store.open(root / "store")
        from housekeeping.store.holds import add_hold
        from housekeeping.store.store import write_transaction

        with write_transaction(store.engine) as conn:
            add_hold(conn, "t/held", reason="legal", actor="test")
        info = snapshot_step(store, "trim", run_id="mutate-local-copies", as_of_ms=AS_OF)
        assert plan_and_gate_in_process(info.run_dir, "trim", "local[2]").success
        actions = read_table(info.run_dir, "actions")
        assert [(a["topic"], a["ledgerId"], a["action"]) for a in actions] == [
            (TOPIC, 1, "delete_local_copy")
        ]
        yield store, info.run_dir


def local_copy(topic: str, ledger_id: int, offloaded_at: int | None) -> dict:
    return {
        "topic": topic,
        "action": "delete_local_copy",
        "ledgerId": ledger_id,
        "bytes": 100,
        "offloadedAtMs": offloaded_at,
        "reason": "mutant",
    }


MUTANTS: dict[str, tuple[Callable[[list[dict], Path], list[dict]], str]] = {
    "deletes a local copy before its lag": (
        lambda rows, _: rows + [local_copy(TOPIC, 2, T0 + 11 * MIN)],
        "deletion_lag_passed",
    ),
    "deletes the local copy of a ledger never offloaded": (
        lambda rows, _: rows + [local_copy(TOPIC, 3, None)],
        "offload_complete",
    ),
    "leaves out a due local copy": (lambda rows, _: [], "planned"),
    "names another offload time": (
        lambda rows, _: [dict(r, offloadedAtMs=r["offloadedAtMs"] + 1) for r in rows],
        "offload_time_matches_snapshot",
    ),
    "deletes a held topic's local copy": (lambda rows, _: rows + [local_copy(HELD, 1, T0 + MIN)], "not_held"),
    "bytes differ from the snapshot": (
        lambda rows, _: [dict(r, bytes=1) for r in rows],
        "bytes_match_snapshot",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_gate_blocks_each_mutated_local_copy_deletion_and_nothing_changes(planned_trim, name):
    mutate_and_check(planned_trim, "trim", *MUTANTS[name])
