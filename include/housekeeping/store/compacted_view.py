"""The compacted view, as Pulsar's ``readCompacted`` readers see it: the topic's current compacted ledger, then
the raw entries after its horizon (``CompactionTest#testReadEntriesAfterCompaction``). ``housekeeping inspect
--compacted`` prints it per key: the latest entry of each key in that sequence; a tombstone (empty payload)
in it shows the key as deleted (readers observe the delete while the tombstone is within its grace)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from housekeeping.core.errors import InputError
from housekeeping.core.positions import format_position
from housekeeping.core.timeutil import format_ms
from housekeeping.store import metadata_schema as t
from housekeeping.store.compacted_ledgers import current_compacted
from housekeeping.store.entries import read_ledger
from housekeeping.store.store import Store, read_transaction


def _value(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


def compacted_view(store: Store, topics: list[str] | None = None) -> dict[str, Any]:
    """Per topic that has a compacted ledger (or each named topic): the compacted ledger's facts and the
    compacted view per key."""
    with read_transaction(store.engine) as conn:
        known = [r.name for r in conn.execute(select(t.topics.c.name).order_by(t.topics.c.name))]
        for name in topics or []:
            if name not in known:
                raise InputError(f"topic {name} does not exist in store {store.root}")
        wanted = topics or known
        facts = {}
        for name in wanted:
            row = current_compacted(conn, name)
            if row is None and not topics:
                continue
            raw = list(
                conn.execute(
                    select(t.ledgers)
                    .where((t.ledgers.c.topic == name) & (t.ledgers.c.entries > 0))
                    .order_by(t.ledgers.c.ledger_id)
                )
            )
            facts[name] = (row, raw)
    out: dict[str, Any] = {}
    for name, (row, raw) in facts.items():
        horizon = (row.horizon_ledger, row.horizon_entry) if row is not None else None
        sequence: list[tuple[str, dict[str, Any]]] = []
        if row is not None:
            sequence += [
                ("compacted", r)
                for r in read_ledger(store.ledger_dir(name, row.ledger_id, row.files_generation)).to_pylist()
            ]
        tail = 0
        for ledger in raw:
            if horizon is not None and ledger.ledger_id < horizon[0]:
                continue
            if not ledger.entries_stored:
                raise InputError(
                    f"topic {name} ledger {ledger.ledger_id}: entries are not stored; no compacted view"
                )
            for entry in read_ledger(
                store.ledger_dir(name, ledger.ledger_id, ledger.files_generation)
            ).to_pylist():
                if horizon is None or (entry["ledgerId"], entry["entryId"]) > horizon:
                    sequence.append(("raw", entry))
                    tail += 1
        keys: dict[str, Any] = {}
        for source, entry in sequence:
            if entry["key"] is None:
                continue
            keys[entry["key"]] = {
                "position": format_position((entry["ledgerId"], entry["entryId"])),
                "source": source,
                "publishTime": format_ms(entry["publishTime"]),
                **({"deleted": True} if entry["size"] == 0 else {"value": _value(entry["value"])}),
            }
        out[name] = {
            "compactedLedger": (
                None
                if row is None
                else {
                    "ledgerId": row.ledger_id,
                    "horizon": format_position(horizon),
                    "entries": row.entries,
                    "size": row.size_bytes,
                    "tombstones": row.tombstones,
                    "compactedAsOf": format_ms(row.compacted_as_of_ms),
                }
            ),
            "entriesAfterHorizon": tail,
            "keys": dict(sorted(keys.items())),
        }
    return out
