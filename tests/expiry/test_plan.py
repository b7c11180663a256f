"""Message-expiry rule edges (docs/semantics.md §4) through snapshot -> Spark plan -> GX gate -> apply,
on stores loaded from manifests with real entries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from housekeeping.core.errors import PlanNotValidated
from housekeeping.engine.apply import apply_plan
from housekeeping.engine.plan import read_table
from housekeeping.mechanisms.expiry import MECHANISM as EXPIRY
from housekeeping.mechanisms.registry import get_mechanism
from housekeeping.mechanisms.steps import plan_and_gate_in_process, snapshot_step
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from tests.conftest import ledger_topic, write_manifest

pytestmark = pytest.mark.spark

AS_OF = 10_000_000_000
TTL = 3600
CUTOFF = AS_OF - TTL * 1000
NS = "t/n"


def build(tmp_path: Path, topics: dict, broker: dict | None = None):
    document = {
        "broker": broker or {},
        "namespaces": {NS: {"message_ttl_in_seconds": TTL}},
        "topics": {f"persistent://{NS}/{name}": body for name, body in topics.items()},
    }
    return load_manifest(tmp_path / "store", write_manifest(tmp_path, document))


def plan(store, tmp_path: Path, name: str = "run"):
    run_dir = tmp_path / name
    shutil.rmtree(run_dir, ignore_errors=True)
    snapshot_step(store, "expiry", run_id=name, as_of_ms=AS_OF, run_dir=run_dir)
    gate = plan_and_gate_in_process(run_dir, "expiry", "local[2]")
    subs = {
        (r["topic"].rsplit("/", 1)[1], r["subscription"]): r for r in read_table(run_dir, "subscriptions")
    }
    summary = json.loads((run_dir / "plan" / "summary.json").read_text())
    return run_dir, gate, subs, summary


@pytest.mark.runs
def test_rule_edges(spark, tmp_path):
    open_ts = AS_OF - 60_000
    store = build(
        tmp_path,
        {
            # strictness: CUTOFF - 1 is expired, CUTOFF is not (MessageImpl#isEntryExpired: now > ts + ttl)
            "boundary": ledger_topic(
                [(1, [CUTOFF - 2, CUTOFF - 1, CUTOFF, CUTOFF - 5], None)],
                {"s": {"markDeletePosition": "1:-1"}},
            ),
            # ledger-closure shortcut: closed before the cutoff, so expired although publish times look young
            "shortcut": ledger_topic(
                [(1, [AS_OF] * 3, CUTOFF - 1), (2, [open_ts] * 2, None)],
                {"s": {"markDeletePosition": "1:-1"}},
            ),
            # out of order: a young entry between old ones stops the cursor right before it
            "disorder": ledger_topic(
                [(1, [CUTOFF - 900, CUTOFF - 800, open_ts, CUTOFF - 700, CUTOFF - 600], None)],
                {"s": {"markDeletePosition": "1:-1"}},
            ),
            "special": ledger_topic(
                [(1, [CUTOFF - 10] * 3, None)],
                {
                    "__compaction": {"markDeletePosition": "1:-1"},
                    "reader": {"markDeletePosition": "1:-1", "durable": False},
                    "caught-up": {"markDeletePosition": "1:2"},
                },
            ),
            "guarded": ledger_topic(
                [(1, [AS_OF - int(1.5 * TTL * 1000), CUTOFF - 5, open_ts], None)],
                {
                    "busy": {"markDeletePosition": "1:-1", "consumers": 2},
                    "idle": {"markDeletePosition": "1:-1"},
                },
            ),
        },
    )
    run_dir, gate, subs, summary = plan(store, tmp_path)
    assert gate.success, gate.failed
    assert subs[("boundary", "s")]["to"] == "1:1"
    assert subs[("shortcut", "s")]["to"] == "1:2"
    assert subs[("disorder", "s")]["to"] == "1:1", "never past the unexpired entry 1:2 (Pulsar may ack it)"
    assert subs[("special", "__compaction")]["kind"] == "compaction_subscription"
    assert subs[("special", "caught-up")]["kind"] == "no_backlog"
    assert ("special", "reader") not in subs, "readers are not subscriptions TTL acknowledges"
    # Pulsar's guard: connected consumers, backlog < 1000 and the oldest entry exactly 1.5 x TTL old (not older)
    assert subs[("guarded", "busy")]["kind"] == "guard_consumers_connected"
    assert subs[("guarded", "idle")]["to"] == "1:1"
    assert summary["cursorsToMove"] == 4
    # oldest remaining backlog for every subscription, read or not: the ledgers' minimum timestamp after the move
    assert subs[("special", "__compaction")]["oldestRemainingLedgerTsMs"] == CUTOFF - 10
    assert subs[("boundary", "s")]["oldestRemainingLedgerTsMs"] == CUTOFF - 5
    assert subs[("shortcut", "s")]["oldestRemainingLedgerTsMs"] == open_ts, "ledger 1 is wholly acknowledged"
    assert "oldestRemainingLedgerTsMs" not in subs[("special", "caught-up")], "no backlog, no age"
    report = get_mechanism("expiry").build_report(run_dir, dry_run=True)
    kept = {(s["topic"].rsplit("/", 1)[1], s["subscription"]): s for s in report["keptWithBacklog"]}
    compaction = kept[("special", "__compaction")]
    assert not compaction["oldestRemainingExact"] and compaction["oldestRemainingAgeSeconds"] == TTL


@pytest.mark.runs
def test_reads_only_the_straddling_ledgers(spark, tmp_path):
    old = [CUTOFF - 10_000 - i for i in range(5)]
    ledgers = [
        (k, old, None) for k in range(1, 9)
    ]  # stats say 1..8 are wholly expired (no close time needed)
    ledgers = [(k, stamps, CUTOFF + 1) for k, stamps, _ in ledgers]  # closed after the cutoff: no shortcut
    ledgers += [(9, [CUTOFF - 1, CUTOFF + 5, CUTOFF - 2], CUTOFF + 10), (10, [AS_OF - 1], None)]
    store = build(tmp_path, {"long": ledger_topic(ledgers, {"s": {"markDeletePosition": "1:-1"}})})
    _, gate, subs, summary = plan(store, tmp_path)
    assert gate.success
    assert subs[("long", "s")]["to"] == "9:0"
    assert summary["reads"]["ledgersRead"] == 1 and summary["reads"]["ledgersStored"] == 10


@pytest.mark.runs
def test_apply_keeps_a_newer_ack_and_a_tampered_plan_is_refused(spark, tmp_path):
    stamps = [CUTOFF - 100 + i for i in range(10)]
    store = build(
        tmp_path,
        {
            "acked": ledger_topic(
                [(1, stamps, CUTOFF - 1), (2, [AS_OF - 5] * 3, None)], {"s": {"markDeletePosition": "1:-1"}}
            ),
            "lagging": ledger_topic(
                [(1, stamps, CUTOFF - 1), (2, [AS_OF - 5] * 3, None)], {"s": {"markDeletePosition": "1:-1"}}
            ),
        },
    )
    run_dir, gate, subs, _ = plan(store, tmp_path)
    assert gate.success and subs[("acked", "s")]["to"] == "1:9"
    from sqlalchemy import update

    from housekeeping.store import metadata_schema as t

    # a consumer acknowledges past the planned target between plan and apply
    with store.engine.begin() as conn:
        conn.execute(
            update(t.cursors)
            .where(t.cursors.c.topic == f"persistent://{NS}/acked")
            .values(mark_delete_ledger=2, mark_delete_entry=1)
        )
    result = apply_plan(store, run_dir, EXPIRY, purge_grace_seconds=0)
    assert result.counts["cursorsMoved"] == 1 and result.counts["cursorsAlreadyFurther"] == 1
    cursors = {
        name: body["cursors"]["s"]["markDeletePosition"]
        for name, body in export_manifest(store)["topics"].items()
    }
    assert cursors[f"persistent://{NS}/acked"] == "2:1", "the newer ack is never overwritten"
    assert cursors[f"persistent://{NS}/lagging"] == "1:9"

    # a plan edited after the gate signed it is refused, nothing changes
    run_dir, gate, _, _ = plan(store, tmp_path, "second")
    actions = next((run_dir / "plan" / "actions").glob("part-*"))
    actions.write_text(
        actions.read_text()
        + json.dumps(
            {
                "topic": f"persistent://{NS}/acked",
                "action": "move_cursor",
                "subscription": "s",
                "from": "2:1",
                "to": "2:2",
                "reason": "x",
            }
        )
        + "\n"
    )
    before = export_manifest(store)["topics"]
    with pytest.raises(PlanNotValidated):
        apply_plan(store, run_dir, EXPIRY, purge_grace_seconds=0)
    assert export_manifest(store)["topics"] == before


@pytest.mark.runs
def test_a_damaged_ledger_the_search_reads_is_named_by_the_plan_and_by_the_gate(spark, tmp_path):
    """The search reads the straddling ledger inside a Spark task: a damaged file there is still bad input naming
    the topic, the ledger and the file, raised before anything is written; the gate, reading it again, too."""
    from housekeeping.core.errors import InputError
    from housekeeping.engine import launcher

    topic = f"persistent://{NS}/x"
    store = build(
        tmp_path,
        {"x": ledger_topic([(1, [CUTOFF - 2, CUTOFF + 1], None)], {"s": {"markDeletePosition": "1:-1"}})},
    )
    run_dir, gate, subs, _ = plan(store, tmp_path)
    assert gate.success and subs[("x", "s")]["to"] == "1:0"
    part = sorted(store.ledger_dir(topic, 1).glob("*.parquet"))[0]
    good = part.read_bytes()
    part.write_bytes(b"PAR1 this is not a parquet file PAR1")
    with pytest.raises(InputError, match=f"topic {topic} ledger 1: {part} is not a readable Parquet file"):
        launcher.gate_in_process(spark, run_dir, EXPIRY)
    with pytest.raises(InputError, match=f"topic {topic} ledger 1: {part} is not a readable Parquet file"):
        plan(store, tmp_path, "damaged")
    assert not (tmp_path / "damaged" / "plan" / "summary.json").exists()
    part.write_bytes(good)
