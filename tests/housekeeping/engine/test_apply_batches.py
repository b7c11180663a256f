"""The shared apply commits many topics per metadata transaction (``HOUSEKEEPING_APPLY_BATCH_TOPICS``) and keeps each
topic's safety: its compare-and-set, its hold re-check and its journal row are its own, so a topic changed since the
snapshot is skipped while the others of its batch commit, and a failure rolls back its batch only."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select, update

from housekeeping.core.errors import InputError
from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.apply import apply_plan
from housekeeping.engine.contract import ACTIONS
from housekeeping.engine.documents import Intent, read_run_info, write_document
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.registry import get_mechanism
from housekeeping.mechanisms.steps import plan_and_gate_in_process, snapshot_step
from housekeeping.mechanisms.trim import actions as trim_actions
from housekeeping.store import metadata_schema as t
from housekeeping.store.generate import GenerateOptions, generate_store
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.store import Store, read_transaction
from tests.store_invariants import apply_batches, pending_and_journal

AS_OF = "2026-11-02T00:00:00Z"
TRIM = get_mechanism("trim")

pytestmark = [pytest.mark.spark, pytest.mark.runs]


@pytest.fixture(scope="module")
def planned_trim(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A generated store planned and gated for trim once, kept pristine: (pristine copy, where the run expects its
    store, run directory)."""
    base = tmp_path_factory.mktemp("apply-batches")
    root = base / "store"
    generate_store(root, GenerateOptions(14, 3, 40, 5, 60, "2026-11-01T00:00:00Z", False), None)
    store = Store.open(root)
    info = snapshot_step(store, "trim", run_id="batches", as_of_ms=parse_as_of(AS_OF), max_deleted_share=1.0)
    assert plan_and_gate_in_process(info.run_dir, "trim", "local[2]").success
    shutil.copytree(root, base / "pristine")
    return base / "pristine", root, info.run_dir


def _restore(planned_trim) -> tuple[Store, Path]:
    pristine, root, run_dir = planned_trim
    shutil.rmtree(root)
    shutil.copytree(pristine, root)
    return Store.open(root), run_dir


def _state(store: Store) -> tuple:
    with read_transaction(store.engine) as conn:
        ledgers = conn.execute(
            select(t.ledgers.c.topic, t.ledgers.c.ledger_id).order_by("topic", "ledger_id")
        ).all()
    pending, journal = pending_and_journal(store)
    cursors = {name: body["cursors"] for name, body in export_manifest(store)["topics"].items()}
    return ledgers, pending, journal, cursors


def _apply(store: Store, run_dir: Path, monkeypatch, batch: int) -> dict:
    monkeypatch.setenv("HOUSEKEEPING_APPLY_BATCH_TOPICS", str(batch))
    return apply_plan(store, run_dir, TRIM, purge_grace_seconds=60).to_json()


def test_batches_of_any_size_apply_what_one_topic_per_transaction_applies(planned_trim, monkeypatch):
    store, run_dir = _restore(planned_trim)
    one_by_one = _apply(store, run_dir, monkeypatch, 1)
    reference = _state(store)
    assert len(one_by_one["appliedTopics"]) >= 6, "the plan changes several topics"
    for batch in (4, 500):
        store, run_dir = _restore(planned_trim)
        assert _apply(store, run_dir, monkeypatch, batch) == one_by_one
        assert _state(store) == reference


def test_a_topic_changed_since_the_snapshot_is_skipped_and_its_batch_neighbours_commit(
    planned_trim, monkeypatch
):
    store, run_dir = _restore(planned_trim)
    reference = _apply(store, run_dir, monkeypatch, 1)
    applied = reference["appliedTopics"]
    changed = applied[len(applied) // 2]  # inside the one batch of 500 below
    store, run_dir = _restore(planned_trim)
    with store.engine.begin() as conn:  # a writer rolled a ledger of one topic after the snapshot
        conn.execute(
            update(t.topics).where(t.topics.c.name == changed).values(version=t.topics.c.version + 1)
        )
    result = _apply(store, run_dir, monkeypatch, 500)
    assert "changed since the snapshot" in result["skippedTopics"][changed]
    assert result["appliedTopics"] == [name for name in applied if name != changed]
    with read_transaction(store.engine) as conn:
        assert not conn.execute(
            select(t.pending_deletions).where(t.pending_deletions.c.topic == changed)
        ).all()
        statuses = (
            conn.execute(select(t.journal.c.status).where(t.journal.c.topic == changed)).scalars().all()
        )
    assert statuses == ["skipped_conflict"]


def test_a_topic_deleted_since_the_snapshot_is_skipped_and_its_batch_neighbours_commit(
    planned_trim, monkeypatch
):
    store, run_dir = _restore(planned_trim)
    applied = _apply(store, run_dir, monkeypatch, 1)["appliedTopics"]
    gone = applied[len(applied) // 2]
    store, run_dir = _restore(planned_trim)
    with store.engine.begin() as conn:  # deleted by another writer after the snapshot
        for table in (t.cursors, t.ledgers):
            conn.execute(table.delete().where(table.c.topic == gone))
        conn.execute(t.topics.delete().where(t.topics.c.name == gone))
    result = _apply(store, run_dir, monkeypatch, 500)
    assert result["skippedTopics"] == {gone: "topic no longer exists"}
    assert result["appliedTopics"] == [name for name in applied if name != gone]
    with read_transaction(store.engine) as conn:
        assert not conn.execute(select(t.topics).where(t.topics.c.name == gone)).all(), "not brought back"


def test_a_failure_rolls_back_its_batch_only_and_the_retry_completes(planned_trim, monkeypatch):
    store, run_dir = _restore(planned_trim)
    reference = _apply(store, run_dir, monkeypatch, 1)
    reference_state = _state(store)
    store, run_dir = _restore(planned_trim)
    first, second = apply_batches(run_dir, 4)[:2]
    failing = second[0]
    real = trim_actions.record_pending_deletions

    def fail_in_one_topic(conn, rows, **kwargs):
        if any(row["topic"] == failing for row in rows):
            raise RuntimeError(f"simulated failure in {failing}")
        return real(conn, rows, **kwargs)

    monkeypatch.setattr(trim_actions, "record_pending_deletions", fail_in_one_topic)
    with pytest.raises(RuntimeError, match="simulated failure"):
        _apply(store, run_dir, monkeypatch, 4)
    with read_transaction(store.engine) as conn:
        committed = set(
            conn.execute(select(t.journal.c.topic).where(t.journal.c.status == "applied")).scalars()
        )
    assert committed == set(first), "the first batch committed, the second not"
    monkeypatch.setattr(trim_actions, "record_pending_deletions", real)
    retried = _apply(store, run_dir, monkeypatch, 4)
    assert sorted(retried["alreadyAppliedTopics"]) == sorted(committed)
    assert sorted(retried["appliedTopics"] + retried["alreadyAppliedTopics"]) == sorted(
        reference["appliedTopics"]
    )
    assert _state(store)[:2] == reference_state[:2] and _state(store)[3] == reference_state[3]


@pytest.mark.parametrize("drift", ["ledger gone", "other bytes"])
def test_a_planned_ledger_not_as_the_plan_says_is_refused_and_rolls_back_its_batch(
    planned_trim, monkeypatch, drift
):
    """The batch's ledgers are deleted together at the end of its transaction; a planned ledger the metadata no
    longer holds, or holds with other bytes, while its topic's version did not change (a writer that broke the
    version rule), is refused naming the topic and the ledger, and nothing of that batch commits."""
    from housekeeping.core.errors import InputError
    from housekeeping.engine.plan import read_table

    store, run_dir = _restore(planned_trim)
    first, second = apply_batches(run_dir, 4)[:2]
    topic = second[-1]
    ledger_id, planned_bytes = next(
        (row["ledgerId"], row["bytes"])
        for row in read_table(run_dir, ACTIONS.name)
        if row["topic"] == topic and row["action"] == "delete_ledger"
    )
    key = (t.ledgers.c.topic == topic) & (t.ledgers.c.ledger_id == ledger_id)
    with store.engine.begin() as conn:
        if drift == "ledger gone":
            conn.execute(t.ledgers.delete().where(key))
        else:
            conn.execute(update(t.ledgers).where(key).values(size_bytes=planned_bytes + 1))
    expected = (
        f"topic {topic}: planned ledger {ledger_id} is not in the metadata"
        if drift == "ledger gone"
        else f"topic {topic}: ledger {ledger_id} holds {planned_bytes + 1} bytes, the plan says {planned_bytes}"
    )
    with pytest.raises(InputError, match=expected):
        _apply(store, run_dir, monkeypatch, 4)
    with read_transaction(store.engine) as conn:
        committed = set(
            conn.execute(select(t.journal.c.topic).where(t.journal.c.status == "applied")).scalars()
        )
        pending = set(conn.execute(select(t.pending_deletions.c.topic)).scalars())
        kept = conn.execute(select(t.ledgers.c.topic).where(t.ledgers.c.topic.in_(second))).scalars().all()
    assert committed == set(first) and pending <= set(first), "the first batch committed, the second not"
    assert set(kept) == set(second), "the second batch's ledgers are all still listed"


def test_a_batch_size_out_of_bounds_is_bad_input_and_changes_nothing(planned_trim, monkeypatch):
    from housekeeping.core.errors import InputError

    store, run_dir = _restore(planned_trim)
    before = _state(store)
    monkeypatch.setenv("HOUSEKEEPING_APPLY_BATCH_TOPICS", "0")
    with pytest.raises(InputError, match="HOUSEKEEPING_APPLY_BATCH_TOPICS must be >= 1"):
        apply_plan(store, run_dir, TRIM, purge_grace_seconds=60)
    assert _state(store) == before


def test_a_topic_not_in_the_snapshot_is_refused_before_any_part_is_applied(planned_trim, monkeypatch):
    """Apply's own precondition, whatever a gate let through: the topic is in the plan's last part, and the parts
    before it stay unapplied."""
    from housekeeping.core.errors import InputError
    from housekeeping.engine.plan import plan_digest

    store, run_dir = _restore(planned_trim)
    before = _state(store)
    ghost = "persistent://public/default/ghost"
    last = sorted(RunDir(run_dir).plan_table(ACTIONS).glob("part-*"))[-1]
    row = {"topic": ghost, "action": "delete_ledger", "ledgerId": 1, "bytes": 1, "reason": "not in the store"}
    with last.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
    gate = RunDir(run_dir).gate_result
    gate.write_text(json.dumps({**json.loads(gate.read_text()), "planDigest": plan_digest(run_dir)}))
    with pytest.raises(InputError, match=f"names topic {ghost}, which is not in its snapshot"):
        _apply(store, run_dir, monkeypatch, 1)
    after = _state(store)
    assert (after[0], after[1], after[3]) == (before[0], before[1], before[3]), "nothing applied"


@pytest.mark.parametrize("intent", [Intent.DRY_RUN, Intent.PREVIEW, Intent.PLAN, Intent.WHAT_IF])
def test_a_run_not_started_to_apply_is_refused_by_apply_and_nothing_changes(
    planned_trim, monkeypatch, intent
):
    """A dry run's (or a preview's, a plan's, a what-if's) run directory handed to apply, as a misrouted or hand-run
    step would: refused naming the run and its intent, before anything is journaled."""
    store, run_dir = _restore(planned_trim)
    info = read_run_info(run_dir)
    reason = "started 2220 s after its slot" if intent is Intent.PREVIEW else None
    write_document(RunDir(run_dir).run_info, replace(info, intent=intent, preview_reason=reason))
    before = _state(store)
    with pytest.raises(InputError, match=rf"was started as a {intent} run.*it applies nothing") as refused:
        _apply(store, run_dir, monkeypatch, 500)
    assert str(run_dir) in str(refused.value) and (reason is None or reason in str(refused.value))
    assert _state(store) == before
    assert not RunDir(run_dir).apply_result.exists()
    # The same directory started to apply does apply.
    write_document(RunDir(run_dir).run_info, replace(info, intent=Intent.APPLY))
    assert _apply(store, run_dir, monkeypatch, 500)["appliedTopics"]
