"""Only Pulsar's own system topics are system topics (docs/semantics.md §2), on every mechanism.

One store holds pairs: a real system topic (Pulsar's names, their partitions, the system namespaces) beside a
look-alike user topic (``__ledger_copy``, ``__change_events7``, ``__change_events-partition-01``, ...), in a
namespace whose retention (-1, 5 MB) keeps every consumed ledger. Through ``housekeeping plan``: trim deletes
the real system topics' consumed ledgers (retention (0, 0)) and keeps the look-alikes'; TTL, backlog eviction and
GC leave the real ones alone and treat the look-alikes as ordinary topics. Then the gate's own reading of the
names: a snapshot whose system flag or retention source was tampered misleads the planner, and the gate
refuses the plan.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.contract import TOPICS
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot_reads import read_snapshot_table
from housekeeping.mechanisms.steps import plan_and_gate_in_process, snapshot_step
from housekeeping.store.store import Store
from tests.conftest import run_cli, topic_body, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

AS_OF = "2026-11-02T00:00:00Z"
CLOSED = parse_as_of("2026-10-20T00:00:00Z")
POLICIES = {
    "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": 5},
    "message_ttl_in_seconds": 60,
    "backlog_quota_map": {"destination_storage": {"limitSize": 1000, "policy": "consumer_backlog_eviction"}},
    "inactive_topic_policies": {
        "inactiveTopicDeleteMode": "delete_when_no_subscriptions",
        "maxInactiveDurationSeconds": 60,
        "deleteWhileInactive": True,
    },
}
NO_RETENTION = {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}}


def _t(name: str) -> str:
    return name if "://" in name else f"persistent://acme/audit/{name}"


def _topic(size: int, mark_delete: str | None, **extra) -> dict:
    """Ledger 1 (10 entries, closed long before as-of) and an empty current ledger 2; one durable cursor."""
    cursors = {"sub": mark_delete} if mark_delete is not None else {}
    return topic_body([(1, 10, size, CLOSED), (2, 0, 0, None)], cursors, lastActive=CLOSED, **extra)


# Consumed ledger 1 (cursor on its last entry): trim decides by retention alone.
TRIM_REAL = [
    "__change_events",
    "__change_events-partition-0",
    "persistent://pulsar/system/transaction_coordinator_assign-partition-0",
]
TRIM_LOOK_ALIKE = ["__ledger_copy", "__change_events-partition-01", "persistent://pulsar/system/audit-log"]
# A 100-byte backlog: TTL expires it on ordinary topics.
TTL_REAL = ["__transaction_buffer_snapshot", "persistent://pulsar/system/audit-events"]
TTL_LOOK_ALIKE = ["__change_events7"]
# A 2000-byte backlog over the 1000-byte quota: evicted on ordinary topics (TTL also expires them).
BACKLOG_REAL = [
    "orders-partition-0-billing__transaction_pending_ack",
    "persistent://pulsar/system/audit-backlog",
]
BACKLOG_LOOK_ALIKE = ["__transaction_pending_ack_copy"]
# No subscription, idle, no retention: GC deletes ordinary topics (trim frees their ledger 1 too).
GC_REAL = ["__transaction_buffer_snapshot_segments", "persistent://pulsar/system/idle"]
GC_LOOK_ALIKE = ["__gc_me"]


def manifest() -> dict:
    topics = {}
    for name in TRIM_REAL + TRIM_LOOK_ALIKE:
        topics[_t(name)] = _topic(100, "1:9")
    for name in TTL_REAL + TTL_LOOK_ALIKE:
        topics[_t(name)] = _topic(100, "1:-1")
    for name in BACKLOG_REAL + BACKLOG_LOOK_ALIKE:
        topics[_t(name)] = _topic(2000, "1:-1")
    for name in GC_REAL + GC_LOOK_ALIKE:
        topics[_t(name)] = _topic(100, None, policies=NO_RETENTION)
    return {
        "broker": {},
        "namespaces": {"acme/audit": POLICIES, "pulsar/system": POLICIES},
        "topics": topics,
    }


@pytest.fixture(scope="module")
def store_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("system-topics") / "store"
    path = write_manifest(root.parent, manifest())
    from housekeeping.store.manifest.load import load_manifest

    load_manifest(root, path)
    return root


def _plan(capsys, root: Path, mechanism: str) -> dict:
    code, out, err = run_cli(
        capsys, "plan", mechanism, "--store", str(root), "--as-of", AS_OF, "--format", "json"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["gate"]["success"], document["gate"]["failed"]
    return document


def _topics(document: dict, action: str) -> set[str]:
    return {a["topic"] for a in document["actions"] if a["action"] == action}


def _all(names: list[str]) -> set[str]:
    return {_t(n) for n in names}


def test_trim_gives_only_real_system_topics_retention_zero(capsys, store_root):
    deleted = _topics(_plan(capsys, store_root, "trim"), "delete_ledger")
    # Real system topic names: (0, 0). GC's topics have a topic-level (0, 0). Look-alikes and an ordinary topic
    # of pulsar/system keep their consumed ledger under the namespace's (-1, 5 MB).
    assert deleted == _all(TRIM_REAL + GC_REAL + GC_LOOK_ALIKE)


def test_expiry_skips_real_system_topics_and_expires_look_alikes(capsys, store_root):
    document = _plan(capsys, store_root, "expiry")
    assert _topics(document, "move_cursor") == _all(TTL_LOOK_ALIKE + BACKLOG_LOOK_ALIKE)
    assert {b["topic"] for b in document["blockers"] if b["kind"] == "system_topic"} == _all(
        TTL_REAL + BACKLOG_REAL
    )


def test_backlog_quota_exempts_real_system_topics_and_evicts_look_alikes(capsys, store_root):
    document = _plan(capsys, store_root, "backlog")
    assert _topics(document, "move_cursor") == _all(BACKLOG_LOOK_ALIKE)


def test_gc_keeps_real_system_topics_and_deletes_look_alikes(capsys, store_root):
    document = _plan(capsys, store_root, "gc")
    assert _topics(document, "delete_topic") == _all(GC_LOOK_ALIKE)
    assert {b["topic"] for b in document["blockers"] if b["kind"] == "system_topic"} == _all(
        [n for n in TRIM_REAL + TTL_REAL + BACKLOG_REAL + GC_REAL + TRIM_LOOK_ALIKE if _is_system(n)]
    )


def _is_system(name: str) -> bool:
    from housekeeping.core.names import is_system_topic

    return is_system_topic(_t(name))


def _tamper(run_dir: Path, topic: str, **changes) -> None:
    rows = read_snapshot_table(run_dir, TOPICS)
    assert topic in {r["topic"] for r in rows}
    write_parquet(
        RunDir(run_dir).snapshot_table(TOPICS),
        TOPICS,
        [dict(r, **changes) if r["topic"] == topic else r for r in rows],
    )


@pytest.mark.parametrize(
    ("mechanism", "topic", "changes", "failing"),
    [
        ("expiry", TTL_REAL[0], {"isSystemTopic": False}, "not_system_topic"),
        ("backlog", BACKLOG_REAL[0], {"isSystemTopic": False}, "not_system_topic"),
        ("gc", GC_REAL[0], {"isSystemTopic": False}, "not_system_topic"),
        (
            "trim",
            TRIM_LOOK_ALIKE[0],
            {"retentionTimeMs": 0, "retentionSizeBytes": 0, "retentionSource": "system topic default"},
            "retention_default_fits_the_name",
        ),
        (
            "trim",
            TRIM_REAL[0],
            {
                "retentionTimeMs": 0,
                "retentionSizeBytes": 0,
                "retentionSource": "namespace acme/audit",
            },
            "retention_default_fits_the_name",
        ),
    ],
)
def test_the_gate_reads_the_name_itself_when_the_snapshot_is_wrong(
    store_root, tmp_path, mechanism, topic, changes, failing
):
    """The planner trusts the snapshot's flag or resolved retention and plans the wrong action; the gate applies
    the name rule on its own and refuses."""
    store = Store.open(store_root)
    info = snapshot_step(
        store,
        mechanism,
        run_id=f"tamper-{mechanism}",
        as_of_ms=parse_as_of(AS_OF),
        run_dir=tmp_path / "run",
        max_deleted_share=1.0,
        max_deleted_topic_share=1.0,
    )
    _tamper(info.run_dir, _t(topic), **changes)
    document = plan_and_gate_in_process(info.run_dir, mechanism, "local[2]")
    assert not document.success
    failed = {f.kwargs.get("column") for f in document.failed}
    assert failing in failed, document.failed
