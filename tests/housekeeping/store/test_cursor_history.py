"""The cursor history (docs/semantics.md §12.4): a run's snapshot keeps its durable cursors as the store had them, at
most one run per interval of logical time, for the retention behind the newest; the runs around a time bound
what the history knows of it."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.steps import snapshot_step
from housekeeping.store import clients
from housekeeping.store import metadata_schema as t
from housekeeping.store.cursor_history import around, record_cursors, recorded
from housekeeping.store.generate import GenerateOptions, generate_store
from housekeeping.store.store import read_transaction

pytestmark = pytest.mark.unit

T0 = 1_793_491_200_000  # the generator's reference, 2026-11-01
MINUTE = 60_000
HOUR = 60 * MINUTE


@pytest.fixture
def store(tmp_path):
    return generate_store(tmp_path / "store", GenerateOptions(topics=12, seed=7, entries_per_ledger=5))


def _snapshot(store, at_ms: int, run: str, mechanism: str = "trim"):
    """A run's snapshot, and its durable cursors kept in the history as the runs will keep them."""
    info = snapshot_step(store, mechanism, run_id=run, as_of_ms=at_ms, actor="test")
    record_cursors(
        store, RunDir(info.run_dir).snapshot_table("cursors"), as_of_ms=at_ms, mechanism=mechanism, run_id=run
    )


def _durable(store) -> list[tuple]:
    with read_transaction(store.engine) as conn:
        rows = conn.execute(select(t.cursors).where(t.cursors.c.durable.is_(True))).all()
    return sorted((r.topic, r.name, r.mark_delete_ledger, r.mark_delete_entry) for r in rows)


def _kept(item) -> list[tuple]:
    table = pq.read_table(item.path).to_pylist()
    return sorted((r["topic"], r["subscription"], r["markDeleteLedger"], r["markDeleteEntry"]) for r in table)


def test_a_run_keeps_its_durable_cursors_once_an_interval(store):
    before = _durable(store)
    _snapshot(store, T0, "first")
    (first,) = recorded(store)
    assert (first.as_of_ms, first.mechanism, first.run) == (T0, "trim", "first")
    assert _kept(first) == before and before
    # A subscription acknowledged everything since: the next kept run has it where it is now; one 30 minutes later
    # is not kept.
    for topic, name, ledger, entry in before:
        with read_transaction(store.engine) as conn:
            last = clients.last_entry(conn, topic)
        if last is not None and last > (ledger, entry):
            clients.acknowledge(store, topic, name, f"{last[0]}:{last[1]}", now_ms=T0 + 1)
            break
    else:
        pytest.fail("no durable cursor behind its topic's end in the generated store")
    _snapshot(store, T0 + 30 * MINUTE, "soon", mechanism="expiry")
    assert [r.run for r in recorded(store)] == ["first"]
    _snapshot(store, T0 + 2 * HOUR, "later", mechanism="backlog")
    later = recorded(store)[-1]
    assert (later.as_of_ms, later.mechanism, later.run) == (T0 + 2 * HOUR, "backlog", "later")
    assert _kept(later) == _durable(store) != before
    assert around(store, T0 + HOUR) == (first, later)
    assert around(store, T0) == (first, later)
    assert around(store, T0 - 1) == (None, first)
    assert around(store, T0 + 3 * HOUR) == (later, None)


def test_the_retention_and_the_interval_are_logical_time_and_settings(store, monkeypatch):
    monkeypatch.setenv("HOUSEKEEPING_CURSOR_HISTORY_DAYS", "1")
    monkeypatch.setenv("HOUSEKEEPING_CURSOR_HISTORY_INTERVAL_SECONDS", "0")
    _snapshot(store, T0, "a")
    _snapshot(store, T0 + MINUTE, "b")
    assert [r.run for r in recorded(store)] == ["a", "b"]
    _snapshot(store, T0 + 2 * 86_400_000, "c")
    assert [r.run for r in recorded(store)] == ["c"]
    # A backfill of an earlier day is kept beside it (within the retention behind the newest) or not at all.
    _snapshot(store, T0 + 86_400_000 + HOUR, "d")
    assert [r.run for r in recorded(store)] == ["d", "c"]


def test_a_snapshot_alone_keeps_nothing(store):
    """Not yet wired to the runs: a snapshot writes nothing outside its run directory (a refused run changes
    nothing in the store)."""
    snapshot_step(store, "trim", run_id="alone", as_of_ms=T0, actor="test")
    assert recorded(store) == []


def test_a_bad_setting_is_named(store, monkeypatch):
    from housekeeping.core.errors import InputError

    monkeypatch.setenv("HOUSEKEEPING_CURSOR_HISTORY_DAYS", "0")
    with pytest.raises(InputError, match="HOUSEKEEPING_CURSOR_HISTORY_DAYS"):
        _snapshot(store, T0, "bad")
