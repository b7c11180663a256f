"""The soak's checker: silent on a store the load generator lived on and housekeeping trimmed, expired and evicted
as its rules allow; and each invariant caught when the store is made to break it (a checker that cannot fail checks
nothing)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import delete, insert, select, update

from housekeeping.core.timeutil import parse_as_of
from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, snapshot_step
from housekeeping.store import admin
from housekeeping.store import metadata_schema as t
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.simulate.log import SimulationLog
from housekeeping.store.simulate.run import simulate
from housekeeping.store.simulate.workload import Clock, Rollover, Workload
from housekeeping.store.store import read_transaction, write_transaction
from tests.conftest import write_manifest
from tests.soak.checker import check

START = parse_as_of("2026-11-02T00:00:00Z")
ROLLOVER = Rollover(max_entries=60, max_bytes=1 << 30, min_ms=30_000, max_ms=300_000)
WORKLOAD = Workload(
    duration_seconds=1800,
    seed=9,
    rate=1.0,
    batch=4,
    topics=4,
    subscriptions=2,
    stuck_share=0.0,
    lagging_share=0.5,
    max_lag=10,
    operations_per_minute=1,
    operations=(),
    payload_bytes=16,
    clock=Clock.SIMULATED,
    start_ms=START,
    progress_seconds=0,
)
END = START + WORKLOAD.duration_seconds * 1000
NAMESPACES = {
    "soak/short": {"retention_policies": {"retentionTimeInMinutes": 5, "retentionSizeInMB": -1}},
    "soak/forever": {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}},
    "soak/sized": {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": 1}},
}


def _closed_ledgers(store, topic: str, count: int) -> None:
    """A new topic with ``count`` closed ledgers of one entry each, a minute apart."""
    from housekeeping.store import clients

    clients.create_topic(store, topic, now_ms=START)
    clients.connect_producer(store, topic, now_ms=START)
    for i in range(count):
        clients.publish(store, topic, [{"value": f"v{i}"}], now_ms=START + i)
        clients.roll_ledger(store, topic, now_ms=START + 60_000 * (i + 1))


def _lived(tmp_path, name="store", workload=WORKLOAD):
    store = load_manifest(
        tmp_path / name, write_manifest(tmp_path, {"namespaces": NAMESPACES, "topics": {}}, f"{name}.json")
    )
    log = tmp_path / f"{name}.jsonl"
    simulate(store, workload, ROLLOVER, SimulationLog(log), progress=None, actor="test")
    return store, log


def _trimmed(store):
    """The topics with a ledger the log saw that trim would delete, and a cursor on them."""
    with read_transaction(store.engine) as conn:
        return sorted(
            {r.topic for r in conn.execute(select(t.ledgers).where(t.ledgers.c.closed_at_ms.is_not(None)))}
        )


@pytest.mark.unit
def test_a_store_nothing_deleted_from_is_clean(tmp_path):
    store, log = _lived(tmp_path)
    assert check(store, log) == []


@pytest.mark.spark
@pytest.mark.runs
def test_a_store_housekeeping_trimmed_by_its_rules_is_clean(tmp_path):
    store, log = _lived(tmp_path)
    info = snapshot_step(store, "trim", run_id="soak-trim", as_of_ms=END, actor="test")
    assert plan_and_gate_in_process(info.run_dir, "trim", "local[2]").success
    result = apply_step(store, info.run_dir, purge_grace_seconds=3600)
    assert result["ledgersDeleted"] > 0, "the short-retention namespace has consumed ledgers to trim"
    assert check(store, log) == []


@pytest.mark.unit
def test_a_ledger_gone_with_no_record_of_its_deletion_is_caught(tmp_path):
    store, log = _lived(tmp_path)
    with write_transaction(store.engine) as conn:
        victim = conn.execute(select(t.ledgers).where(t.ledgers.c.closed_at_ms.is_not(None)).limit(1)).one()
        conn.execute(
            delete(t.ledgers).where(
                t.ledgers.c.topic == victim.topic, t.ledgers.c.ledger_id == victim.ledger_id
            )
        )
    found = {(v.invariant, v.topic) for v in check(store, log)}
    assert ("deletion_not_restorable", victim.topic) in found


@pytest.mark.unit
def test_an_unacknowledged_entry_deleted_is_caught_even_when_the_deletion_is_journaled(tmp_path):
    store, log = _lived(tmp_path)
    with write_transaction(store.engine) as conn:
        cursor = conn.execute(select(t.cursors).where(t.cursors.c.durable.is_(True)).limit(1)).one()
        # Move the subscription back to its topic's start, then delete the first ledger as a trim would log it.
        first = conn.execute(
            select(t.ledgers)
            .where(t.ledgers.c.topic == cursor.topic)
            .order_by(t.ledgers.c.ledger_id)
            .limit(1)
        ).one()
        conn.execute(
            update(t.cursors)
            .where(t.cursors.c.topic == cursor.topic, t.cursors.c.name == cursor.name)
            .values(mark_delete_ledger=first.ledger_id, mark_delete_entry=-1)
        )
        _log_a_trim(conn, store, first)
    found = {v.invariant for v in check(store, log) if v.topic == cursor.topic}
    assert {"unacknowledged_lost", "cursor_in_deleted_ledger"} <= found


@pytest.mark.unit
def test_a_damaged_entry_is_caught(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    store, log = _lived(tmp_path)
    with read_transaction(store.engine) as conn:
        ledger = conn.execute(select(t.ledgers).where(t.ledgers.c.entries > 0).limit(1)).one()
    path = next(store.ledger_dir(ledger.topic, ledger.ledger_id, ledger.files_generation).glob("*.parquet"))
    table = pq.read_table(path)
    values = table.column("value").to_pylist()
    values[0] = b"tampered"
    pq.write_table(
        table.set_column(table.schema.get_field_index("value"), "value", pa.array(values, pa.binary())), path
    )
    assert any(v.invariant == "entry_damaged" and v.topic == ledger.topic for v in check(store, log))


@pytest.mark.unit
def test_a_trim_under_infinite_retention_is_caught_and_one_under_a_later_kept_policy_is_not(tmp_path):
    store, log = _lived(tmp_path)
    with write_transaction(store.engine) as conn:
        kept = conn.execute(
            select(t.ledgers)
            .where(
                t.ledgers.c.closed_at_ms.is_not(None), t.ledgers.c.topic.like("persistent://soak/forever/%")
            )
            .limit(1)
        ).one()
        _log_a_trim(conn, store, kept, recorded_at_ms=END)
    found = [v for v in check(store, log) if v.invariant == "retention_violated"]
    assert [v.topic for v in found] == [kept.topic]
    # The same deletion, with the namespace's retention set to infinite only after it was applied: not a violation.
    other, other_log = _lived(tmp_path, "later")
    with write_transaction(other.engine) as conn:
        short = conn.execute(
            select(t.ledgers)
            .where(t.ledgers.c.closed_at_ms.is_not(None), t.ledgers.c.topic.like("persistent://soak/short/%"))
            .order_by(t.ledgers.c.ledger_id)
            .limit(1)
        ).one()
        _log_a_trim(conn, other, short, recorded_at_ms=END)
    admin.set_policies(
        other,
        "soak/short",
        {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}},
        now_ms=END + 60_000,
    )
    assert [v for v in check(other, other_log) if v.invariant == "retention_violated"] == []


def _log_a_trim(conn, store, ledger, recorded_at_ms=END):
    """What trim's apply records for a ledger it deletes: the row goes, a pending deletion and a journal row."""
    row = {c: getattr(ledger, c) for c in ledger._fields}
    conn.execute(
        delete(t.ledgers).where(t.ledgers.c.topic == ledger.topic, t.ledgers.c.ledger_id == ledger.ledger_id)
    )
    conn.execute(
        insert(t.pending_deletions).values(
            topic=ledger.topic,
            ledger_id=ledger.ledger_id,
            path=store.ledger_rel_path(ledger.topic, ledger.ledger_id, ledger.files_generation),
            ledger_row=json.dumps(row),
            size_bytes=ledger.size_bytes,
            run_id="tampered-trim",
            deleted_as_of_ms=END,
            purge_after_ms=END + 3_600_000,
            status="pending",
        )
    )
    conn.execute(
        insert(t.journal).values(
            run_id="tampered-trim",
            mechanism="trim",
            topic=ledger.topic,
            action="delete_ledger",
            status="applied",
            detail="{}",
            as_of_ms=END,
            recorded_at_ms=recorded_at_ms,
        )
    )


@pytest.mark.unit
@pytest.mark.parametrize(("ledger_bytes", "violated"), [(1000, True), (600 * 1024, False)])
def test_a_trim_under_a_size_limit_is_judged_against_what_the_topic_held(tmp_path, ledger_bytes, violated):
    """Three closed ledgers on a topic kept forever by time and to 1 MB by size: deleting the oldest is a violation
    when the topic held 3 kB, and Pulsar's rule when it held 1.8 MB (over the limit before the deletion)."""

    store, log = _lived(tmp_path)
    topic = "persistent://soak/sized/t"
    _closed_ledgers(store, topic, 3)
    with write_transaction(store.engine) as conn:
        conn.execute(update(t.ledgers).where(t.ledgers.c.topic == topic).values(size_bytes=ledger_bytes))
        oldest = conn.execute(
            select(t.ledgers).where(t.ledgers.c.topic == topic).order_by(t.ledgers.c.ledger_id).limit(1)
        ).one()
        _log_a_trim(conn, store, oldest)
    found = [v for v in check(store, log) if v.invariant == "retention_violated" and v.topic == topic]
    assert bool(found) is violated, found


@pytest.mark.unit
def test_a_system_topic_keeps_nothing_whatever_its_namespace_retention(tmp_path):
    """Pulsar gives a system topic without a topic-level retention (0, 0), not its namespace's: trimming
    __change_events in a namespace kept forever by time is no violation, an ordinary topic's would be."""

    store, log = _lived(tmp_path)
    found = {}
    for topic in ("persistent://soak/sized/__change_events", "persistent://soak/sized/ordinary"):
        _closed_ledgers(store, topic, 2)
        with write_transaction(store.engine) as conn:
            oldest = conn.execute(
                select(t.ledgers).where(t.ledgers.c.topic == topic).order_by(t.ledgers.c.ledger_id).limit(1)
            ).one()
            _log_a_trim(conn, store, oldest)
        found[topic] = [
            v for v in check(store, log) if v.invariant == "retention_violated" and v.topic == topic
        ]
    assert found["persistent://soak/sized/__change_events"] == []
    assert found["persistent://soak/sized/ordinary"], found
