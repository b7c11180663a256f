"""The gate re-derives safety from the snapshot: corrupted plans are blocked and nothing changes; a plan
changed after the gate passed is refused by apply; apply + purge remove exactly the planned ledgers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from housekeeping.core.errors import PlanNotValidated
from housekeeping.engine.apply import apply_plan
from housekeeping.engine.purge import purge
from housekeeping.mechanisms.steps import snapshot_step
from housekeeping.mechanisms.trim import MECHANISM as TRIM
from housekeeping.mechanisms.trim import actions as trim_actions
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store
from spark_apps import validate_plan
from spark_apps.trim import plan as plan_trim
from tests.conftest import rewrite_table, table_parts, topic_body, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

TOPIC = "persistent://acme/orders/a"
OTHER = "persistent://acme/orders/b"


def messages(ledgers):
    return [
        {"ledgerId": lid, "entryId": e, "publishTime": 1000 + e, "key": f"k{e}", "value": f"v{lid}-{e}"}
        for lid, n, _, _ in ledgers
        for e in range(n)
    ]


LEDGERS = [(1, 3, 6, 1000), (2, 3, 6, 2000), (3, 3, 6, 3000), (4, 3, 6, 4000), (5, 2, 4, None)]
DOC = {
    "namespaces": {"acme/orders": {}},
    "topics": {
        TOPIC: topic_body(
            LEDGERS,
            {
                "sub": "2:2",
                "slow": {"markDeletePosition": "3:2"},
                "reader": {"markDeletePosition": "1:0", "durable": False},
            },
            messages=messages(LEDGERS),
        ),
        # keeps the namespace's deleted share under the default blast radius
        OTHER: topic_body([(1, 1, 100, None)]),
    },
}


def snapshot(directory: Path) -> tuple[Store, Path]:
    store = load_manifest(directory / "store", write_manifest(directory, DOC))
    info = snapshot_step(store, "trim", run_id="t", as_of_ms=10_000, scope=None, max_deleted_share=0.9)
    return store, info.run_dir


@pytest.fixture(scope="module")
def genuine_plan(tmp_path_factory, spark) -> Path:
    """The planner's output for DOC, planned once: every store below is loaded from the same manifest, so its
    snapshot is the same and so is its plan (plan files hold no path and no run id)."""
    _, run_dir = snapshot(tmp_path_factory.mktemp("genuine"))
    plan_trim.run(spark, run_dir)
    return run_dir / "plan"


@pytest.fixture
def planned(tmp_path, genuine_plan):
    """A fresh store and its snapshot, with the genuine plan in its run directory."""
    store, run_dir = snapshot(tmp_path)
    shutil.copytree(genuine_plan, run_dir / "plan")
    return store, run_dir


def action_rows(run_dir: Path) -> list[dict]:
    return [
        json.loads(line)
        for text in table_parts(run_dir / "plan" / "actions").values()
        for line in text.splitlines()
    ]


def rewrite_actions(run_dir: Path, edit) -> None:
    rewrite_table(run_dir / "plan" / "actions", edit(action_rows(run_dir)))


def state(store: Store) -> tuple:
    files = sorted(str(p.relative_to(store.root)) for p in store.ledgers_root.rglob("*.parquet"))
    return export_manifest(store, with_messages=True)["topics"], files


def test_the_genuine_plan_passes(planned, spark):
    store, run_dir = planned
    assert [a["ledgerId"] for a in action_rows(run_dir) if a["action"] == "delete_ledger"] == [1, 2]
    assert validate_plan.run(spark, run_dir, "trim").success


def delete(ledger_id: int, size: int = 6):
    return {
        "topic": TOPIC,
        "action": "delete_ledger",
        "ledgerId": ledger_id,
        "bytes": size,
        "reason": "mutant",
    }


MUTANTS = {
    "deletes the current ledger": (lambda rows: rows + [delete(5, 4)], "not_current_ledger"),
    "deletes at the slowest durable mark-delete": (
        lambda rows: rows + [delete(3)],
        "no_durable_cursor_pins_it",
    ),
    "deletes past the slowest mark-delete": (lambda rows: rows + [delete(4)], "no_durable_cursor_pins_it"),
    "not an oldest prefix": (
        lambda rows: [r for r in rows if r.get("ledgerId") != 1],
        "contiguous_oldest_prefix",
    ),
    "bytes do not reconcile": (
        lambda rows: [dict(r, bytes=1) if r.get("ledgerId") == 1 else r for r in rows],
        "bytes_match_snapshot",
    ),
    "duplicate deletion": (lambda rows: rows + [delete(1)], "expect_compound_columns_to_be_unique"),
    "unknown ledger": (lambda rows: rows + [delete(77)], "ledger_in_snapshot"),
    "moves a cursor backward": (
        lambda rows: [dict(r, to="0:0") if r["action"] == "move_cursor" else r for r in rows],
        "moves_forward",
    ),
    "moves a durable cursor": (
        lambda rows: (
            rows
            + [
                {
                    "topic": TOPIC,
                    "action": "move_cursor",
                    "subscription": "slow",
                    "from": "3:2",
                    "to": "4:0",
                    "reason": "mutant",
                }
            ]
        ),
        "cursor_is_non_durable",
    ),
    "moves a cursor past the topic's end": (
        lambda rows: [dict(r, to="9:9") if r["action"] == "move_cursor" else r for r in rows],
        "not_past_last_entry",
    ),
    "moves a cursor before a ledger the topic does not have": (
        lambda rows: [dict(r, to="99:-1") if r["action"] == "move_cursor" else r for r in rows],
        "not_past_last_entry",
    ),
    "unknown action": (
        lambda rows: rows + [{"topic": TOPIC, "action": "delete_topic", "reason": "mutant"}],
        "expect_column_values_to_be_in_set",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_corrupted_plan_is_blocked_and_nothing_changes(planned, spark, name):
    store, run_dir = planned
    edit, failing = MUTANTS[name]
    before = state(store)
    rewrite_actions(run_dir, edit)
    document = validate_plan.run(spark, run_dir, "trim")
    assert not document.success
    failed = {f.expectation for f in document.failed} | {f.kwargs.get("column") for f in document.failed}
    assert failing in failed, document.failed
    with pytest.raises(PlanNotValidated):
        apply_plan(store, run_dir, TRIM, purge_grace_seconds=0)
    assert state(store) == before


def test_blast_radius_limit_blocks(tmp_path, spark):
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, DOC))
    info = snapshot_step(store, "trim", run_id="t", as_of_ms=10_000, scope=None, max_deleted_share=0.05)
    plan_trim.run(spark, info.run_dir)
    document = validate_plan.run(spark, info.run_dir, "trim")
    assert [f.kwargs["column"] for f in document.failed] == ["deleted_share"]


def test_plan_changed_after_the_gate_is_refused(planned, spark):
    store, run_dir = planned
    assert validate_plan.run(spark, run_dir, "trim").success
    before = state(store)
    rewrite_actions(run_dir, lambda rows: rows + [delete(3)])
    with pytest.raises(PlanNotValidated, match="changed after the gate"):
        apply_plan(store, run_dir, TRIM, purge_grace_seconds=0)
    assert state(store) == before


def test_apply_then_purge_removes_exactly_the_planned_ledgers(planned, spark):
    store, run_dir = planned
    assert validate_plan.run(spark, run_dir, "trim").success
    result = apply_plan(store, run_dir, TRIM, purge_grace_seconds=60)
    assert result.ledgers_deleted == 2 and result.counts["cursorsMoved"] == 1
    ledger_dir = store.ledger_dir(TOPIC, 1)
    assert ledger_dir.is_dir()  # metadata first; files wait for the grace period
    assert purge(store, as_of_ms=10_000 + 59_999, run_id="p").purged == []
    assert ledger_dir.is_dir()
    assert sorted(purge(store, as_of_ms=10_000 + 60_000, run_id="p").purged) == [(TOPIC, 1), (TOPIC, 2)]
    assert not ledger_dir.exists() and not store.ledger_dir(TOPIC, 2).exists()
    remaining = export_manifest(store, with_messages=True)["topics"][TOPIC]
    assert [m["ledgerId"] for m in remaining["messages"]] == [3, 3, 3, 4, 4, 4, 5, 5]
    assert remaining["cursors"]["reader"]["markDeletePosition"] == "2:2"
    # a second apply of the same run is a no-op
    again = apply_plan(store, run_dir, TRIM, purge_grace_seconds=60)
    assert again.ledgers_deleted == 0 and again.already_applied_topics == [TOPIC]


def test_topic_changed_since_the_snapshot_is_skipped_not_overwritten(planned, spark):
    from sqlalchemy import update

    from housekeeping.store import metadata_schema as t

    store, run_dir = planned
    assert validate_plan.run(spark, run_dir, "trim").success
    with store.engine.begin() as conn:  # a writer touched the topic after the snapshot
        conn.execute(update(t.topics).where(t.topics.c.name == TOPIC).values(version=t.topics.c.version + 1))
    before = state(store)
    result = apply_plan(store, run_dir, TRIM, purge_grace_seconds=0)
    assert result.ledgers_deleted == 0 and TOPIC in result.skipped_topics
    assert "changed since the snapshot" in result.skipped_topics[TOPIC]
    assert state(store) == before


def test_a_failure_inside_a_topics_transaction_changes_nothing(planned, spark, monkeypatch):
    store, run_dir = planned
    assert validate_plan.run(spark, run_dir, "trim").success
    before = state(store)
    calls = {"rows": 0}

    def fail_after_the_ledgers_left_the_list(conn, rows, **kwargs):
        # The trim apply deletes the topic's planned ledgers from the ledger list, then logs them for purge, in the
        # topic's transaction: fail the logging, after the deletion ran.
        calls["rows"] += len(rows)
        raise RuntimeError("simulated crash between deleting a topic's ledgers and logging them")

    monkeypatch.setattr(trim_actions, "record_pending_deletions", fail_after_the_ledgers_left_the_list)
    with pytest.raises(RuntimeError, match="simulated crash"):
        apply_plan(store, run_dir, TRIM, purge_grace_seconds=0)
    assert calls["rows"] == 2  # both ledgers had left the list when it failed
    assert state(store) == before  # their removal was rolled back with the topic's transaction
    monkeypatch.undo()
    assert (
        apply_plan(store, run_dir, TRIM, purge_grace_seconds=0).ledgers_deleted == 2
    )  # the rerun completes it
