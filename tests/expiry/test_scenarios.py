"""A message-expiry run as the message_expiry DAG runs it (its task steps in-process), checked against positions
worked out by hand from Pulsar's rules (docs/semantics.md §4), not against the run's own plan."""

from __future__ import annotations

import pytest

from housekeeping.engine.run_dir import RunDir
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from tests.conftest import cursor_positions, ledger_topic, run_steps, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

AS_OF = 1_793_491_200_000  # 2026-11-01T00:00:00Z
S = 1000


def _topic(ledgers, **cursors):
    return ledger_topic(ledgers, {name: spec for name, spec in cursors.items()})


def md(position: str, **extra) -> dict:
    return {"markDeletePosition": position, **extra}


# TTL 60 s in acme/ttl (cutoff = as-of - 60 s); acme/nottl has none (broker default 0).
OLD = [AS_OF - 3600 * S, AS_OF - 3500 * S, AS_OF - 3400 * S]
MIXED = [(1, OLD, AS_OF - 3300 * S), (2, [AS_OF - 120 * S, AS_OF - 10 * S], None)]
TOPICS = {
    # 1:1 and 1:2 expired (ledger closed before the cutoff), 2:0 published 120 s ago expired, 2:1 (10 s) not.
    # Readers and the compaction cursor are never expired.
    "persistent://acme/ttl/partly": _topic(
        MIXED, sub=md("1:0"), reader=md("1:0", durable=False), __compaction=md("1:-1")
    ),
    "persistent://acme/ttl/caught-up": _topic(MIXED, sub=md("2:1")),
    "persistent://acme/nottl/old": _topic(MIXED, sub=md("1:0")),
    "persistent://acme/ttl/young": _topic([(1, [AS_OF - 30 * S, AS_OF - 20 * S], None)], sub=md("1:-1")),
    # A connected consumer and a small backlog: expire only when the oldest unacknowledged entry is older than
    # 1.5 x TTL = 90 s. 80 s: blocked; 100 s: both entries (100 s, 70 s) are past the 60 s cutoff.
    "persistent://acme/ttl/guarded": _topic(
        [(1, [AS_OF - 80 * S, AS_OF - 70 * S], None)], sub=md("1:-1", consumers=1)
    ),
    "persistent://acme/ttl/guarded-old": _topic(
        [(1, [AS_OF - 100 * S, AS_OF - 70 * S], None)], sub=md("1:-1", consumers=1)
    ),
}
MOVED = {
    ("persistent://acme/ttl/partly", "sub"): "2:0",
    ("persistent://acme/ttl/guarded-old", "sub"): "1:1",
}


def test_message_expiry_moves_exactly_the_expected_cursors_and_a_replay_changes_nothing(tmp_path):
    document = {
        "namespaces": {"acme/ttl": {"message_ttl_in_seconds": 60}, "acme/nottl": {}},
        "topics": TOPICS,
    }
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, document))
    before = cursor_positions(store)
    run_dir = run_steps(store, "expiry", AS_OF, "expiry-1")
    after = cursor_positions(store)
    assert after == {key: MOVED.get(key, position) for key, position in before.items()}
    topics = export_manifest(store)["topics"]
    for topic, _ in MOVED:
        assert topics[topic]["lastActive"] == AS_OF, (
            "a topic whose backlog was acknowledged was active until now"
        )
    assert "Message expiry (TTL) report" in RunDir(run_dir).report_md.read_text()
    run_steps(store, "expiry", AS_OF, "expiry-2")
    assert cursor_positions(store) == after, "a replay of the same logical time changes nothing"
