"""The action catalogue is the one way bytes are counted: for every mechanism, the run figures (``planned_bytes``,
``bytes_freed``), the approval measure and the store's metrics (``housekeeping_freed_bytes``) agree with the plan's
bytes as its action kinds count them, and the counts are anchored in what each plan says on its own (trim's and
GC's summaries, compaction's replaced sizes, key erasure's redacted payloads). Before the catalogue, planned_bytes
was 0 for every key-erasure run and counted none of compaction's, and the approval counted redactions as deleted.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

import pytest

from housekeeping.engine.actions import DELETES_DATA
from housekeeping.engine.approval import measure_plan
from housekeeping.engine.contract import ACTIONS
from housekeeping.engine.plan import read_summary, read_table
from housekeeping.engine.run_dir import RunDir, read_json
from housekeeping.mechanisms.registry import get_mechanism, mechanism_names
from housekeeping.observe.metrics.exposition import store_metrics
from housekeeping.observe.run_figures import run_figures
from housekeeping.store.generate import GenerateOptions, generate_store
from tests.conftest import run_steps

pytestmark = [pytest.mark.spark, pytest.mark.runs]

AS_OF_MS = 1_793_491_200_000  # 2026-11-01T00:00:00Z, the generated store's reference time
# Compaction again 8 days later: globex/tables' compacted retention (7 days) drops entries from the compacted ledgers
# the first run wrote, so the new ones are smaller and the rewrite frees bytes.
AGAIN_MS = AS_OF_MS + 8 * 86_400_000
KEY = "key-0001"


def catalogue_bytes(run_dir: RunDir, mechanism: str, topics: set[str] | None = None) -> int:
    """The plan's deleted bytes as its kinds count them (of ``topics`` only, when given)."""
    spec = get_mechanism(mechanism)
    return sum(
        kind.freed_bytes(row)
        for row in read_table(run_dir.path, ACTIONS.name)
        if (kind := spec.action(row["action"])).deletes_data
        and (topics is None or row.get("topic") in topics)
    )


def own_bytes(run_dir: RunDir, mechanism: str) -> int:
    """What the plan says it deletes in its own terms, without the catalogue."""
    rows = read_table(run_dir.path, ACTIONS.name)
    if mechanism == "trim":
        return read_summary(run_dir.path)["bytesToDelete"]
    if mechanism == "gc":
        return sum(int(r["bytes"]) for r in rows if r["action"] == "delete_topic")
    if mechanism == "compaction":
        return sum(max(0, int(r.get("bytesReplaced") or 0) - int(r["bytes"])) for r in rows)
    if mechanism == "erasure":
        return sum(int(r["bytes"]) for r in rows if r["action"].startswith("redact_"))
    return 0  # expiry and backlog move cursors: no bytes leave the store


@pytest.fixture(scope="module")
def runs(tmp_path_factory, spark):
    """Every mechanism applied in turn on one generated store (a key-erasure request recorded first), 0 s grace, no
    blast-radius limit (GC deletes every inactive topic of globex/events), then compaction again (AGAIN_MS).
    Returns the store and the runs by label: (mechanism, run directory)."""
    from housekeeping.mechanisms.erasure.requests import add_request

    store = generate_store(
        tmp_path_factory.mktemp("catalogue") / "store",
        GenerateOptions(topics=28, seed=7, entries_per_ledger=60),
    )
    add_request(
        store,
        key_sha256=hashlib.sha256(KEY.encode()).hexdigest(),
        namespace="globex/tables",
        reason="test",
        requested_at_ms=AS_OF_MS - 60_000,
        actor="test",
    )
    unlimited = {"max_deleted_share": 1.0}
    done = {
        name: (name, RunDir(run_steps(store, name, AS_OF_MS, f"catalogue-{name}", values=unlimited)))
        for name in mechanism_names()
    }
    again = RunDir(run_steps(store, "compaction", AGAIN_MS, "catalogue-compaction-again", values=unlimited))
    done["compaction-again"] = ("compaction", again)
    return store, done


LABELS = (*mechanism_names(), "compaction-again")


def test_every_mechanism_is_run(runs):
    assert {mechanism for mechanism, _ in runs[1].values()} == set(mechanism_names())


@pytest.mark.parametrize("label", LABELS)
def test_run_figures_and_approval_count_the_plan_by_the_catalogue(runs, label):
    mechanism, run_dir = runs[1][label]
    expected = catalogue_bytes(run_dir, mechanism)
    assert expected == own_bytes(run_dir, mechanism)
    figures = run_figures(run_dir)
    assert figures["gauges"]["planned_bytes"] == expected
    # The DAG passes the run's dry_run (its params) rather than have the figures parse the report for it.
    assert run_figures(run_dir, dry_run=read_json(run_dir.report_json)["dryRun"]) == figures
    applied = set(read_json(run_dir.apply_result)["appliedTopics"])
    assert figures["counters"]["bytes_freed"] == catalogue_bytes(run_dir, mechanism, applied)
    assert measure_plan(run_dir, get_mechanism(mechanism)).bytes == expected


def test_the_mended_figures_are_not_zero(runs):
    """The deleting mechanisms planned something on this store, so the agreement above is not 0 == 0 (compaction
    frees bytes when it replaces a compacted ledger by a smaller one: its second run)."""
    for label in ("trim", "gc", "compaction-again", "erasure"):
        mechanism, run_dir = runs[1][label]
        assert catalogue_bytes(run_dir, mechanism) > 0, label
    mechanism, run_dir = runs[1]["compaction-again"]
    assert read_json(run_dir.apply_result)["compactedLedgersReplaced"] > 0


def test_the_metrics_count_the_applied_actions_by_the_catalogue(runs):
    store, done = runs
    (freed,) = [f for f in store_metrics(store, as_of_ms=AS_OF_MS) if f.name == "housekeeping_freed_bytes"]
    measured: dict[str, float] = defaultdict(float)
    deleting = {frees.value for frees in DELETES_DATA}
    for (mechanism, _namespace, frees), value in freed.samples.items():
        if frees in deleting:
            measured[mechanism] += value
    expected: dict[str, int] = defaultdict(int)
    for mechanism, run_dir in done.values():
        applied = set(read_json(run_dir.apply_result)["appliedTopics"])
        expected[mechanism] += catalogue_bytes(run_dir, mechanism, applied)
    assert {m: measured.get(m, 0.0) for m in mechanism_names()} == {m: expected[m] for m in mechanism_names()}
