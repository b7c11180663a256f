"""The snapshot's table builders (housekeeping.engine.snapshot_tables): a topic's policy columns, resolved once for
the topics that set no policy of their own, are what resolving each topic alone gives; the ledgers and cursors
tables, built a batch of store rows at a time as Arrow tables, hold what each in-scope row says."""

from __future__ import annotations

import json
from collections import namedtuple
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

from housekeeping.core.policies import BrokerConfig
from housekeeping.engine import contract, snapshot_tables
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.snapshot_tables import Selection, topics
from housekeeping.store import metadata_schema as t

pytestmark = pytest.mark.unit

RETAIN_DAY = {"retention_policies": {"retentionTimeInMinutes": 1440, "retentionSizeInMB": -1}}
NAMESPACES = {
    "acme/orders": {**RETAIN_DAY, "message_ttl_in_seconds": 60},
    "acme/audit": {"offload_policies": {"managedLedgerOffloadDeletionLagInMillis": 5}},
    "pulsar/system": {},
}
TOPICS = [
    ("persistent://acme/orders/a", "acme/orders", {}),
    ("persistent://acme/orders/b", "acme/orders", {}),
    # A system topic's name gives it retention (0, 0) where the namespace's retention would apply to another.
    ("persistent://acme/orders/__change_events", "acme/orders", {}),
    ("persistent://acme/orders/__change_events-partition-1", "acme/orders", {}),
    # Its own retention: the source names the topic.
    ("persistent://acme/orders/own", "acme/orders", {"message_ttl_in_seconds": 5}),
    ("persistent://acme/audit/a", "acme/audit", {}),
    ("persistent://acme/audit/b", "acme/audit", {"offload_policies": {"managedLedgerOffloadThresholdInSeconds": 9}}),
    # A system-service namespace: no offloader whatever the tier.
    ("persistent://pulsar/system/a", "pulsar/system", {}),
]  # fmt: skip


class _Overlay:
    """A what-if that gives one topic policies of its own and changes a namespace's."""

    def topic_policies(self, topic: str, stored: dict[str, Any]) -> dict[str, Any]:
        return {**stored, "message_ttl_in_seconds": 7} if topic.endswith("/orders/b") else stored

    def namespace_policies(self, namespace: str, stored: dict[str, Any]) -> dict[str, Any]:
        return {**stored, "message_ttl_in_seconds": 600} if namespace == "acme/audit" else stored


def _selection(overlay: Any = None) -> Selection:
    rows = [
        SimpleNamespace(
            name=name,
            namespace=namespace,
            policies=json.dumps(policies),
            version=1,
            producers=0,
            consumers=0,
            last_active_ms=None,
            incarnation=f"incarnation of {name}",
        )
        for name, namespace, policies in TOPICS
    ]
    state = SimpleNamespace(topic_rows=rows, namespaces=NAMESPACES, holds={})
    return Selection(
        state, BrokerConfig.from_layers(), frozenset(name for name, _, _ in TOPICS), overlay, offloader=True
    )


@pytest.mark.parametrize("overlay", [None, _Overlay()], ids=["stored", "what-if"])
def test_shared_policy_columns_are_what_each_topic_resolved_alone_gives(overlay):
    selection = _selection(overlay)
    built = {row["topic"]: row for batch in topics(selection) for row in batch.to_pylist()}
    alone = {
        row.name: selection._resolved_columns(row.name, *selection._levels(row))
        for row in selection.state.topic_rows
    }
    for name, columns in alone.items():
        assert {k: built[name][k] for k in columns} == columns, name
    # The cases differ where they must (otherwise the comparison above proves little).
    assert built["persistent://acme/orders/__change_events"]["retentionTimeMs"] == 0
    assert built["persistent://acme/orders/a"]["retentionTimeMs"] == 1440 * 60_000
    assert built["persistent://acme/orders/own"]["messageTtlSource"] == "topic persistent://acme/orders/own"
    assert (
        not built["persistent://pulsar/system/a"]["offloader"]
        and built["persistent://acme/audit/a"]["offloader"]
    )
    # Resolved once per (namespace, system-topic name) among the topics without policies of their own.
    shared = {("acme/orders", False), ("acme/orders", True), ("acme/audit", False), ("pulsar/system", False)}
    assert set(selection._shared_policy_columns) == shared
    if overlay is not None:
        assert built["persistent://acme/orders/b"]["messageTtlSource"] == "topic persistent://acme/orders/b"
        assert built["persistent://acme/audit/a"]["messageTtlSeconds"] == 600


LedgerRow = namedtuple("LedgerRow", [c.name for c in t.ledgers.columns])
CursorRow = namedtuple("CursorRow", [c.name for c in t.cursors.columns])
IN_SCOPE = ("persistent://acme/orders/a", "persistent://acme/orders/b", "persistent://acme/orders/é")


def _ledger_rows() -> list[LedgerRow]:
    """Ledgers of three in-scope topics and one out of scope, sorted by topic as the store reads them: open and
    closed, stored or not, offloaded (a UUID), complete, local copy deleted."""
    rows = []
    for topic in (*IN_SCOPE, "persistent://acme/audit/x"):
        for ledger_id in range(1, 4):
            last = ledger_id == 3
            rows.append(
                LedgerRow(
                    topic=topic, ledger_id=ledger_id, entries=10 * ledger_id, size_bytes=1000 * ledger_id,
                    closed_at_ms=None if last else 5_000 + ledger_id, min_entry_ts_ms=None if last else 100,
                    max_entry_ts_ms=None if last else 200 + ledger_id, entries_stored=ledger_id != 2,
                    files_generation=0, offload_uuid="u-1" if ledger_id == 1 else None,
                    offload_complete=ledger_id == 1, offloaded_at_ms=7_000 if ledger_id == 1 else None,
                    local_deleted=ledger_id == 1 and topic.endswith("/b"),
                )
            )  # fmt: skip
    return rows


def _cursor_rows() -> list[CursorRow]:
    return [
        CursorRow(topic=topic, name=name, durable=name != "reader", mark_delete_ledger=2, mark_delete_entry=-1,
                  last_active_ms=None if name == "reader" else 9_000, consumers=1 if name == "sub" else 0)
        for topic in (*IN_SCOPE, "persistent://acme/audit/x")
        for name in ("reader", "sub")
    ]  # fmt: skip


def _columnar_selection() -> Selection:
    state = SimpleNamespace(ledger_rows=_ledger_rows(), cursor_rows=_cursor_rows(), holds={})
    return Selection(state, BrokerConfig.from_layers(), frozenset(IN_SCOPE))


@pytest.mark.parametrize("batch_rows", [2, 5, 10_000], ids=["batches-cut-topics", "batches", "one-batch"])
def test_ledgers_and_cursors_built_a_batch_at_a_time_hold_each_in_scope_row(
    monkeypatch, tmp_path, batch_rows
):
    monkeypatch.setattr(snapshot_tables, "BATCH_ROWS", batch_rows)
    selection = _columnar_selection()
    expected_ledgers = [
        {"topic": r.topic, "ledgerId": r.ledger_id, "entries": r.entries, "size": r.size_bytes,
         "closedAtMs": r.closed_at_ms, "minEntryTsMs": r.min_entry_ts_ms, "maxEntryTsMs": r.max_entry_ts_ms,
         "entriesStored": r.entries_stored, "offloadAttempted": r.offload_uuid is not None,
         "offloadComplete": r.offload_complete, "offloadedAtMs": r.offloaded_at_ms,
         "localDeleted": r.local_deleted}
        for r in _ledger_rows()
        if r.topic in IN_SCOPE
    ]  # fmt: skip
    expected_cursors = [
        {"topic": r.topic, "name": r.name, "durable": r.durable, "markDeleteLedger": r.mark_delete_ledger,
         "markDeleteEntry": r.mark_delete_entry, "lastActiveMs": r.last_active_ms, "consumers": r.consumers}
        for r in _cursor_rows()
        if r.topic in IN_SCOPE
    ]  # fmt: skip
    for name, expected in (("ledgers", expected_ledgers), ("cursors", expected_cursors)):
        batches = list(snapshot_tables.BUILDERS[name](selection))
        assert all(batch.schema == contract.SNAPSHOT_TABLES[name].arrow_schema() for batch in batches)
        assert [row for batch in batches for row in batch.to_pylist()] == expected, name
        # Written clustered, as a snapshot writes it: row group b holds bucket b's topics, each topic's rows in
        # the order they came.
        path = tmp_path / f"{name}.parquet"
        assert write_parquet(path, contract.SNAPSHOT_TABLES[name], batches, buckets=2) == len(expected)
        clustered = [
            row
            for bucket in range(2)
            for row in sorted(
                (r for r in expected if contract.topic_bucket(r["topic"], 2) == bucket),
                key=lambda r: r["topic"],
            )
        ]
        assert pq.read_table(path).to_pylist() == clustered, name
