"""The store's client paths and how they keep lastActive (docs/semantics.md §6.1)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import insert, select

from housekeeping.core.errors import InputError
from housekeeping.store import clients
from housekeeping.store import metadata_schema as t
from housekeeping.store.entries import read_ledger
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import read_transaction
from tests.conftest import write_manifest

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000
TOPIC = "persistent://p/ns/orders"


@pytest.fixture
def store(tmp_path):
    document = {"namespaces": {"p/ns": {}}, "topics": {}}
    opened = load_manifest(tmp_path / "store", write_manifest(tmp_path, document))
    clients.create_topic(opened, TOPIC, now_ms=T0)
    return opened


def topic_row(store):
    with store.engine.connect() as conn:
        return conn.execute(select(t.topics).where(t.topics.c.name == TOPIC)).one()


def test_creation_stamps_last_active_as_a_broker_loading_the_topic(store):
    assert topic_row(store).last_active_ms == T0
    with pytest.raises(InputError, match="already exists"):
        clients.create_topic(store, TOPIC, now_ms=T0)


def test_producer_disconnect_and_unsubscribe_refresh_last_active_as_in_pulsar(store):
    clients.connect_producer(store, TOPIC, now_ms=T0 + 1_000)
    clients.subscribe(store, TOPIC, "sub", now_ms=T0 + 2_000)
    clients.disconnect_producer(store, TOPIC, now_ms=T0 + 5_000)
    assert topic_row(store).last_active_ms == T0 + 5_000
    assert topic_row(store).producers == 0
    clients.unsubscribe(store, TOPIC, "sub", now_ms=T0 + 9_000)
    assert topic_row(store).last_active_ms == T0 + 9_000


def test_consumer_disconnect_publish_and_ack_refresh_it_too_and_it_never_moves_back(store):
    clients.subscribe(store, TOPIC, "sub", now_ms=T0, initial="earliest")
    clients.connect_producer(store, TOPIC, now_ms=T0)
    positions = clients.publish(store, TOPIC, [{"key": "a", "value": "1"}, {"value": "2"}], now_ms=T0 + 3_000)
    assert topic_row(store).last_active_ms == T0 + 3_000
    clients.connect_consumer(store, TOPIC, "sub", now_ms=T0 + 4_000)
    assert clients.acknowledge(store, TOPIC, "sub", positions[-1], now_ms=T0 + 6_000) == positions[-1]
    clients.disconnect_consumer(store, TOPIC, "sub", now_ms=T0 + 8_000)
    assert topic_row(store).last_active_ms == T0 + 8_000
    clients.disconnect_producer(store, TOPIC, now_ms=T0 + 7_000)  # a late report of an earlier event
    assert topic_row(store).last_active_ms == T0 + 8_000, "lastActive only moves forward"


def test_publish_appends_real_entries_and_only_a_roll_changes_the_version(store):
    clients.connect_producer(store, TOPIC, now_ms=T0)
    first = clients.publish(store, TOPIC, [{"value": "x" * 5}], now_ms=T0 + 1)
    second = clients.publish(store, TOPIC, [{"value": None, "key": "k"}], now_ms=T0 + 2)
    assert (first, second) == (["0:0"], ["0:1"])
    assert topic_row(store).version == 1, "appending to the current ledger leaves the ledger list alone"
    entries = read_ledger(store.ledger_dir(TOPIC, 0)).to_pylist()
    assert [(e["entryId"], e["value"], e["size"]) for e in entries] == [(0, b"xxxxx", 5), (1, None, 0)]
    assert clients.roll_ledger(store, TOPIC, now_ms=T0 + 3) == 1
    assert topic_row(store).version == 2
    with pytest.raises(InputError, match="beyond the last entry"):
        clients.subscribe(store, TOPIC, "s", now_ms=T0 + 4)
        clients.acknowledge(store, TOPIC, "s", "1:0", now_ms=T0 + 5)


def test_a_new_ledger_never_reuses_the_id_of_a_pending_deleted_one(store):
    with store.engine.begin() as conn:
        conn.execute(
            insert(t.pending_deletions).values(
                topic=TOPIC,
                ledger_id=7,
                path="ledgers/x",
                ledger_row=json.dumps({}),
                size_bytes=0,
                run_id="r",
                deleted_as_of_ms=T0,
                purge_after_ms=T0,
                status="pending",
            )
        )
    assert clients.roll_ledger(store, TOPIC, now_ms=T0 + 1) == 8


def test_producers_are_refused_while_a_producer_backlog_quota_is_exceeded(store):
    with store.engine.begin() as conn:
        conn.execute(
            insert(t.backlog_quota_states).values(
                topic=TOPIC,
                quota_type="destination_storage",
                policy="producer_exception",
                exceeded=True,
                limit_value=10,
                measured_value=20,
                as_of_ms=T0,
                run_id="r",
            )
        )
    with pytest.raises(clients.ProducerBlocked, match="destination_storage is exceeded"):
        clients.connect_producer(store, TOPIC, now_ms=T0 + 1)
    assert topic_row(store).producers == 0


def test_unsubscribe_with_connected_consumers_is_refused(store):
    clients.subscribe(store, TOPIC, "sub", now_ms=T0)
    clients.connect_consumer(store, TOPIC, "sub", now_ms=T0)
    with pytest.raises(InputError, match="connected consumers"):
        clients.unsubscribe(store, TOPIC, "sub", now_ms=T0 + 1)


def test_a_reader_never_finds_the_open_ledger_gone_while_the_writer_appends(store):
    """The writer rewrites the open ledger's file on every publish; a reader in between (a consumer, a plan, the store
    scrub's listing) sees the old entries or the new ones, never no ledger: a missing directory whose row still names
    it is data loss to the scrub."""
    import threading

    clients.connect_producer(store, TOPIC, now_ms=T0)
    clients.publish(store, TOPIC, [{"value": "first"}], now_ms=T0)
    with store.engine.connect() as conn:
        ledger_id = conn.execute(select(t.ledgers.c.ledger_id).where(t.ledgers.c.topic == TOPIC)).scalar_one()
    ledger_dir = store.ledger_dir(TOPIC, ledger_id)
    done = threading.Event()
    seen: list[int] = []
    failures: list[str] = []

    def read() -> None:
        while not done.is_set():
            if not ledger_dir.is_dir():
                failures.append("no ledger directory")
                continue
            try:
                seen.append(read_ledger(ledger_dir).num_rows)
            except (OSError, ValueError) as exc:  # pyarrow raises both for a file that went
                failures.append(str(exc))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(150):
            clients.publish(store, TOPIC, [{"value": f"m{n}"}], now_ms=T0 + n)
    finally:
        done.set()
        reader.join()
    assert failures == []
    assert len(seen) > 10 and seen == sorted(seen), "each read sees a whole ledger, growing"
    assert read_ledger(ledger_dir).num_rows == 151
    assert [p.name for p in ledger_dir.iterdir()] == ["part-00000.parquet"], "no temporary file left behind"


def test_a_publish_whose_metadata_never_committed_leaves_no_entry_behind(store, monkeypatch):
    """The file is rewritten before the metadata commits; when the commit fails (the database went away), the
    entries the file got are not the topic's: the next publish writes its own at the positions the metadata gives
    and nothing of the failed one is read back (before, the failed publish's entries stayed in the file and the next
    one's were written after them: two entries at one position)."""
    clients.connect_producer(store, TOPIC, now_ms=T0)
    first = clients.publish(store, TOPIC, [{"value": "a"}, {"value": "b"}], now_ms=T0 + 1)

    with monkeypatch.context() as patch:
        patch.setattr(clients, "_touch", _database_gone)
        with pytest.raises(InputError, match="cannot be used: server closed the connection"):
            clients.publish(store, TOPIC, [{"value": "lost-1"}, {"value": "lost-2"}], now_ms=T0 + 2)
    again = clients.publish(store, TOPIC, [{"value": "c"}], now_ms=T0 + 3)
    ledger_id = int(first[0].split(":")[0])
    assert again == [f"{ledger_id}:2"]
    table = read_ledger(store.ledger_dir(TOPIC, ledger_id, 0)).sort_by("entryId")
    assert table.column("entryId").to_pylist() == [0, 1, 2]
    assert table.column("value").to_pylist() == [b"a", b"b", b"c"]


@pytest.mark.parametrize("committed", [2, 0], ids=["after-committed-entries", "first-publish"])
def test_a_ledger_closes_at_its_last_committed_entry(store, monkeypatch, committed):
    """A publish whose metadata never committed, and no publish after it before the ledger rolls: the closed
    ledger's file holds only the entries its row says (before, the failed publish's tail stayed in the closed
    ledger's file and the store scrub found it mismatched; found by the 60-minute soak)."""
    clients.connect_producer(store, TOPIC, now_ms=T0)
    first = None
    if committed:
        first = clients.publish(store, TOPIC, [{"value": "a"}, {"value": "b"}], now_ms=T0 + 1)
    with read_transaction(store.engine) as conn:
        ledger = clients._current_ledger(conn, TOPIC)

    with monkeypatch.context() as patch:
        patch.setattr(clients, "_touch", _database_gone)
        with pytest.raises(InputError, match="cannot be used"):
            clients.publish(store, TOPIC, [{"value": "lost-1"}, {"value": "lost-2"}], now_ms=T0 + 2)
    ledger_dir = store.ledger_dir(TOPIC, ledger.ledger_id, ledger.files_generation)
    assert read_ledger(ledger_dir).num_rows == committed + 2  # the failed publish's tail is in the file
    clients.roll_ledger(store, TOPIC, now_ms=T0 + 3)
    if committed:
        assert first == [f"{ledger.ledger_id}:0", f"{ledger.ledger_id}:1"]
        table = read_ledger(ledger_dir).sort_by("entryId")
        assert table.column("value").to_pylist() == [b"a", b"b"]
    else:
        assert not ledger_dir.exists()
    with read_transaction(store.engine) as conn:
        row = conn.execute(
            select(t.ledgers).where(t.ledgers.c.topic == TOPIC, t.ledgers.c.ledger_id == ledger.ledger_id)
        ).one()
    assert (row.entries, row.closed_at_ms) == (committed, T0 + 3)


def _database_gone(*args, **kwargs):
    """A metadata write meeting a database that went away mid-transaction."""
    from sqlalchemy.exc import OperationalError

    raise OperationalError("UPDATE topics", {}, Exception("server closed the connection unexpectedly"))
