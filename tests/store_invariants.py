"""Invariants every store must satisfy after any run, crash or race (used by the fault and race suites)."""

from __future__ import annotations

from sqlalchemy import select

from housekeeping import metadata_schema as t
from housekeeping.store import Store, read_transaction


def _ledger_dirs(store: Store) -> set[tuple[str, int]]:
    """(topic directory relative to ledgers/, ledger id) of every ledger directory on disk."""
    base = store.root / "ledgers"
    return {
        (str(d.parent.relative_to(base)), int(d.name))
        for d in base.glob("persistent/*/*/*/*")
        if d.is_dir() and d.name.isdigit()
    }


def _topic_dir(store: Store, topic: str) -> str:
    return str(store.ledger_dir(topic, 0).parent.relative_to(store.root / "ledgers"))


def assert_no_orphans_and_no_dangling_metadata(store: Store) -> None:
    """No file under ledgers/ that the metadata does not know (ledger list, compacted ledgers, pending
    deletions); no stored ledger or current compacted ledger whose files are missing."""
    with read_transaction(store.engine) as conn:
        ledgers = {(r.topic, r.ledger_id): r.entries_stored for r in conn.execute(select(t.ledgers))}
        compacted = {(r.topic, r.ledger_id): r.status for r in conn.execute(select(t.compacted_ledgers))}
        pending = {
            (r.topic, r.ledger_id)
            for r in conn.execute(
                select(t.pending_deletions).where(t.pending_deletions.c.status == "pending")
            )
        }
    known = {(_topic_dir(store, topic), ledger_id) for topic, ledger_id in [*ledgers, *compacted, *pending]}
    on_disk = _ledger_dirs(store)
    assert on_disk <= known, (
        f"orphan ledger directories (no metadata knows them): {sorted(on_disk - known)[:5]}"
    )
    for (topic, ledger_id), stored in ledgers.items():
        if stored:
            assert any(store.ledger_dir(topic, ledger_id).glob("*.parquet")), (
                f"{topic} {ledger_id} file missing"
            )
    for (topic, ledger_id), status in compacted.items():
        if status == "current":
            assert any(store.ledger_dir(topic, ledger_id).glob("*.parquet")), f"compacted {topic} {ledger_id}"


def store_state(store: Store) -> dict:
    """What a run may change, for before/after comparisons: the manifest (without the store's own section),
    the ledger directories holding files, and the pending-deletion log."""
    from housekeeping.manifest import export_manifest

    manifest = export_manifest(store)
    manifest.pop("store")
    files = sorted(str(p.parent.relative_to(store.root)) for p in store.ledgers_root.rglob("*.parquet"))
    with store.engine.connect() as conn:
        pending = sorted((r.topic, r.ledger_id, r.status) for r in conn.execute(select(t.pending_deletions)))
    return {"manifest": manifest, "files": files, "pending": pending}
