"""What the engine decides must not change when it gets faster: on one generated store, every mechanism's plan
tables, its gate verdict and the store after its apply hash to the fingerprints recorded in
``plan_fingerprints.json`` before the work of issue 35 (each plan written, checked and applied in one chain, so a
later mechanism plans on what the earlier ones left).

A deliberate change of a rule changes a fingerprint: rerun with ``HOUSEKEEPING_UPDATE_FINGERPRINTS=1`` and commit
the file with the change that explains it. A failure names the mechanism and the part that differs, and leaves
the canonical rows beside the store (``<basetemp>/fingerprints-<engine>0/<mechanism>-<part>.json``) to diff.

The chain runs three times: on this process's classic session (local[2]), as a DAG run's plan and gate tasks on the
suite's Spark Connect server with production's code generation, and as those tasks submitted to a Spark standalone
cluster in client mode, the deployment's topology (one set of fingerprints for all three; the mechanisms outside
the chain are compared between local and Connect in tests/housekeeping/orchestration/test_spark_connect.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.documents import GateResult
from housekeeping.engine.plan import read_summary
from housekeeping.engine.run_dir import RunDir, read_jsonl
from housekeeping.mechanisms.erasure.requests import add_request
from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, snapshot_step
from housekeeping.store.generate import GenerateOptions, generate_store
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.store import Store
from housekeeping.store.tier import OFFLOAD_URL_ENV
from tests.conftest import plan_and_gate_on_cluster, plan_and_gate_on_connect
from tests.store_invariants import pending_and_journal

pytestmark = [pytest.mark.spark, pytest.mark.runs]

FINGERPRINTS = Path(__file__).with_name("plan_fingerprints.json")
UPDATE_ENV = "HOUSEKEEPING_UPDATE_FINGERPRINTS"
AS_OF = "2026-11-02T00:00:00Z"
# Rewriting mechanisms first (they read entries the deleting ones would remove), then cursor moves, then deletions;
# offload last, on an object tier of its own (before it, the store has no offloader: trim's and GC's fingerprints
# were recorded without one).
CHAIN = ("compaction", "erasure", "backlog", "expiry", "trim", "gc", "offload")
# Written at run time, not decided: a wall-clock audit column, a temporary path, and the bytes' digest of a staged
# Parquet file (its writer's metadata differs run to run; the staged rows are compared as the plan's entries and
# as the store's messages after apply).
# The offload step's object tier: a directory beside the store's files (its path canonicalised with the store's).
TIER_DIRECTORY = "fingerprint-tier"
VOLATILE_KEYS = {"recorded_at_ms", "recordedAtMs", "store", "runDir", "stagedSha256"}


def _canonical(value: Any, root: Path) -> Any:
    """``value`` with the store's temporary path replaced and run-time keys dropped, sorted where order is not
    meaning (a plan table's rows come in Spark's order)."""
    if isinstance(value, dict):
        return {k: _canonical(v, root) for k, v in sorted(value.items()) if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_canonical(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(str(root), "<store>")
    return value


def _rows(rows: list[dict], root: Path) -> list:
    return sorted((_canonical(r, root) for r in rows), key=lambda r: json.dumps(r, sort_keys=True))


def _part_rows(part: Path) -> list[dict]:
    """A plan table's part file: JSON lines, or Parquet for the tables of entries (compaction's kept entries)."""
    return pq.read_table(part).to_pylist() if part.suffix == ".parquet" else read_jsonl(part)


def _plan(run_dir: Path, root: Path) -> dict:
    plan_dir = RunDir(run_dir).plan_dir
    tables = {}
    for part_dir in sorted({p.parent for p in plan_dir.rglob("part-*")}):
        rows = [row for part in sorted(part_dir.glob("part-*")) for row in _part_rows(part)]
        tables[str(part_dir.relative_to(plan_dir))] = _rows(rows, root)
    # Read as its document (not its file): the schema version is the format's, not the plan's.
    summary = read_summary(run_dir).as_json()
    return {"tables": tables, "summary": _canonical(summary, root)}


def _verdict(gate: GateResult, root: Path) -> dict:
    return _canonical(
        {
            "success": gate.success,
            "expectations": sorted(
                (
                    {
                        k: e[k]
                        for k in ("expectation", "frame", "kwargs", "success", "unexpectedCount", "rows")
                    }
                    for e in (o.as_json() for o in gate.expectations)
                ),
                key=lambda e: json.dumps(e, sort_keys=True),
            ),
        },
        root,
    )


def _store_state(store: Store, root: Path) -> dict:
    pending, journal = pending_and_journal(store)
    return _canonical(
        {
            "manifest": export_manifest(store, with_messages=True),
            "pendingDeletions": [list(r) for r in pending],
            "journal": [list(r) for r in journal],
        },
        root,
    )


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


@pytest.fixture(
    scope="module",
    params=[
        "classic",
        pytest.param("connect", marks=[pytest.mark.processes, pytest.mark.runs]),
        pytest.param("standalone", marks=[pytest.mark.processes, pytest.mark.runs, pytest.mark.airflow]),
    ],
)
def chain(request, tmp_path_factory) -> dict[str, dict]:
    """Each mechanism's canonical plan, verdict and resulting store, planned, gated and applied in ``CHAIN``'s
    order on one generated store (28 topics, seed 7). Planned and gated by this process's classic session, or as a
    DAG run's tasks on the suite's Spark Connect server with Spark's code generation and runtime filters on
    (``connect``), or submitted by the DAGs' Spark operator to a standalone master and worker (``standalone``): the
    ways of executing must decide the same, so all match the one set of fingerprints."""
    cluster = None
    if request.param == "connect":
        request.getfixturevalue("spark_connect_server")
    elif request.param == "standalone":
        request.getfixturevalue("airflow_db")
        cluster = request.getfixturevalue("standalone_cluster")
    base = tmp_path_factory.mktemp(f"fingerprints-{request.param}")
    root = base / "store"
    store = generate_store(root, GenerateOptions(topics=28, seed=7, entries_per_ledger=60), None)
    as_of_ms = parse_as_of(AS_OF)
    add_request(
        store, key="key-0001", namespace="globex/tables", reason="fp", requested_at_ms=as_of_ms - 1, actor="t"
    )
    parts: dict[str, dict] = {}
    for mechanism in CHAIN:
        with pytest.MonkeyPatch.context() as patch:
            if mechanism == "offload":
                (root / TIER_DIRECTORY).mkdir()
                patch.setenv(OFFLOAD_URL_ENV, str(root / TIER_DIRECTORY))
                store = Store.open(root, store.metadata_url)  # the store reads its tier once
            info = snapshot_step(
                store, mechanism, run_id=f"fp-{mechanism}", as_of_ms=as_of_ms, max_deleted_share=1.0
            )
            if request.param == "connect":
                gate = plan_and_gate_on_connect(info.run_dir, mechanism)
            elif cluster is not None:
                gate = plan_and_gate_on_cluster(cluster, info.run_dir, mechanism)
            else:
                gate = plan_and_gate_in_process(info.run_dir, mechanism, "local[2]")
            assert gate.success, f"{mechanism}: the gate blocked the generated store's plan"
            plan = _plan(info.run_dir, root)
            apply_step(store, info.run_dir)
            parts[mechanism] = {
                "plan": plan,
                "verdict": _verdict(gate, root),
                "applied": _store_state(store, root),
            }
        for part, value in parts[mechanism].items():
            (base / f"{mechanism}-{part}.json").write_text(
                json.dumps(value, indent=1, sort_keys=True, default=str)
            )
    if cluster is not None:
        # Planned and checked by the cluster, not by a local fallback: the master lists each app as completed.
        completed = {app["name"] for app in cluster.state()["completedapps"]}
        missing = {f"housekeeping-{step}-{m}" for m in CHAIN for step in ("plan", "validate")} - completed
        assert not missing, f"not run on the standalone master: {sorted(missing)}"
    return parts


def test_every_mechanism_plans_checks_and_applies_what_it_did_before(chain, request):
    actual = {
        mechanism: {f"plan/{name}": _digest(rows) for name, rows in parts["plan"]["tables"].items()}
        | {
            "plan/summary.json": _digest(parts["plan"]["summary"]),
            "verdict": _digest(parts["verdict"]),
            "applied": _digest(parts["applied"]),
        }
        for mechanism, parts in chain.items()
    }
    if os.environ.get(UPDATE_ENV) == "1" and request.node.callspec.params["chain"] == "classic":
        FINGERPRINTS.write_text(json.dumps(actual, indent=2, sort_keys=True) + "\n")
    recorded = json.loads(FINGERPRINTS.read_text())
    differences = [
        f"{mechanism} {part}"
        for mechanism in CHAIN
        for part in sorted(set(actual[mechanism]) | set(recorded[mechanism]))
        if recorded[mechanism].get(part) != actual[mechanism].get(part)
    ]
    assert not differences, f"changed since the fingerprints were recorded: {differences}"


def test_the_chain_plans_real_work(chain):
    """The fingerprints guard something: every mechanism's plan on this store has actions to check and apply."""
    for mechanism, parts in chain.items():
        assert parts["plan"]["tables"]["actions"], f"{mechanism} planned no action on the fingerprint store"
