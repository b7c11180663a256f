"""Races: all five mechanisms' apply steps at once on one store, while a simulated writer appends entries and
rolls ledgers and a simulated consumer acknowledges, round after round with random interleavings (each thread
sleeps a random jitter between operations, from a per-round seed printed on failure).

Each round plans all five mechanisms from the store as it is (as the five DAGs would on one schedule tick),
then starts the five applies, the writer and the consumer together. After every round:

- no lost cursor update: every acknowledgement the consumer committed is at or behind the cursor now;
- nothing deleted at or after a durable mark-delete bound: every ledger trim deleted in the round was closed
  and fully consumed by every durable subscription of its topic (cursors never move backward, so what holds
  now held at deletion);
- the current ledger is never deleted (a deleted ledger always had a close time);
- topic versions only grow (sampled throughout the round by the consumer, and before/after);
- no orphan file, no dangling metadata; every stored ledger's files are readable Parquet.

Each backend of the metadata database is raced: SQLite (one writer at a time, WAL) and a real PostgreSQL server
(row locks, READ COMMITTED writers, REPEATABLE READ snapshots). CI size: HOUSEKEEPING_RACE_ROUNDS rounds per
backend (default 1); opt-in e.g. HOUSEKEEPING_RACE_ROUNDS=25.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from housekeeping.core.errors import HousekeepingError
from housekeeping.core.positions import format_position
from housekeeping.core.timeutil import format_ms, parse_as_of
from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, snapshot_step
from housekeeping.store import clients
from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store, read_transaction
from tests.store_invariants import assert_no_orphans_and_no_dangling_metadata

pytestmark = [pytest.mark.spark, pytest.mark.processes, pytest.mark.runs]

ROUNDS = int(os.environ.get("HOUSEKEEPING_RACE_ROUNDS", "1"))
BASE_SEED = int(os.environ.get("HOUSEKEEPING_RACE_SEED", "20261122"))
START_MS = parse_as_of("2026-11-02T00:00:00Z")
HOUR = 3_600_000
MECHANISMS = ("trim", "expiry", "backlog", "gc", "compaction")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request, tmp_path_factory) -> Store:
    from housekeeping.store.generate import GenerateOptions, generate_store

    root = tmp_path_factory.mktemp(f"races-{request.param}") / "store"
    url = (
        request.getfixturevalue("postgres_server").create_database()
        if request.param == "postgresql"
        else None
    )
    return generate_store(root, GenerateOptions(24, 11, 30, 6, 40, "2026-11-01T00:00:00Z", False), url)


def _versions(store: Store) -> dict[str, int]:
    with read_transaction(store.engine) as conn:
        return {r.name: r.version for r in conn.execute(select(t.topics.c.name, t.topics.c.version))}


def _durable_cursors(store: Store) -> list[tuple[str, str]]:
    with read_transaction(store.engine) as conn:
        rows = conn.execute(select(t.cursors.c.topic, t.cursors.c.name).where(t.cursors.c.durable)).all()
    return [(r.topic, r.name) for r in rows if r.name != "__compaction"]


def _plan_all(store: Store, round_no: int, as_of_ms: int) -> dict[str, Path]:
    topics = _versions(store)
    keyed = sorted(name for name in topics if "/globex/tables/" in name)
    run_dirs = {}
    for mechanism in MECHANISMS:
        info = snapshot_step(
            store,
            mechanism,
            run_id=f"race-{round_no}-{mechanism}",
            as_of_ms=as_of_ms,
            max_deleted_share=1.0,
            max_deleted_topic_share=1.0,
            compact_topics=keyed if mechanism == "compaction" else (),
        )
        gate = plan_and_gate_in_process(info.run_dir, mechanism, "local[2]")
        assert gate.success, f"round {round_no} {mechanism}: {gate.describe_failures()}"
        run_dirs[mechanism] = info.run_dir
    return run_dirs


class Round:
    """One round's concurrent actors and what they observed."""

    def __init__(self, store: Store, seed: int, as_of_ms: int) -> None:
        self.store = store
        self.seed = seed
        self.now_ms = as_of_ms
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.acks: list[tuple[str, str, tuple[int, int]]] = []
        self.version_samples: dict[str, int] = {}
        self.non_monotone: list[str] = []
        self.writes = self.rolls = 0

    def guarded(self, target, *args):
        def run():
            try:
                target(*args)
            except BaseException as exc:  # surfaced by the test after join
                self.errors.append(exc)

        return threading.Thread(target=run, daemon=True)

    def apply(self, run_dir: Path, rng: random.Random) -> None:
        time.sleep(rng.uniform(0, 0.5))
        apply_step(self.store, run_dir, purge_grace_seconds=3600)

    def writer(self, topics: list[str], rng: random.Random) -> None:
        connected = []
        for topic in topics:
            try:
                clients.connect_producer(self.store, topic, now_ms=self.now_ms)
                connected.append(topic)
            except HousekeepingError:
                pass  # deleted by GC meanwhile
        while not self.stop.is_set():
            topic = rng.choice(connected)
            try:
                if rng.random() < 0.25:
                    clients.roll_ledger(self.store, topic, now_ms=self.now_ms)
                    self.rolls += 1
                else:
                    batch = [
                        {"key": f"k{rng.randrange(8)}", "value": f"v{rng.random():.6f}"} for _ in range(3)
                    ]
                    clients.publish(self.store, topic, batch, now_ms=self.now_ms)
                    self.writes += 1
            except HousekeepingError:
                pass
            time.sleep(rng.uniform(0, 0.05))
        for topic in connected:
            try:
                clients.disconnect_producer(self.store, topic, now_ms=self.now_ms)
            except HousekeepingError:
                pass

    def consumer(self, rng: random.Random) -> None:
        while not self.stop.is_set():
            cursors = _durable_cursors(self.store)
            if cursors:
                topic, name = rng.choice(cursors)
                try:
                    with read_transaction(self.store.engine) as conn:
                        cursor = conn.execute(
                            select(t.cursors).where((t.cursors.c.topic == topic) & (t.cursors.c.name == name))
                        ).first()
                        last = clients.last_entry(conn, topic)
                    if cursor is not None and last is not None:
                        start = (cursor.mark_delete_ledger, cursor.mark_delete_entry)
                        target = (
                            last if rng.random() < 0.3 else max(start, (last[0], rng.randrange(last[1] + 1)))
                        )
                        done = clients.acknowledge(
                            self.store, topic, name, format_position(target), now_ms=self.now_ms
                        )
                        ledger, entry = (int(x) for x in done.split(":"))
                        self.acks.append((topic, name, (ledger, entry)))
                except HousekeepingError:
                    pass  # topic or subscription deleted meanwhile
            for topic, version in _versions(self.store).items():
                if version < self.version_samples.get(topic, version):
                    self.non_monotone.append(f"{topic}: {self.version_samples[topic]} -> {version}")
                self.version_samples[topic] = version
            time.sleep(rng.uniform(0, 0.05))


def _check_round(store: Store, race: Round, versions_before: dict[str, int], run_ids: list[str]) -> dict:
    assert not race.errors, race.errors
    assert not race.non_monotone, race.non_monotone
    versions_after = _versions(store)
    assert all(versions_after[n] >= v for n, v in versions_before.items() if n in versions_after)

    with read_transaction(store.engine) as conn:
        cursors = {(r.topic, r.name): r for r in conn.execute(select(t.cursors))}
        pending = conn.execute(select(t.pending_deletions)).all()
    lost = [
        f"{topic} {name} acked {ack} but is at {(c.mark_delete_ledger, c.mark_delete_entry)}"
        for topic, name, ack in race.acks
        if (c := cursors.get((topic, name))) is not None and (c.mark_delete_ledger, c.mark_delete_entry) < ack
    ]
    assert not lost, lost[:5]

    deleted_this_round = [
        row
        for row in pending
        if row.kind == "ledger" and any(row.run_id.startswith(f"{r}@") for r in run_ids)
    ]
    for row in deleted_this_round:
        if not row.run_id.startswith(f"{run_ids[0]}@"):
            continue  # inactive-topic GC deletes a whole topic, its current ledger included
        ledger = json.loads(row.ledger_row)
        assert ledger["closed_at_ms"] is not None, (
            f"{row.topic}: the current ledger {row.ledger_id} was deleted"
        )
        # Every durable subscription had consumed it.
        last = (row.ledger_id, ledger["entries"] - 1)
        for (topic, name), c in cursors.items():
            if topic == row.topic and c.durable:
                assert (c.mark_delete_ledger, c.mark_delete_entry) >= last, (
                    f"{topic}: trim deleted ledger {row.ledger_id} but durable subscription {name!r} "
                    f"is at {c.mark_delete_ledger}:{c.mark_delete_entry}"
                )
    assert_no_orphans_and_no_dangling_metadata(store)
    from housekeeping.store.entries import check_ledger_files

    with read_transaction(store.engine) as conn:
        stored = conn.execute(select(t.ledgers).where(t.ledgers.c.entries_stored)).all()
    for row in stored:
        check_ledger_files(row.topic, row.ledger_id, store.ledger_dir(row.topic, row.ledger_id))
    return {
        "deleted": len(deleted_this_round),
        "acks": len(race.acks),
        "writes": race.writes,
        "rolls": race.rolls,
    }


def test_five_applies_race_a_writer_and_a_consumer_without_losing_anything(store, capsys):
    totals = {"deleted": 0, "acks": 0, "writes": 0, "rolls": 0}
    for round_no in range(ROUNDS):
        seed = BASE_SEED + round_no
        rng = random.Random(seed)
        as_of_ms = START_MS + round_no * 6 * HOUR
        run_dirs = _plan_all(store, round_no, as_of_ms)
        versions_before = _versions(store)
        race = Round(store, seed, as_of_ms)
        topics = sorted(versions_before)
        writer_topics = rng.sample(topics, k=max(1, len(topics) // 3))
        appliers = [
            race.guarded(race.apply, run_dirs[m], random.Random(rng.random()))
            for m in rng.sample(MECHANISMS, 5)
        ]
        actors = [
            race.guarded(race.writer, writer_topics, random.Random(rng.random())),
            race.guarded(race.consumer, random.Random(rng.random())),
        ]
        for thread in actors + appliers:
            thread.start()
        for thread in appliers:
            thread.join(timeout=600)
        race.stop.set()
        for thread in actors:
            thread.join(timeout=60)
        run_ids = [f"race-{round_no}-{m}" for m in MECHANISMS]
        try:
            counts = _check_round(store, race, versions_before, run_ids)
        except AssertionError as exc:
            raise AssertionError(
                f"round {round_no} (seed {seed}, as-of {format_ms(as_of_ms)}): {exc}"
            ) from exc
        for key, value in counts.items():
            totals[key] += value
    with capsys.disabled():
        print(f"\nraces ({store.engine.dialect.name}): {ROUNDS} rounds, {totals}")
    assert totals["acks"] > 0 and totals["writes"] > 0
