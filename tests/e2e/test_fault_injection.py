"""Fault injection: the CLI's apply, purge and compaction processes are SIGKILLed at every fault point of
housekeeping.engine.faults (no exception, no clean-up: as a crash or an OOM kill), then the operator's rerun must
converge to the state a run without the crash reaches.

After the kill, before the rerun: no metadata points at a missing file, no file exists that the metadata does not
know, and for compaction the compacted view is the old or the new one, never a mix. After the rerun: the same
invariants, the same topics, ledgers, cursors and entry files as the crash-free reference, the same compacted
view, and the journal shows the interrupted run (started, never finished) beside the completed one.

A mechanism's run is snapshotted, planned and gated once per generated store; each kill starts from a copy of
it (the crash-free reference applies that same plan). The killed compaction apply runs its Spark steps on the
suite's Spark Connect server, as `make airflow` deploys it, rather than starting a JVM of its own to be killed.

CI size: every fault point once on a 14-topic generated store. HOUSEKEEPING_FAULT_SEEDS=1,2,3 (opt-in) repeats
the suite on more generated stores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select

from housekeeping.core.settings import Settings
from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.faults import FAULT_POINT_ENV
from housekeeping.mechanisms.registry import fault_points, get_mechanism
from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, snapshot_step
from housekeeping.store import metadata_schema as t
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.store import Store, read_transaction
from tests.conftest import REPO, run_cli
from tests.store_invariants import apply_batches, assert_no_orphans_and_no_dangling_metadata

pytestmark = [pytest.mark.spark, pytest.mark.processes, pytest.mark.runs]

AS_OF = "2026-11-02T00:00:00Z"
PURGE_AS_OF = "2026-11-10T00:00:00Z"  # past every grace period (a day), not past the clock
# Small generated stores delete most of a namespace; the blast-radius limit is not what these tests are about.
TRIM = ["apply", "trim", "--as-of", AS_OF, "--max-deleted-share", "1"]
GRACE = Settings.from_env().purge_grace_seconds  # the CLI apply's grace period, so both paths agree
SEEDS = [int(s) for s in os.environ.get("HOUSEKEEPING_FAULT_SEEDS", "7").split(",")]

TRIM_POINTS = [
    "snapshot_after_write",
    "plan_after_write",
    "apply_inside_topic_transaction",
    "apply_after_topic_commit",
]  # the first two kill a whole CLI run; the others the apply step of a planned run
PURGE_POINTS = ["purge_after_file_removed", "purge_between_files@2"]
COMPACTION_POINTS = list(get_mechanism("compaction").fault_points)
# The second install and the first commit fall between two topics' switches.
ERASURE_POINTS = [
    "erasure_apply_after_stage",
    "erasure_apply_after_install@2",
    "erasure_apply_inside_topic_transaction",
    "erasure_apply_after_topic_commit",
]


def test_every_fault_point_is_exercised_here():
    """Here, in tests/e2e/test_tier_faults.py (the object tier's points) and tests/scrub/test_repair.py."""
    from tests.e2e.test_tier_faults import ERASURE_TIER_POINTS, OFFLOAD_POINTS, TIER_PURGE_POINTS
    from tests.scrub.test_repair import SCRUB_POINTS

    tier = OFFLOAD_POINTS + TIER_PURGE_POINTS + ERASURE_TIER_POINTS + SCRUB_POINTS
    points = TRIM_POINTS + PURGE_POINTS + COMPACTION_POINTS + ERASURE_POINTS + tier
    exercised = {p.split("@")[0] for p in points}
    assert exercised == set(fault_points())  # the engine's and every mechanism's
    assert len(fault_points()) >= 8


@pytest.fixture(scope="module", params=SEEDS, ids=[f"seed{s}" for s in SEEDS])
def template(request, tmp_path_factory) -> Path:
    from housekeeping.store.generate import GenerateOptions, generate_store

    root = tmp_path_factory.mktemp(f"faults-{request.param}") / "store"
    generate_store(root, GenerateOptions(14, request.param, 40, 5, 60, "2026-11-01T00:00:00Z", False), None)
    return root


def _copy(template: Path, target: Path) -> Store:
    shutil.copytree(template, target)
    return Store.open(target)


def _killed(command: list[str], point: str, env: dict[str, str] | None = None) -> None:
    """Run ``python COMMAND`` in its own process with the fault point armed; it must die by SIGKILL."""
    done = subprocess.run(
        [sys.executable, *command],
        cwd=REPO,
        env={**os.environ, **(env or {}), FAULT_POINT_ENV: point},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == -9, f"{point}: expected SIGKILL, got {done.returncode}\n{done.stderr[-2000:]}"


def _killed_cli(argv: list[str], point: str) -> None:
    _killed(["-m", "housekeeping.cli", *argv], point)


def _killed_apply_step(
    store: Store,
    run_dir: Path,
    point: str,
    spark_master: str | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """The apply step the DAG's apply task (or its retry) runs, on an already validated run, in its own process
    (``spark_master``: where a Spark apply runs, e.g. the suite's Spark Connect server, as `make airflow` runs
    it, instead of a JVM of its own in the killed process; ``env``: settings of the killed process)."""
    code = (
        "import sys; from pathlib import Path; from housekeeping.mechanisms.steps import apply_step; "
        "from housekeeping.store.store import Store; "
        "apply_step(Store.open(sys.argv[1]), Path(sys.argv[2]), purge_grace_seconds=int(sys.argv[3]))"
    )
    _killed(
        ["-c", code, str(store.root), str(run_dir), str(GRACE)],
        point,
        {**({"HOUSEKEEPING_SPARK_MASTER": spark_master} if spark_master else {}), **(env or {})},
    )


def _planned(store: Store, mechanism: str, run_id: str, compact_topics=()) -> Path:
    """Snapshot, plan and gate in this process (the shared Spark session): what the DAG's tasks before apply do."""
    info = snapshot_step(
        store,
        mechanism,
        run_id=run_id,
        as_of_ms=parse_as_of(AS_OF),
        max_deleted_share=1.0,
        compact_topics=compact_topics,
    )
    assert plan_and_gate_in_process(info.run_dir, mechanism, "local[2]").success
    return info.run_dir


@dataclass(frozen=True)
class PlannedRun:
    """A store snapshotted, planned and gated once (run ``faulty``), kept pristine; each test restores it where
    the run directory says the store is (run.json names the store by its path) and kills its apply. The plan is
    the same for every test of a mechanism, so it is computed once."""

    pristine: Path
    root: Path
    run_dir: Path

    def restore(self) -> Store:
        shutil.rmtree(self.root, ignore_errors=True)
        return _copy(self.pristine, self.root)


@pytest.fixture(scope="module")
def planned(template, tmp_path_factory) -> Callable[[str], PlannedRun]:
    base = tmp_path_factory.mktemp("planned")
    runs: dict[str, PlannedRun] = {}

    def run_of(mechanism: str) -> PlannedRun:
        if mechanism not in runs:
            root = base / "store"
            shutil.rmtree(root, ignore_errors=True)
            store = _copy(template, root)
            if mechanism == "erasure":
                _erasure_requests(store, template)
            run_dir = _planned(
                store, mechanism, "faulty", _keyed(template) if mechanism == "compaction" else ()
            )
            shutil.copytree(root, base / f"planned-{mechanism}")
            runs[mechanism] = PlannedRun(base / f"planned-{mechanism}", root, run_dir)
        return runs[mechanism]

    return run_of


def _ok(capsys, *argv: str) -> dict:
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    return json.loads(out) if out.strip().startswith("{") else {}


def _entry_files(store: Store) -> dict[str, str]:
    """Every raw ledger's entry files (at the generation in force) with a hash of their content in name order (what
    'still readable' means, byte for byte; a rewritten ledger's file names differ between runs, not its bytes)."""
    from housekeeping.store.entries import files_sha256

    with read_transaction(store.engine) as conn:
        rows = list(
            conn.execute(select(t.ledgers.c.topic, t.ledgers.c.ledger_id, t.ledgers.c.files_generation))
        )
    files = {}
    for row in rows:
        ledger_dir = store.ledger_dir(row.topic, row.ledger_id, row.files_generation)
        if any(ledger_dir.glob("*.parquet")):
            files[str(ledger_dir.relative_to(store.root))] = files_sha256(ledger_dir)
    return files


def _state(store: Store) -> dict:
    exported = export_manifest(store)
    exported.pop("store", None)
    return {"manifest": exported, "entryFiles": _entry_files(store)}


def _runs(store: Store) -> dict[str, set[str]]:
    with read_transaction(store.engine) as conn:
        rows = list(
            conn.execute(select(t.journal.c.run_id, t.journal.c.status).where(t.journal.c.topic.is_(None)))
        )
    runs: dict[str, set[str]] = {}
    for row in rows:
        runs.setdefault(row.run_id, set()).add(row.status)
    return runs


@pytest.fixture(scope="module")
def trim_reference(template, planned) -> dict:
    """The state a crash-free trim apply reaches (same as-of, same grace period)."""
    run = planned("trim")
    reference = run.restore()
    apply_step(reference, run.run_dir, purge_grace_seconds=GRACE)
    expected = _state(reference)
    assert expected != _state(Store.open(template)), "the reference run must change something"
    return expected


@pytest.mark.parametrize("point", ["snapshot_after_write", "plan_after_write"])
def test_trim_run_killed_before_apply_changes_nothing_and_a_new_run_completes(
    template, trim_reference, tmp_path, capsys, point
):
    store = _copy(template, tmp_path / "store")
    before = _state(store)
    _killed_cli([*TRIM, "--store", str(store.root)], point)
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _state(store) == before and _runs(store) == {}

    _ok(capsys, *TRIM, "--store", str(store.root))
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _state(store) == trim_reference
    assert [statuses for statuses in _runs(store).values()] == [{"started", "finished"}]


@pytest.mark.parametrize("point", ["apply_inside_topic_transaction", "apply_after_topic_commit"])
def test_trim_apply_killed_mid_apply_converges_when_the_task_is_retried(planned, trim_reference, point):
    run = planned("trim")
    store, run_dir = run.restore(), run.run_dir
    # At most three topics per transaction (a bucket's at a time): the kill lands inside the first batch, or between
    # the first and the second.
    _killed_apply_step(store, run_dir, point, env={"HOUSEKEEPING_APPLY_BATCH_TOPICS": "3"})
    assert_no_orphans_and_no_dangling_metadata(store)
    # The journal shows the interrupted run: started, never finished; a whole batch or nothing committed.
    assert list(_runs(store).values()) == [{"started"}]
    with read_transaction(store.engine) as conn:
        committed = (
            conn.execute(select(t.journal.c.topic).where(t.journal.c.status == "applied")).scalars().all()
        )
    first_batch = apply_batches(run_dir, 3)[0]
    assert sorted(committed) == (first_batch if point == "apply_after_topic_commit" else [])

    apply_step(store, run_dir, purge_grace_seconds=GRACE)  # the retry: same run, same validated plan
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _state(store) == trim_reference
    assert list(_runs(store).values()) == [{"started", "finished"}]


@pytest.mark.parametrize("point", PURGE_POINTS)
def test_purge_killed_between_files_converges_on_rerun(template, tmp_path, capsys, point):
    store = _copy(template, tmp_path / "store")
    _ok(capsys, *TRIM, "--store", str(store.root))
    with read_transaction(store.engine) as conn:
        due = conn.execute(select(t.pending_deletions).where(t.pending_deletions.c.status == "pending")).all()
    assert len(due) >= 2, "the purge needs at least two files to be killed between them"
    kept = _state(store)

    _killed_cli(["purge", "--store", str(store.root), "--as-of", PURGE_AS_OF], point)
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _state(store) == kept  # live ledgers and cursors untouched by the crash

    _ok(capsys, "purge", "--store", str(store.root), "--as-of", PURGE_AS_OF)
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _state(store) == kept
    with read_transaction(store.engine) as conn:
        statuses = {r.status for r in conn.execute(select(t.pending_deletions.c.status))}
    assert statuses == {"purged"}
    for row in due:
        assert not (store.root / row.path).exists(), row.path


def _compacted_view(capsys, store: Store) -> dict:
    view = _ok(capsys, "inspect", "--store", str(store.root), "--compacted")["compactedView"]
    # Which ledger id holds the view differs between runs (ids are never reused); its content must not.
    return {topic: body["keys"] for topic, body in view.items()}


def _keyed(template: Path) -> list[str]:
    keyed = sorted(t for t in export_manifest(Store.open(template))["topics"] if "/globex/tables/" in t)
    assert len(keyed) >= 2, "two keyed topics, so a crash can fall between their renames and switches"
    return keyed


@pytest.fixture(scope="module")
def compaction_reference(planned, tmp_path_factory) -> dict:
    run = planned("compaction")
    reference = run.restore()
    apply_step(reference, run.run_dir, purge_grace_seconds=GRACE)
    # Kept apart for its compacted view (the planned run's path is restored by every test).
    kept = tmp_path_factory.mktemp("compaction-reference") / "store"
    shutil.copytree(reference.root, kept)
    return {"state": _state(reference), "root": kept}


@pytest.mark.parametrize("point", COMPACTION_POINTS)
def test_compaction_apply_killed_at_each_point_keeps_old_or_new_view_and_converges(
    template, planned, compaction_reference, spark_connect_server, capsys, point
):
    """The killed apply's Spark steps run on the suite's Spark Connect server; the retry on the classic session."""
    keyed = _keyed(template)
    new_view = _compacted_view(capsys, Store.open(compaction_reference["root"]))
    expected = compaction_reference["state"]

    run = planned("compaction")
    store, run_dir = run.restore(), run.run_dir
    old_view = _compacted_view(capsys, store)
    assert old_view != new_view
    _killed_apply_step(store, run_dir, point, spark_connect_server)
    assert_no_orphans_and_no_dangling_metadata(store)
    after_crash = _compacted_view(capsys, store)
    for topic in keyed:
        assert after_crash.get(topic) in (old_view.get(topic), new_view.get(topic)), f"{point}: {topic} mixed"

    apply_step(store, run_dir, purge_grace_seconds=GRACE)  # the retry of the same run
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _compacted_view(capsys, store) == new_view
    state = _state(store)
    assert state == expected
    assert list(_runs(store).values()) == [{"started", "finished"}]
    # Whatever the crash left staged or replaced waits in the pending-deletion log, not as an orphan directory;
    # purge removes it and nothing the view uses.
    _ok(capsys, "purge", "--store", str(store.root), "--as-of", PURGE_AS_OF)
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _compacted_view(capsys, store) == new_view


ERASED_KEY = "key-0001"


def _erasure_requests(store: Store, template: Path) -> None:
    """One request per keyed topic (topic-scoped: two topics to switch, so a crash can fall between them)."""
    from housekeeping.mechanisms.erasure.requests import add_request

    for topic in _keyed(template):
        add_request(
            store,
            key=ERASED_KEY,
            topic=topic,
            reason="fault injection",
            requested_at_ms=parse_as_of(AS_OF) - 1,
            actor="test",
        )


@pytest.fixture(scope="module")
def erasure_reference(planned) -> dict:
    run = planned("erasure")
    reference = run.restore()
    before = _state(reference)
    apply_step(reference, run.run_dir, purge_grace_seconds=GRACE)
    state = _state(reference)
    assert state["entryFiles"] != before["entryFiles"], "the reference run must rewrite ledgers"
    return state


def _keys_in_force(capsys, store: Store) -> dict[str, set[str]]:
    """Per keyed topic, the keys its ledgers in force and its compacted view hold."""
    import pyarrow.parquet as pq

    keys: dict[str, set[str]] = {}
    with read_transaction(store.engine) as conn:
        rows = list(conn.execute(select(t.ledgers).where(t.ledgers.c.topic.like("%/globex/tables/%"))))
    for row in rows:
        ledger_dir = store.ledger_dir(row.topic, row.ledger_id, row.files_generation)
        if any(ledger_dir.glob("*.parquet")):
            keys.setdefault(row.topic, set()).update(
                k for k in pq.read_table(ledger_dir, columns=["key"]).column("key").to_pylist() if k
            )
    return keys


@pytest.mark.parametrize("point", ERASURE_POINTS)
def test_erasure_apply_killed_at_each_point_keeps_old_or_new_files_and_converges(
    planned, erasure_reference, capsys, point
):
    run = planned("erasure")
    store, run_dir = run.restore(), run.run_dir
    before = _state(store)
    _killed_apply_step(store, run_dir, point)
    assert_no_orphans_and_no_dangling_metadata(store)
    crashed = _state(store)
    # Each topic is wholly before or wholly after its switch: positions and counts never change either way.
    assert crashed["manifest"]["topics"].keys() == before["manifest"]["topics"].keys()
    for topic, body in before["manifest"]["topics"].items():
        after = crashed["manifest"]["topics"][topic]
        assert after["cursors"] == body["cursors"]
        assert [(x["ledgerId"], x["entries"]) for x in after["ledgers"]] == [
            (x["ledgerId"], x["entries"]) for x in body["ledgers"]
        ]
        switched = after["ledgers"] != body["ledgers"]
        if switched:
            assert after["ledgers"] == erasure_reference["manifest"]["topics"][topic]["ledgers"], topic

    apply_step(store, run_dir, purge_grace_seconds=GRACE)  # the retry of the same run
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _state(store) == erasure_reference
    assert all(ERASED_KEY not in keys for keys in _keys_in_force(capsys, store).values())
    assert [s for s in _runs(store).values()] == [{"started", "finished"}]
    # Whatever the crash left staged or replaced waits in the pending-deletion log; purge removes it all.
    _ok(capsys, "purge", "--store", str(store.root), "--as-of", PURGE_AS_OF)
    assert_no_orphans_and_no_dangling_metadata(store)
    assert _state(store)["entryFiles"] == erasure_reference["entryFiles"]
