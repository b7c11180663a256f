"""The store scrub on stores damaged on purpose, each kind alone and all together, through `housekeeping scrub`:
it names every damage exactly (kind, tier, path) and nothing else; on an undamaged store after every other
mechanism has run (compaction, key erasure, offload, expiry, trim, GC, backlog quota, purge) it finds nothing, even
with a minimum age of 0. Ages are set with os.utime (a file's age is physical: docs/semantics.md §10)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import iso, load_store, run_cli

pytestmark = [pytest.mark.spark, pytest.mark.runs]

T0 = 1_767_225_600_000
MIN = 60_000
A = "persistent://t/ns/a"  # offloaded: L1 only in the tier, L2 in both, L3 local, L4 current
B = "persistent://t/ns/b"  # six local ledgers, L6 current
AS_OF = T0 + 3 * 24 * 60 * MIN
DAYS = 86_400


def _topic(name: str, ledgers: int, offloaded: dict[int, bool]) -> dict:
    """``ledgers`` ledgers of 10 keyed entries (the last current, 4 entries); ``offloaded``: ledger -> local copy
    deleted."""
    messages, rows = [], []
    for ledger_id in range(1, ledgers + 1):
        count = 10 if ledger_id < ledgers else 4
        for entry_id in range(count):
            n = (ledger_id - 1) * 10 + entry_id
            messages.append(
                {
                    "ledgerId": ledger_id,
                    "entryId": entry_id,
                    "publishTime": T0 + n * MIN,
                    "key": f"k{n % 6}",
                    "value": f"{name[-1]}-value-{n}",
                }
            )
        size = sum(len(m["value"]) for m in messages if m["ledgerId"] == ledger_id)
        row = {"ledgerId": ledger_id, "entries": count, "size": size}
        if ledger_id < ledgers:
            row["timestamp"] = T0 + ledger_id * 10 * MIN
        if ledger_id in offloaded:
            row["offloadContext"] = {
                "complete": True,
                "timestamp": T0 + 60 * MIN,
                "bookkeeperDeleted": offloaded[ledger_id],
            }
        rows.append(row)
    return {
        "ledgers": rows,
        "cursors": {"sub": {"markDeletePosition": "1:0"}, "__compaction": {"markDeletePosition": "1:-1"}},
        "messages": messages,
    }


MANIFEST = {
    "namespaces": {"t/ns": {"message_ttl_in_seconds": 86400, "compaction_threshold": 1}},
    "topics": {A: _topic(A, 4, {1: True, 2: False}), B: _topic(B, 6, {})},
}


def scrub(capsys, store: str, *extra: str, as_of: int = AS_OF) -> tuple[int, dict]:
    code, out, err = run_cli(
        capsys, "scrub", "--store", store, "--format", "json", "--as-of", iso(as_of), *extra
    )
    assert code in (0, 1), err
    return code, json.loads(out)


def found(document: dict) -> set[tuple[str, str, str]]:
    return {(f["kind"], f["location"], f["path"]) for f in document["findings"] if f["severity"] == "error"}


def local(topic: str, name: str) -> str:
    return f"ledgers/persistent/t/ns/{topic[-1]}/{name}"


def age(path: Path, days: float = 5) -> None:
    """Make an item ``days`` old: its files and itself (a directory's age is its newest file's)."""
    when = time.time() - days * DAYS
    for item in [*path.rglob("*"), path] if path.is_dir() else [path]:
        os.utime(item, (when, when))


def _object_of(store: str, topic: str, ledger_id: int) -> str:
    from housekeeping.store.tier import object_key

    with sqlite3.connect(Path(store) / "metadata.db") as db:
        (uuid,) = db.execute(
            "select offload_uuid from ledgers where topic = ? and ledger_id = ?", (topic, ledger_id)
        ).fetchone()
    return object_key(topic, ledger_id, uuid)


# --- the damages: each does one thing to the store and says what the scrub must name ------------------------------


def removed_ledger_dir(store: str, tier) -> set:
    shutil.rmtree(Path(store, local(B, "1")))
    return {("missing", "local", local(B, "1"))}


def extra_dir(store: str, tier) -> set:
    shutil.copytree(Path(store, local(B, "2")), Path(store, local(B, "77")))
    age(Path(store, local(B, "77")))
    return {("orphan", "local", local(B, "77"))}


def truncated_parquet(store: str, tier) -> set:
    part = next(Path(store, local(B, "3")).glob("*.parquet"))
    part.write_bytes(part.read_bytes()[:200])
    return {("unreadable", "local", local(B, "3"))}


def wrong_entry_count(store: str, tier) -> set:
    with sqlite3.connect(Path(store) / "metadata.db") as db:
        db.execute("update ledgers set entries = entries + 1 where topic = ? and ledger_id = 3", (A,))
    return {("mismatch", "local", local(A, "3"))}


def metadata_from_an_older_copy(store: str, tier) -> set:
    """Last night's metadata back after a day of work: B's ledger 4 trimmed and purged since (its files are gone, the
    old rows list it) and a ledger 7 rolled and written since (its files are newer than the metadata)."""
    from housekeeping.engine.purge import purge
    from housekeeping.store import clients
    from housekeeping.store.store import Store, record_pending_deletion, write_transaction

    backup = Path(store) / "backup.db"
    with sqlite3.connect(Path(store) / "metadata.db") as db, sqlite3.connect(backup) as copy:
        db.backup(copy)
    opened = Store.open(store)
    with write_transaction(opened.engine) as conn:
        row = (
            conn.exec_driver_sql(f"select * from ledgers where topic = '{B}' and ledger_id = 4")
            .mappings()
            .one()
        )
        record_pending_deletion(
            conn, dict(row), run_id="trim-yesterday", as_of_ms=AS_OF, purge_after_ms=AS_OF
        )
        conn.exec_driver_sql(f"delete from ledgers where topic = '{B}' and ledger_id = 4")
    purge(opened, as_of_ms=AS_OF, run_id="purge-yesterday")
    clients.roll_ledger(opened, B, now_ms=AS_OF)
    clients.connect_producer(opened, B, now_ms=AS_OF)
    clients.publish(opened, B, [{"key": "k1", "value": "late"}], now_ms=AS_OF)
    opened.engine.dispose()
    with sqlite3.connect(backup) as copy, sqlite3.connect(Path(store) / "metadata.db") as db:
        copy.backup(db)
    backup.unlink()
    age(Path(store, local(B, "7")))
    return {("missing", "local", local(B, "4")), ("orphan", "local", local(B, "7"))}


def object_left_after_a_delete(store: str, tier) -> set:
    """Trim deleted A's ledger 2 from both tiers and purge removed it; then the object came back (a delete the object
    store answered with success and did not do)."""
    from housekeeping.engine.purge import purge
    from housekeeping.store.store import Store, record_pending_deletion, write_transaction

    key = _object_of(store, A, 2)
    saved = Path(tier.path(key)).read_bytes()
    opened = Store.open(store)
    with write_transaction(opened.engine) as conn:
        row = (
            conn.exec_driver_sql(f"select * from ledgers where topic = '{A}' and ledger_id = 2")
            .mappings()
            .one()
        )
        record_pending_deletion(conn, dict(row), run_id="trim-2", as_of_ms=AS_OF, purge_after_ms=AS_OF)
        conn.exec_driver_sql(f"delete from ledgers where topic = '{A}' and ledger_id = 2")
    assert purge(opened, as_of_ms=AS_OF, run_id="purge-2").purged == [(A, 2)]
    Path(tier.path(key)).write_bytes(saved)
    age(Path(tier.path(key)))
    return {("not_freed", "tier", key)}


def incomplete_upload(store: str, tier) -> set:
    """A's ledger 1 is only in the tier and its object was cut short; an upload of ledger 3 was cut before its
    attempt was recorded (an object no row names)."""
    key = _object_of(store, A, 1)
    path = Path(tier.path(key))
    path.write_bytes(path.read_bytes()[:300])
    stray = f"persistent/t/ns/a/3-{uuid.uuid4()}.parquet"
    Path(tier.path(stray)).write_bytes(b"PAR1 cut")
    age(Path(tier.path(stray)))
    return {("unreadable", "tier", key), ("orphan", "tier", stray)}


DAMAGES = [
    removed_ledger_dir,
    extra_dir,
    truncated_parquet,
    wrong_entry_count,
    metadata_from_an_older_copy,
    object_left_after_a_delete,
    incomplete_upload,
]


@pytest.fixture
def store(capsys, tmp_path, directory_tier):
    return load_store(capsys, tmp_path, MANIFEST)


def test_an_undamaged_store_is_clean(capsys, store):
    code, document = scrub(capsys, store, "--min-age-seconds", "0")
    assert code == 0 and document["clean"] and document["findings"] == []
    assert document["summary"]["ledgersChecked"] == 11  # A: 1-2 in the tier, 2-4 local; B: 1-6


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__)
def test_each_damage_alone_is_named_exactly(capsys, store, directory_tier, damage):
    expected = damage(store, directory_tier)
    code, document = scrub(capsys, store)
    assert code == 1
    assert found(document) == expected


def test_all_damages_together_are_each_named(capsys, store, directory_tier):
    expected = set().union(*(damage(store, directory_tier) for damage in DAMAGES))
    code, document = scrub(capsys, store)
    assert code == 1
    assert found(document) == expected
    summary = document["summary"]
    assert summary["missingLedgers"] == 2 and summary["orphans"] == 3
    assert summary["freed"]["deletionsNotFreed"] == 1


def test_clean_after_every_other_mechanism(capsys, store, monkeypatch):
    from housekeeping.store.store import Store

    monkeypatch.setenv("HOUSEKEEPING_PURGE_GRACE_SECONDS", "0")
    code, _, err = run_cli(
        capsys,
        "erase",
        "request",
        "k3",
        "--topic",
        A,
        "--store",
        store,
        "--reason",
        "test",
        "--requested-at",
        iso(AS_OF - MIN),
    )
    assert code == 0, err
    for mechanism in ("compaction", "erasure", "offload", "expiry", "trim", "gc", "backlog"):
        code, _, err = run_cli(
            capsys, "apply", mechanism, "--store", store, "--as-of", iso(AS_OF), "--max-deleted-share", "1"
        )
        assert code == 0, f"{mechanism}: {err}"
    code, _, err = run_cli(capsys, "purge", "--store", store, "--as-of", iso(AS_OF + 30 * DAYS * 1000))
    assert code == 0, err
    with Store.open(store).engine.connect() as conn:
        rewritten = conn.exec_driver_sql("select count(*) from ledgers where files_generation > 0").scalar()
        compacted = conn.exec_driver_sql("select count(*) from compacted_ledgers").scalar()
        purged = conn.exec_driver_sql(
            "select count(*) from pending_deletions where status = 'purged'"
        ).scalar()
    assert rewritten and compacted and purged  # the mechanisms did change the files
    code, document = scrub(capsys, store, "--min-age-seconds", "0", as_of=AS_OF + 30 * DAYS * 1000)
    assert code == 0, document["findings"]
    assert (
        document["summary"]["freed"]["bytesVerifiedFreed"]
        == document["summary"]["freed"]["bytesRecordedFreed"]
        > 0
    )


def test_a_compacted_ledger_of_several_ledgers_is_not_a_mismatch(capsys, tmp_path):
    """A compacted ledger keeps each key's newest entry at its own position: entries of ledgers 1 and 2 whose ids
    repeat (0 and 1 in each). Each position is there once, so the scrub finds nothing (the 60-minute soak found the
    scrub counting entry ids alone and calling such a ledger a mismatch)."""
    from housekeeping.store.store import Store

    topic = "persistent://t/ns/c"
    messages = [
        {"ledgerId": ledger, "entryId": entry, "publishTime": T0 + (2 * ledger + entry) * MIN,
         "key": f"k{2 * ledger + entry}", "value": f"value-{ledger}-{entry}"}
        for ledger in (1, 2) for entry in (0, 1)
    ]  # fmt: skip
    body = {
        "ledgers": [
            {"ledgerId": 1, "entries": 2, "size": 18, "timestamp": T0 + 10 * MIN},
            {"ledgerId": 2, "entries": 2, "size": 18, "timestamp": T0 + 20 * MIN},
            {"ledgerId": 3, "entries": 0, "size": 0},
        ],
        "cursors": {"sub": {"markDeletePosition": "2:1"}, "__compaction": {"markDeletePosition": "1:-1"}},
        "messages": messages,
    }
    store = load_store(
        capsys, tmp_path, {"namespaces": {"t/ns": {"compaction_threshold": 1}}, "topics": {topic: body}}
    )
    code, _, err = run_cli(capsys, "apply", "compaction", "--store", store, "--as-of", iso(AS_OF))
    assert code == 0, err
    with Store.open(store).engine.connect() as conn:
        (entries,) = conn.exec_driver_sql("select entries from compacted_ledgers").one()
    assert entries == 4  # every key's one entry, from both ledgers
    code, document = scrub(capsys, store, "--min-age-seconds", "0")
    assert code == 0 and document["clean"], document["findings"]
