"""Invariants every store must satisfy after any run, crash or race (used by the fault and race suites), and what a
command that changes nothing must leave as it was (``store_contents``, used by the bad-input and what-if tests)."""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

from sqlalchemy import select

from housekeeping.store import metadata_schema as t
from housekeeping.store.store import LEDGER_DIR_NAME, Store, read_transaction
from housekeeping.store.tier import object_key


def store_contents(
    root: Path, *, leave_out: tuple[str, ...] = ()
) -> tuple[dict[str, str], tuple[str, ...] | None]:
    """What a command that changes nothing must leave as it was: every file under ``root`` by content digest (but
    those under the top-level directories ``leave_out``) and the metadata row for row (None: no database). The
    database is compared by its rows, never its bytes: whichever process closes the last connection folds SQLite's
    write-ahead log into the database file (same rows, other bytes), and any reader rewrites the shared-memory
    index."""
    files = {
        str(rel): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
        and (rel := path.relative_to(root)).parts[0] not in leave_out
        and not path.name.startswith("metadata.db")
    }
    rows: tuple[str, ...] | None = None
    if (root / "metadata.db").exists():
        with closing(sqlite3.connect(root / "metadata.db")) as conn:
            rows = tuple(conn.iterdump())
    return files, rows


def _ledger_dirs(store: Store) -> set[str]:
    """Every ledger directory on disk (``<ledgerId>`` or ``<ledgerId>.<generation>``), relative to the root."""
    return {
        str(d.relative_to(store.root))
        for d in store.ledgers_root.glob("persistent/*/*/*/*")
        if d.is_dir() and LEDGER_DIR_NAME.match(d.name)
    }


def assert_no_orphans_and_no_dangling_metadata(store: Store) -> None:
    """No file under ledgers/ that the metadata does not know (ledger list, compacted ledgers, pending
    deletions, each at its files generation); no stored ledger or current compacted ledger whose files are
    missing (a ledger whose local copy is deleted: in the tier). With an object tier: no object that no ledger row
    (its attempt) and no pending deletion names, and every completed offload's object there."""
    with read_transaction(store.engine) as conn:
        ledger_rows = list(conn.execute(select(t.ledgers)))
        compacted = {
            (r.topic, r.ledger_id, r.files_generation): r.status
            for r in conn.execute(select(t.compacted_ledgers))
        }
        pending_rows = list(
            conn.execute(select(t.pending_deletions).where(t.pending_deletions.c.status == "pending"))
        )
    ledgers = {(r.topic, r.ledger_id, r.files_generation): r for r in ledger_rows}
    pending = {r.path for r in pending_rows if r.path}
    known = {store.ledger_rel_path(*key) for key in [*ledgers, *compacted]} | pending
    on_disk = _ledger_dirs(store)
    assert on_disk <= known, (
        f"orphan ledger directories (no metadata knows them): {sorted(on_disk - known)[:5]}"
    )
    for key, row in ledgers.items():
        if row.entries_stored and not row.local_deleted:
            assert any(store.ledger_dir(*key).glob("*.parquet")), f"{key} file missing"
    for key, status in compacted.items():
        if status == "current":
            assert any(store.ledger_dir(*key).glob("*.parquet")), f"compacted {key}"
    _assert_tier_matches(store, ledger_rows, pending_rows)


def _assert_tier_matches(store: Store, ledger_rows: list, pending_rows: list) -> None:
    if store.tier is None:
        assert not any(r.local_deleted for r in ledger_rows), (
            "a local copy is deleted but no tier is configured"
        )
        return
    objects = {o.key for o in store.tier.list_objects()}
    named = {
        object_key(r.topic, r.ledger_id, r.offload_uuid)
        for r in ledger_rows
        if r.offload_uuid and r.entries_stored
    }
    known = named | {r.tier_key for r in pending_rows if r.tier_key}
    assert objects <= known, f"orphan tier objects (no metadata knows them): {sorted(objects - known)[:5]}"
    for r in ledger_rows:
        if r.offload_complete and r.entries_stored:
            key = object_key(r.topic, r.ledger_id, r.offload_uuid)
            assert key in objects, (
                f"{r.topic} ledger {r.ledger_id}: its offload is complete but {key} is missing"
            )


def store_state(store: Store) -> dict:
    """What a run may change, for before/after comparisons: the manifest (without the store's own section),
    the ledger directories holding files, and the pending-deletion log."""
    from housekeeping.store.manifest.export import export_manifest

    manifest = export_manifest(store)
    manifest.pop("store")
    files = sorted(str(p.parent.relative_to(store.root)) for p in store.ledgers_root.rglob("*.parquet"))
    with store.engine.connect() as conn:
        pending = sorted((r.topic, r.ledger_id, r.status) for r in conn.execute(select(t.pending_deletions)))
    return {"manifest": manifest, "files": files, "pending": pending}


def apply_batches(run_dir: Path, size: int) -> list[list[str]]:
    """The topics of each metadata transaction of the shared apply in batches of ``size``: the plan's actions a part
    file at a time (one snapshot bucket's topics), each part's topics in order."""
    from housekeeping.engine.contract import ACTIONS
    from housekeeping.engine.run_dir import RunDir, read_jsonl

    batches = []
    for part in sorted(RunDir(run_dir).plan_table(ACTIONS).glob("part-*")):
        topics = sorted({row["topic"] for row in read_jsonl(part)})
        batches += [topics[start : start + size] for start in range(0, len(topics), size)]
    return batches


def pending_and_journal(store: Store) -> tuple[list, list]:
    """The pending-deletion log as (topic, ledger_id) and the journal as (topic, action, status), sorted: what an
    apply wrote, without its wall-clock columns."""
    with read_transaction(store.engine) as conn:
        pending = conn.execute(
            select(t.pending_deletions.c.topic, t.pending_deletions.c.ledger_id).order_by(
                "topic", "ledger_id"
            )
        ).all()
        journal = conn.execute(
            select(t.journal.c.topic, t.journal.c.action, t.journal.c.status).order_by(
                "topic", "action", "status"
            )
        ).all()
    return [tuple(r) for r in pending], [tuple(r) for r in journal]


def files_holding(root, key: str) -> list[str]:
    """Every file under ``root`` holding ``key``: Parquet files read column by column (compressed pages hide
    bytes), every other file (metadata database, JSON, reports, data docs) byte by byte."""
    import json

    import pyarrow.parquet as pq

    needle = key.encode()
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix == ".parquet":
            rows = pq.read_table(path).to_pylist()
            text = json.dumps(rows, default=lambda v: v.decode("latin-1") if isinstance(v, bytes) else str(v))
            if key in text:
                found.append(str(path.relative_to(root)))
        elif needle in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found
