"""Purge reads the due pending deletions a page of ids at a time (``engine.purge.PURGE_PAGE_ROWS``), not every
pending row at once: the same files go and the same result is written whatever the page size, a row no longer
pending when its page is read (restored meanwhile) keeps its files, and the rows still in their grace period are
counted in SQL."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, select, update

from housekeeping.engine import purge as purge_module
from housekeeping.engine.purge import purge
from housekeeping.store import metadata_schema as t
from housekeeping.store.generate import GenerateOptions, generate_store
from housekeeping.store.store import Store, record_pending_deletions, write_transaction

pytestmark = pytest.mark.unit

AS_OF_MS = 1_000_000


def _store_with_pending(root) -> tuple[Store, list[tuple[str, int]]]:
    """A generated store whose first 7 ledgers were deleted: 5 due at AS_OF_MS, 2 still in their grace period."""
    store = generate_store(root, GenerateOptions(topics=3, seed=3, entries_per_ledger=5))
    with write_transaction(store.engine) as conn:
        # No retention anywhere (the broker's: none): purge's own re-check of the retention in force, which would
        # keep ledgers closed after this as-of, is tests/e2e/test_live_store.py's subject, not these pages'.
        conn.execute(update(t.namespaces).values(policies="{}"))
        rows = [
            dict(r._mapping) for r in conn.execute(select(t.ledgers).order_by("topic", "ledger_id").limit(7))
        ]
        for index, row in enumerate(rows):
            conn.execute(
                delete(t.ledgers).where(
                    t.ledgers.c.topic == row["topic"], t.ledgers.c.ledger_id == row["ledger_id"]
                )
            )
            due_at = AS_OF_MS - 1 if index < 5 else AS_OF_MS + 10 * index
            record_pending_deletions(conn, [row], run_id="r", as_of_ms=0, purge_after_ms=due_at)
    return store, [(r["topic"], r["ledger_id"]) for r in rows]


def test_any_page_size_purges_the_same_files_and_writes_the_same_result(tmp_path, monkeypatch):
    one_page, one_ledgers = _store_with_pending(tmp_path / "one-page")
    whole = purge(one_page, as_of_ms=AS_OF_MS, run_id="p").to_json()
    monkeypatch.setattr(purge_module, "PURGE_PAGE_ROWS", 2)
    paged, ledgers = _store_with_pending(tmp_path / "paged")
    assert ledgers == one_ledgers
    result = purge(paged, as_of_ms=AS_OF_MS, run_id="p").to_json()
    assert result == whole
    assert result["purged"] == [f"{topic}:{ledger}" for topic, ledger in ledgers[:5]]
    assert (result["waiting"], result["nextPurgeAfterMs"]) == (2, AS_OF_MS + 50)
    for index, (topic, ledger) in enumerate(ledgers):
        assert paged.ledger_dir(topic, ledger).exists() == (index >= 5), (topic, ledger)


def test_a_row_restored_before_its_page_is_read_keeps_its_files(tmp_path, monkeypatch):
    monkeypatch.setattr(purge_module, "PURGE_PAGE_ROWS", 2)
    store, ledgers = _store_with_pending(tmp_path / "store")
    restored_topic, restored_ledger = ledgers[3]  # on the second page
    remove_files = purge_module._remove_files

    def restore_then_remove(store_, row):
        with write_transaction(store.engine) as conn:
            conn.execute(
                update(t.pending_deletions)
                .where(
                    t.pending_deletions.c.topic == restored_topic,
                    t.pending_deletions.c.ledger_id == restored_ledger,
                )
                .values(status="restored")
            )
        return remove_files(store_, row)

    monkeypatch.setattr(purge_module, "_remove_files", restore_then_remove)
    result = purge(store, as_of_ms=AS_OF_MS, run_id="p")
    assert (restored_topic, restored_ledger) not in result.purged and len(result.purged) == 4
    assert store.ledger_dir(restored_topic, restored_ledger).is_dir()
