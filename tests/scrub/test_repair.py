"""The scrub's repair: orphans go to the pending-deletion log (never deleted by the run that found them), restore keeps
them byte for byte, purge frees them after the grace period and the next scrub verifies it; a hold keeps an orphan;
a repair killed between two orphans completes when its apply is retried (the DAG's retry) and when the scrub runs
again; writers and runs in flight during a scrub are never candidates."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select

from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store
from tests.conftest import REPO, iso, load_store, run_cli
from tests.scrub.test_scenarios import AS_OF, DAYS, MANIFEST, B, age, local, scrub
from tests.store_invariants import assert_no_orphans_and_no_dangling_metadata

pytestmark = [pytest.mark.spark, pytest.mark.runs]

SCRUB_POINTS = [
    "scrub_apply_between_orphans"
]  # tests/e2e/test_fault_injection.py checks every point is exercised


@pytest.fixture
def store(capsys, tmp_path, directory_tier):
    return load_store(capsys, tmp_path, MANIFEST)


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(item.name.encode() + item.read_bytes())
    return digest.hexdigest()


def _orphans(store: str) -> list:
    with Store.open(store).engine.connect() as conn:
        return list(
            conn.execute(
                select(t.pending_deletions)
                .where(t.pending_deletions.c.kind == "orphan")
                .order_by(t.pending_deletions.c.id)
            )
        )


def _make_orphans(store: str, tier) -> tuple[Path, str]:
    """A copy of B's ledger 2 as ledger 77 and a stray object under A, both five days old."""
    orphan_dir = Path(store, local(B, "77"))
    import shutil

    shutil.copytree(Path(store, local(B, "2")), orphan_dir)
    age(orphan_dir)
    key = f"persistent/t/ns/a/9-{uuid.uuid4()}.parquet"
    Path(tier.path(key)).write_bytes(b"PAR1 stray")
    age(Path(tier.path(key)))
    return orphan_dir, key


def test_repair_queues_restore_keeps_the_bytes_and_purge_frees(capsys, store, directory_tier, monkeypatch):
    orphan_dir, key = _make_orphans(store, directory_tier)
    before = _digest(orphan_dir)
    monkeypatch.setenv("HOUSEKEEPING_PURGE_GRACE_SECONDS", str(DAYS))

    code, document = scrub(capsys, store, "--repair")
    assert code == 1  # the run that found them reports them; nothing is deleted by it
    assert sorted(document["repair"]["orphansQueued"]) == [f"local:{local(B, '77')}", f"tier:{key}"]
    assert orphan_dir.is_dir() and Path(directory_tier.path(key)).is_file()
    rows = _orphans(store)
    assert sorted((r.path or r.tier_key, r.status) for r in rows) == sorted(
        [(local(B, "77"), "pending"), (key, "pending")]
    )
    assert all(r.purge_after_ms == AS_OF + DAYS * 1000 for r in rows)

    # Queued items are named by the pending-deletion log: no longer findings.
    code, document = scrub(capsys, store)
    assert code == 0, document["findings"]

    # Restore keeps the directory where it is, byte for byte, and the journal says so; later scrubs keep it.
    code, out, err = run_cli(capsys, "restore", B, "--ledger", "77", "--store", store, "--as-of", iso(AS_OF))
    assert code == 0, err
    assert _digest(orphan_dir) == before
    with Store.open(store).engine.connect() as conn:
        journaled = conn.execute(
            select(t.journal.c.action, t.journal.c.status).where(t.journal.c.mechanism == "restore")
        ).all()
        queued = conn.execute(select(t.journal.c.status).where(t.journal.c.action == "delete_orphan")).all()
    assert journaled == [("restore_orphans", "restored")] and len(queued) == 2

    # Purge after the grace period frees the object (the restored directory stays); the next scrub verifies it.
    code, out, err = run_cli(capsys, "purge", "--store", store, "--as-of", iso(AS_OF + 2 * DAYS * 1000))
    assert code == 0, err
    assert not Path(directory_tier.path(key)).exists() and _digest(orphan_dir) == before
    code, document = scrub(capsys, store, as_of=AS_OF + 2 * DAYS * 1000)
    assert code == 0, document["findings"]
    freed = document["summary"]["freed"]
    assert freed["purgedDeletions"] == 1 and freed["bytesVerifiedFreed"] == freed["bytesRecordedFreed"] == 10


def test_a_hold_keeps_an_orphan(capsys, store, directory_tier):
    orphan_dir, _ = _make_orphans(store, directory_tier)
    code, _, err = run_cli(capsys, "hold", "add", "t/ns", "--reason", "legal", "--store", store)
    assert code == 0, err
    code, document = scrub(capsys, store, "--repair")
    assert code == 1
    held = [f for f in document["findings"] if f["kind"] == "orphan"]
    assert len(held) == 2 and all(
        f["repair"] == "none" and "a hold on t/ns keeps it" in f["reason"] for f in held
    )
    assert document["repair"]["orphansQueued"] == [] and _orphans(store) == []


def test_a_repair_killed_between_two_orphans_completes(capsys, store, directory_tier):
    """SIGKILL after the first orphan is recorded: the store stays consistent (every file known to the metadata or an
    orphan), the retried apply of the same run records the other one only, a new scrub finds nothing left to do."""
    from housekeeping.mechanisms.steps import apply_step

    _make_orphans(store, directory_tier)
    env = {**os.environ, "HOUSEKEEPING_FAULT_POINT": SCRUB_POINTS[0]}
    killed = subprocess.run(
        [
            sys.executable,
            "-m",
            "housekeeping.cli",
            "scrub",
            "--store",
            store,
            "--repair",
            "--as-of",
            iso(AS_OF),
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert len(_orphans(store)) == 1
    run_dir = next(Path(store, "runs", "scrub").iterdir())
    result = apply_step(Store.open(store), run_dir)
    assert len(result["alreadyQueued"]) == 1 and len(result["orphansQueued"]) == 1
    assert len(_orphans(store)) == 2
    assert_no_orphans_and_no_dangling_metadata(Store.open(store))  # every item is known (to the log) again
    code, document = scrub(capsys, store, "--repair")
    assert code == 0 and document["repair"]["orphansQueued"] == []


def test_writers_and_runs_in_flight_are_never_candidates(capsys, store, directory_tier, monkeypatch):
    """While the scrub runs, a producer keeps appending and rolling ledgers (the files it writes are younger than the
    minimum age) and a compaction run stages a ledger (its staged row names it, whatever its age): none of it is a
    finding; an old orphan beside them is."""
    from housekeeping.store import clients
    from housekeeping.store.compacted_ledgers import PlannedLedger, stage

    opened = Store.open(store)
    orphan_dir, _ = _make_orphans(store, directory_tier)
    planned = PlannedLedger(B, None, None, (5, 9), 0, 0, None, None, 0, None)
    with opened.engine.begin() as conn:
        staged = stage(conn, planned, run_id="compaction-in-flight", as_of_ms=AS_OF, purge_after_ms=AS_OF)
    staged_dir = opened.ledger_dir(B, staged)
    staged_dir.mkdir(parents=True)
    (staged_dir / "part-00000.parquet").write_bytes(
        Path(store, local(B, "2"), "part-00000.parquet").read_bytes()
    )
    age(staged_dir)
    clients.connect_producer(opened, B, now_ms=AS_OF)
    stop = threading.Event()
    written: list[str] = []

    def produce() -> None:
        n = 0
        while not stop.is_set():
            written.extend(clients.publish(opened, B, [{"key": f"w{n}", "value": "x" * 50}], now_ms=AS_OF))
            n += 1
            if n % 5 == 0:
                clients.roll_ledger(opened, B, now_ms=AS_OF)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        code, document = scrub(capsys, store)
    finally:
        stop.set()
        writer.join()
    assert len(written) > 5, "the writer wrote during the scrub"
    assert {(f["kind"], f["path"]) for f in document["findings"] if f["severity"] == "error"} == {
        ("orphan", local(B, "77")),
        ("orphan", next(f["path"] for f in document["findings"] if f["location"] == "tier")),
    }
    assert orphan_dir.is_dir()
