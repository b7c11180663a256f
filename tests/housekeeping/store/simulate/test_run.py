"""The simulation on a store, on the simulated clock (minutes of a store's life in seconds, no sleep): what its log
says happened is what the store holds, read back independently of the simulation's own bookkeeping; its choices
follow from its seed; ledgers roll by Pulsar's rule; what it connected and held it leaves released."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from sqlalchemy import select

from housekeeping.core.errors import InputError
from housekeeping.core.policies import BrokerConfig
from housekeeping.core.timeutil import parse_as_of
from housekeeping.store import metadata_schema as t
from housekeeping.store.entries import read_ledger
from housekeeping.store.holds import list_holds
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.simulate.log import SimulationLog, checksum
from housekeeping.store.simulate.run import simulate
from housekeeping.store.simulate.workload import Clock, Operation, Rollover, Workload
from housekeeping.store.store import read_transaction
from tests.conftest import write_manifest

pytestmark = pytest.mark.unit

START = parse_as_of("2026-11-02T00:00:00Z")
ROLLOVER = Rollover(max_entries=100, max_bytes=1 << 30, min_ms=30_000, max_ms=180_000)
WORKLOAD = Workload(
    duration_seconds=600,
    seed=5,
    rate=2.0,
    batch=4,
    topics=4,
    subscriptions=2,
    stuck_share=0.25,
    lagging_share=0.25,
    max_lag=20,
    operations_per_minute=12,
    payload_bytes=32,
    reset_back_seconds=120,
    clock=Clock.SIMULATED,
    start_ms=START,
    progress_seconds=0,
)
OPERATION_EVENTS = {op.value for op in Operation}


def _store(tmp_path, name):
    document = {"namespaces": {"sim/a": {}, "sim/b": {}}, "topics": {}}
    return load_manifest(tmp_path / name, write_manifest(tmp_path, document, f"{name}.json"))


def _run(tmp_path, name, workload=WORKLOAD):
    store = _store(tmp_path, name)
    log_path = tmp_path / f"{name}.jsonl"
    summary = simulate(store, workload, ROLLOVER, SimulationLog(log_path), progress=None, actor="test")
    events = [json.loads(line) for line in log_path.read_text().splitlines()]
    return store, summary, events


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("simulate"), "store")


def test_every_entry_the_log_says_was_published_is_in_the_store_with_its_payload(simulated):
    store, summary, events = simulated
    deleted = {e["topic"] for e in events if e["event"] == "delete-topic"}
    logged = {
        (e["topic"], position): crc
        for e in events
        if e["event"] == "publish" and e["topic"] not in deleted
        for position, crc in e["entries"]
    }
    assert len(logged) > 300
    stored = {}
    with read_transaction(store.engine) as conn:
        ledgers = list(conn.execute(select(t.ledgers).where(t.ledgers.c.entries > 0)))
    for ledger in ledgers:
        table = read_ledger(store.ledger_dir(ledger.topic, ledger.ledger_id, ledger.files_generation))
        assert sorted(table.column("entryId").to_pylist()) == list(range(ledger.entries))
        for entry_id, value in zip(
            table.column("entryId").to_pylist(), table.column("value").to_pylist(), strict=True
        ):
            stored[(ledger.topic, f"{ledger.ledger_id}:{entry_id}")] = checksum(value.decode())
    assert logged == stored
    assert summary["published"]["entries"] == sum(
        len(e["entries"]) for e in events if e["event"] == "publish"
    )


def test_ledgers_roll_by_entries_and_time_as_a_broker_does(simulated):
    store, summary, events = simulated
    rolls = [e for e in events if e["event"] == "roll"]
    assert summary["ledgersRolled"] == len(rolls) > 10
    with read_transaction(store.engine) as conn:
        closed = {
            (r.topic, r.ledger_id): r.entries
            for r in conn.execute(select(t.ledgers).where(t.ledgers.c.closed_at_ms.is_not(None)))
        }
    assert closed and max(closed.values()) <= ROLLOVER.max_entries
    by_entries = [r for r in rolls if closed.get((r["topic"], r["closed"])) == ROLLOVER.max_entries]
    assert by_entries, "some ledgers fill up and roll at the entry limit"
    opened: dict[str, int] = {}
    for event in events:
        if event["event"] == "roll":
            if event["topic"] in opened:  # each ledger it opened was open longer than the minimum
                assert event["at"] - opened[event["topic"]] > ROLLOVER.min_ms
                assert event["at"] - opened[event["topic"]] <= ROLLOVER.max_ms * 1.05 + 1000
            opened[event["topic"]] = event["at"]


def test_cursors_are_where_the_last_acknowledgement_or_reset_left_them(simulated):
    store, _, events = simulated
    profile, last = {}, {}
    for event in events:
        key = (event.get("topic"), event.get("subscription"))
        if event["event"] == "subscribe":
            profile[key] = event["profile"]
            last[key] = event["markDelete"]
        elif event["event"] in ("ack", "reset-cursor"):
            last[key] = event["markDelete"]
        elif event["event"] == "unsubscribe":
            del last[key]
        elif event["event"] == "delete-topic":
            last = {k: v for k, v in last.items() if k[0] != event["topic"]}
    with read_transaction(store.engine) as conn:
        cursors = {
            (r.topic, r.name): f"{r.mark_delete_ledger}:{r.mark_delete_entry}"
            for r in conn.execute(select(t.cursors))
        }
    assert cursors == last
    acked = {(e["topic"], e["subscription"]) for e in events if e["event"] == "ack"}
    stuck = {k for k, p in profile.items() if p == "stuck"}
    assert stuck and not acked & stuck, "a stuck subscription never acknowledges"
    assert {k for k, p in profile.items() if p != "stuck"} & acked


def test_operator_changes_are_made_counted_and_journaled(simulated):
    store, summary, events = simulated
    made = Counter(e["event"] for e in events if e["event"] in OPERATION_EVENTS)
    done = Counter({kind: counts["done"] for kind, counts in summary["operations"].items()})
    assert {"subscribe", "reset-cursor", "set-policies", "hold", "create-topic", "delete-topic"} <= set(+done)
    # Beyond the operations it drew: the four topics it created to start with (the store had none), the two
    # subscriptions on each topic it drove, and the holds it still had, released at its end.
    started = WORKLOAD.topics
    setup = Counter(
        {
            "create-topic": started,
            "subscribe": WORKLOAD.subscriptions * (started + done["create-topic"]),
            "release": sum(1 for e in events if e["event"] == "hold") - done["release"],
        }
    )
    assert made == done + setup
    with read_transaction(store.engine) as conn:
        journaled = Counter(
            r.action for r in conn.execute(select(t.journal).where(t.journal.c.mechanism == "admin"))
        )
    assert journaled["set-policies"] == done["set-policies"]
    assert journaled["reset-cursor"] == done["reset-cursor"]


def test_it_leaves_no_client_connected_and_no_hold_of_its_own(simulated):
    store, _, _ = simulated
    with read_transaction(store.engine) as conn:
        assert list(conn.execute(select(t.topics.c.name).where(t.topics.c.producers != 0))) == []
        assert list(conn.execute(select(t.topics.c.name).where(t.topics.c.consumers != 0))) == []
        assert list(conn.execute(select(t.cursors.c.name).where(t.cursors.c.consumers != 0))) == []
    assert list_holds(store) == []


def _choices(events):
    """The events without the publish calls' measured latency (the machine's, not the seed's)."""
    return [{k: v for k, v in e.items() if k != "ms"} for e in events]


def test_the_same_seed_makes_the_same_choices(tmp_path):
    short = Workload(**{**WORKLOAD.__dict__, "duration_seconds": 120})
    _, _, events = _run(tmp_path, "first", short)
    _, _, again = _run(tmp_path, "again", short)
    assert _choices(again) == _choices(events)
    assert all(e["ms"] > 0 for e in events if e["event"] == "publish")
    _, _, other = _run(tmp_path, "other", Workload(**{**short.__dict__, "seed": 6}))
    assert _choices(other) != _choices(events)


def test_topics_in_scope_that_a_producer_cannot_append_to_are_left_alone(tmp_path):
    store = _store(tmp_path, "scoped")
    workload = Workload(**{**WORKLOAD.__dict__, "scope": ("nowhere",), "duration_seconds": 5})
    with pytest.raises(InputError, match="no namespace in that scope to create the other 4 in"):
        simulate(store, workload, ROLLOVER, SimulationLog(None), progress=None)
    with read_transaction(store.engine) as conn:
        assert list(conn.execute(select(t.topics.c.name))) == []


def test_a_scope_keeps_it_to_its_namespaces(tmp_path):
    workload = Workload(**{**WORKLOAD.__dict__, "scope": ("sim/b",), "duration_seconds": 60})
    store, _, events = _run(tmp_path, "only-b", workload)
    touched = {e["topic"] for e in events if "topic" in e}
    assert touched and all(topic.startswith("persistent://sim/b/") for topic in touched)
    targets = {e["target"] for e in events if "target" in e}
    assert all(target.startswith(("sim/b", "persistent://sim/b/")) for target in targets)


def test_the_broker_settings_are_the_rollover_default():
    assert Rollover.of(BrokerConfig.from_layers()).max_entries == 50_000
