"""The store lives while housekeeping runs: between a run's snapshot and its apply, clients and operators change it
(through the store's client and admin paths), and apply decides against the store as it is (docs/RELIABILITY.md,
"The store lives").

First the probe that found it: a trim run planned and gated on a generated store, a durable subscription created at
`earliest` on every topic the plan trims, then the run applied. Apply must delete nothing under the new subscription.

Then the class, for every mechanism (the store scrub's repair too) and for purge and restore, on SQLite and on a real
PostgreSQL server: six topics of one shape, each planned; between the snapshot (for purge and restore: the apply that
logged the deletions) and the apply, one live change on each of five of them, the sixth applied as planned (the
control):

- ``t1``: a durable subscription created at ``earliest``;
- ``t2``: the durable subscription's cursor reset backward;
- ``t3``: a topic-level policy that keeps more (the one the mechanism decides on: retention, TTL, quota, ...);
- ``t4``: a hold placed;
- ``t5``: the topic deleted and created again under its name.

Each mechanism leaves each changed topic as that change requires, which is said per mechanism below and checked
against the store, not against the run's own report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.plan import read_table
from housekeeping.engine.restore import restore
from housekeeping.mechanisms.steps import (
    apply_step,
    plan_and_gate_in_process,
    purge_step,
    report_step,
    snapshot_step,
)
from housekeeping.store import admin, clients
from housekeeping.store.holds import place_hold
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import Store
from tests.conftest import write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

AS_OF = parse_as_of("2026-11-02T00:00:00Z")
MINUTE, DAY = 60_000, 86_400_000
OLD = AS_OF - 10 * DAY
NS = "live/ns"
TOPICS = [f"persistent://{NS}/t{i}" for i in range(6)]
CONTROL, NEW_SUB, RESET, RAISED, HELD, RECREATED = TOPICS
KEY = "customer-42"


# --- the probe ---------------------------------------------------------------------------------------------------


def test_a_subscription_created_at_earliest_after_the_snapshot_keeps_every_ledger_trim_planned(
    tmp_path, metadata_backend
):
    from housekeeping.store.generate import GenerateOptions, generate_store

    store = generate_store(
        tmp_path / "store", GenerateOptions(40, 7, 200, 12, 120, "2026-11-01T00:00:00Z", False), None
    )
    info = snapshot_step(store, "trim", run_id="probe", as_of_ms=AS_OF, actor="test")
    assert plan_and_gate_in_process(info.run_dir, "trim", "local[2]").success
    trimmed = sorted(
        {a["topic"] for a in read_table(info.run_dir, "actions") if a["action"] == "delete_ledger"}
    )
    assert len(trimmed) >= 20, "the generated store must give trim topics to trim"
    before = {topic: _ledger_ids(store, topic) for topic in trimmed}
    for topic in trimmed:
        clients.subscribe(store, topic, "late", now_ms=AS_OF, initial="earliest")
    result = apply_step(store, info.run_dir, purge_grace_seconds=0)
    assert result["ledgersDeleted"] == 0
    assert all(_ledger_ids(store, topic) == before[topic] for topic in trimmed)
    assert set(result["skippedTopics"]) == set(trimmed)
    assert all(
        "'late' at " in why and "created after the snapshot" in why
        for why in result["skippedTopics"].values()
    )
    _no_cursor_in_a_deleted_ledger(store)


# --- a store of six topics of one shape ----------------------------------------------------------------------


def _topic(cursors: dict, policies: dict | None = None) -> dict:
    """Ledgers 1-3 closed ten days ago (5 keyed entries each, KEY among them), ledger 4 current (2 entries)."""
    messages, ledgers = [], []
    for ledger_id in (1, 2, 3, 4):
        count = 2 if ledger_id == 4 else 5
        published = OLD + ledger_id * MINUTE if ledger_id < 4 else AS_OF - MINUTE
        for entry in range(count):
            key = KEY if entry == 0 else f"key-{entry}"
            messages.append(
                {
                    "ledgerId": ledger_id,
                    "entryId": entry,
                    "publishTime": published + entry,
                    "key": key,
                    "value": f"{key}-value-{ledger_id}-{entry}",
                }
            )
        size = sum(len(m["value"]) for m in messages if m["ledgerId"] == ledger_id)
        ledgers.append(
            {
                "ledgerId": ledger_id,
                "entries": count,
                "size": size,
                **({"timestamp": published + count} if ledger_id < 4 else {}),
            }
        )
    body = {"ledgers": ledgers, "cursors": cursors, "messages": messages, "lastActive": OLD}
    if policies:
        body["policies"] = policies
    return body


def _store(tmp_path: Path, namespace_policies: dict, cursor: str | None, broker: dict | None = None) -> Store:
    cursors = {} if cursor is None else {"sub": {"markDeletePosition": cursor, "lastActive": OLD}}
    document = {
        "broker": broker or {},
        "namespaces": {NS: namespace_policies},
        "topics": {topic: _topic(cursors) for topic in TOPICS},
    }
    return load_manifest(tmp_path / "store", write_manifest(tmp_path, document))


def _plan(store: Store, mechanism: str, run_id: str, **values: object) -> Path:
    info = snapshot_step(store, mechanism, run_id=run_id, as_of_ms=AS_OF, actor="test", values=values)
    gate = plan_and_gate_in_process(info.run_dir, mechanism, "local[2]")
    assert gate.success, gate.failed
    planned = {a["topic"] for a in read_table(info.run_dir, "actions")}
    assert set(TOPICS) <= planned, (
        f"{mechanism} must plan every topic of the store, planned {sorted(planned)}"
    )
    return info.run_dir


def _live_changes(store: Store, raised: dict, *, reset_to: str | None = "1:0") -> dict:
    """One change on each of t1..t5 (the module docstring), through the client and admin paths; returns t5's state
    as created again, which nothing may touch."""
    admin.subscribe(store, NEW_SUB, "late", initial="earliest", now_ms=AS_OF, actor="test")
    if reset_to is not None:
        admin.reset_cursor(store, RESET, "sub", position=reset_to, now_ms=AS_OF, actor="test")
    admin.set_policies(store, RAISED, raised, now_ms=AS_OF, actor="test")
    place_hold(store, HELD, reason="legal hold placed after the snapshot", actor="test")
    admin.delete_topic(store, RECREATED, now_ms=AS_OF, purge_grace_seconds=3600, force=True, actor="test")
    clients.create_topic(store, RECREATED, now_ms=AS_OF)
    clients.subscribe(store, RECREATED, "sub", now_ms=AS_OF, initial="earliest")
    return _state(store, RECREATED)


def _state(store: Store, topic: str) -> dict:
    return export_manifest(store)["topics"].get(topic)


def _ledger_ids(store: Store, topic: str) -> list[int]:
    return [ledger["ledgerId"] for ledger in _state(store, topic)["ledgers"]]


def _cursor(store: Store, topic: str, name: str = "sub") -> str:
    return _state(store, topic)["cursors"][name]["markDeletePosition"]


def _no_cursor_in_a_deleted_ledger(store: Store) -> None:
    """Nothing a cursor has not acknowledged was deleted: each cursor's mark-delete is in a listed ledger, or on the
    last entry of a ledger no longer listed with no other unlisted ledger holding entries between it and the first
    listed one (where trim leaves a cursor it fast-forwards: Pulsar's advanceCursorsIfNecessary)."""
    from sqlalchemy import select

    from housekeeping.store import metadata_schema as t

    with store.engine.connect() as conn:
        gone: dict[tuple[str, int], int] = {}
        for row in conn.execute(select(t.pending_deletions.c.topic, t.pending_deletions.c.ledger_row)):
            ledger = json.loads(row.ledger_row)
            gone[(row.topic, int(ledger["ledger_id"]))] = int(ledger.get("entries") or 0)
    for topic, body in export_manifest(store)["topics"].items():
        listed = sorted(ledger["ledgerId"] for ledger in body["ledgers"])
        for name, cursor in body["cursors"].items():
            ledger, entry = (int(part) for part in cursor["markDeletePosition"].split(":"))
            if ledger in listed:
                continue
            where = f"{topic} cursor {name} at {cursor['markDeletePosition']} (listed {listed})"
            assert (topic, ledger) in gone and entry == gone[(topic, ledger)] - 1, where
            between = [
                e for (tp, lid), e in gone.items() if tp == topic and ledger < lid < listed[0] and e > 0
            ]
            assert not between, where


def _apply(store: Store, run_dir: Path) -> dict:
    result = apply_step(store, run_dir, purge_grace_seconds=0)
    purge_step(store, run_dir)
    _no_cursor_in_a_deleted_ledger(store)
    return result


# --- every mechanism -----------------------------------------------------------------------------------------


def test_trim_keeps_what_a_new_or_reset_subscription_or_a_raised_retention_keeps(tmp_path, metadata_backend):
    store = _store(
        tmp_path, {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}}, "3:4"
    )
    run_dir = _plan(store, "trim", "trim-live")
    infinite = {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}
    recreated = _live_changes(store, infinite)
    result = _apply(store, run_dir)
    assert _ledger_ids(store, CONTROL) == [4]
    for topic in (NEW_SUB, RESET, RAISED, HELD):
        assert _ledger_ids(store, topic) == [1, 2, 3, 4], topic
    assert _state(store, RECREATED) == recreated
    assert result["appliedTopics"] == [CONTROL]
    assert "created after the snapshot" in result["skippedTopics"][NEW_SUB]
    assert "reset from 3:4 since the snapshot" in result["skippedTopics"][RESET]
    assert "retention in force changed since the snapshot" in result["skippedTopics"][RAISED]
    assert "deleted and created again" in result["skippedTopics"][RECREATED]
    journal = _journal(store, run_dir)
    assert "created after the snapshot" in journal[NEW_SUB]["why"]
    report = report_step(run_dir, dry_run=False).read_text()
    assert f"left alone: `{NEW_SUB}`" in report and "created after the snapshot" in report


def test_expiry_moves_no_cursor_a_raised_ttl_keeps_nor_one_reset_since(tmp_path, metadata_backend):
    store = _store(tmp_path, {"message_ttl_in_seconds": 3600}, "1:2")
    run_dir = _plan(store, "expiry", "expiry-live")
    recreated = _live_changes(store, {"message_ttl_in_seconds": 30 * 86_400})
    result = _apply(store, run_dir)
    assert _cursor(store, CONTROL) == "3:4"
    assert _cursor(store, NEW_SUB) == "3:4" and _cursor(store, NEW_SUB, "late") == "1:-1"
    assert _cursor(store, RESET) == "1:-1"  # reset behind the plan's start: left where the operator put it
    assert _cursor(store, RAISED) == "1:2" and _cursor(store, HELD) == "1:2"
    assert _state(store, RECREATED) == recreated
    assert "message TTL in force changed" in result["skippedTopics"][RAISED]


def test_backlog_evicts_nothing_when_the_cursors_or_the_quota_changed_since_the_snapshot(
    tmp_path, metadata_backend
):
    quota = {
        "backlog_quota_map": {"destination_storage": {"limitSize": 50, "policy": "consumer_backlog_eviction"}}
    }
    store = _store(tmp_path, quota, "1:2")
    run_dir = _plan(store, "backlog", "backlog-live")
    raised = {
        "backlog_quota_map": {
            "destination_storage": {"limitSize": 1 << 30, "policy": "consumer_backlog_eviction"}
        }
    }
    recreated = _live_changes(store, raised)
    result = _apply(store, run_dir)
    assert _cursor(store, CONTROL) != "1:2"
    assert _cursor(store, NEW_SUB) == "1:2" and _cursor(store, NEW_SUB, "late") == "1:-1"
    assert _cursor(store, RESET) == "1:-1"
    assert _cursor(store, RAISED) == "1:2" and _cursor(store, HELD) == "1:2"
    assert _state(store, RECREATED) == recreated
    assert "no eviction" in result["narrowedTopics"].get(NEW_SUB, "") + result["skippedTopics"].get(
        NEW_SUB, ""
    )
    assert "backlog quotas in force changed" in result["skippedTopics"][RAISED]
    report = report_step(run_dir, dry_run=False).read_text()
    assert f"`{RAISED}`: the backlog quotas in force changed" in report


def test_gc_deletes_no_topic_that_became_active_or_was_created_again(tmp_path, metadata_backend):
    inactive = {
        "inactive_topic_policies": {
            "inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
            "maxInactiveDurationSeconds": 3600,
            "deleteWhileInactive": True,
        }
    }
    store = _store(tmp_path, inactive, "4:1", broker={"brokerDeleteInactiveTopicsEnabled": True})
    # Every topic of the namespace goes: over the default blast radius, raised for this run.
    run_dir = _plan(store, "gc", "gc-live", max_deleted_topic_share=1.0)
    longer = {
        "inactive_topic_policies": {
            **inactive["inactive_topic_policies"],
            "maxInactiveDurationSeconds": 30 * 86_400,
        }
    }
    recreated = _live_changes(store, longer)
    _apply(store, run_dir)
    assert _state(store, CONTROL) is None
    for topic in (NEW_SUB, RESET, RAISED, HELD):
        assert _ledger_ids(store, topic) == [1, 2, 3, 4], topic
    assert _state(store, RECREATED) == recreated


def test_compaction_compacts_no_topic_whose_compaction_policy_changed_held_or_created_again(
    tmp_path, metadata_backend
):
    store = _store(tmp_path, {"compaction_threshold": 1}, "3:4")
    run_dir = _plan(store, "compaction", "compaction-live")
    recreated = _live_changes(store, {"compaction_threshold": 1 << 40})
    result = _apply(store, run_dir)
    compacted = {topic for topic, ledger in result["compactedLedgers"].items() if ledger is not None}
    # A new or reset subscription does not stop compaction (it deletes no raw entry: readers of the raw ledgers
    # read everything), so both are compacted with the control.
    assert compacted == {CONTROL, NEW_SUB, RESET}
    for topic in TOPICS[:5]:
        assert _ledger_ids(store, topic) == [1, 2, 3, 4], topic
    assert _state(store, RECREATED) == recreated


@pytest.mark.usefixtures("directory_tier")
def test_offload_copies_nothing_of_a_topic_whose_offload_policy_changed_or_was_created_again(
    tmp_path, metadata_backend
):
    policies = {"offload_policies": {"managedLedgerOffloadThresholdInSeconds": 0}}
    store = _store(tmp_path, policies, "3:4")
    run_dir = _plan(store, "offload", "offload-live")
    disabled = {
        "offload_policies": {
            "managedLedgerOffloadThresholdInBytes": -1,
            "managedLedgerOffloadThresholdInSeconds": -1,
        }
    }
    recreated = _live_changes(store, disabled)
    _apply(store, run_dir)

    def offloaded(topic: str) -> list[int]:
        return [ledger["ledgerId"] for ledger in _state(store, topic)["ledgers"] if ledger.get("offloaded")]

    # A hold does not stop a copy (nothing is deleted); a new or reset subscription neither.
    for topic in (CONTROL, NEW_SUB, RESET, HELD):
        assert offloaded(topic) == [1, 2, 3], topic
    assert offloaded(RAISED) == []
    assert _state(store, RECREATED) == recreated


def test_erasure_is_owed_whatever_changed_but_a_hold_and_leaves_a_new_topic_of_the_name_alone(
    tmp_path, metadata_backend, monkeypatch
):
    from housekeeping.mechanisms.erasure.requests import add_request

    monkeypatch.setenv("HOUSEKEEPING_ERASURE_GRACE_SECONDS", "0")
    store = _store(
        tmp_path, {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}, "3:4"
    )
    add_request(store, key=KEY, namespace=NS, reason="gdpr", requested_at_ms=AS_OF - DAY, actor="test")
    run_dir = _plan(store, "erasure", "erasure-live")
    recreated = _live_changes(
        store, {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}}
    )
    result = _apply(store, run_dir)
    assert set(result["appliedTopics"]) == {CONTROL, NEW_SUB, RESET, RAISED}
    assert HELD in result["skippedTopics"] and RECREATED in result["skippedTopics"]
    assert _state(store, RECREATED) == recreated


# --- purge and restore -------------------------------------------------------------------------------------------


def _trimmed(tmp_path: Path) -> tuple[Store, Path]:
    """Trim applied on every topic (ledgers 1-3 pending deletion, purgeable at the run's as-of), not purged yet."""
    store = _store(
        tmp_path, {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}}, "3:4"
    )
    run_dir = _plan(store, "trim", "trim-then-purge")
    result = apply_step(store, run_dir, purge_grace_seconds=0)
    assert result["appliedTopics"] == TOPICS
    return store, run_dir


def test_purge_keeps_what_a_raised_retention_or_a_hold_keeps_and_never_a_new_topics_files(
    tmp_path, metadata_backend
):
    store, run_dir = _trimmed(tmp_path)
    infinite = {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}
    recreated = _live_changes(store, infinite, reset_to="1:0")
    # A reset into a trimmed ledger and a subscription at earliest land on the first ledger still listed.
    assert _cursor(store, RESET) == "4:-1" and _cursor(store, NEW_SUB, "late") == "4:-1"
    files_before = {p for p in (store.root / "ledgers").rglob("*.parquet")}
    result = purge_step(store, run_dir)
    purged = {(item.rsplit(":", 1)[0], int(item.rsplit(":", 1)[1])) for item in result["purged"]}
    assert {(topic, ledger) for topic in (CONTROL, NEW_SUB, RESET) for ledger in (1, 2, 3)} <= purged
    assert not {item for item in purged if item[0] in (RAISED, HELD)}
    assert set(result["retained"]) == {f"{RAISED}:{ledger}" for ledger in (1, 2, 3)}
    assert set(result["held"]) == {f"{HELD}:{ledger}" for ledger in (1, 2, 3)}
    # The earlier t5's files went; the new t5's never.
    assert _state(store, RECREATED) == recreated
    kept = {p for p in (store.root / "ledgers").rglob("*.parquet")}
    assert all(p in kept for p in files_before if "/t3/" in str(p) or "/t4/" in str(p))
    assert restore(store, RAISED, as_of_ms=AS_OF, run_id="r") == [1, 2, 3]
    _no_cursor_in_a_deleted_ledger(store)


def test_restore_never_puts_an_earlier_topics_ledgers_into_a_new_one_of_its_name(tmp_path, metadata_backend):
    store, _ = _trimmed(tmp_path)
    infinite = {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}
    recreated = _live_changes(store, infinite)
    for topic in (NEW_SUB, RESET, RAISED, HELD):
        assert restore(store, topic, as_of_ms=AS_OF, run_id="r") == [1, 2, 3], topic
        assert _ledger_ids(store, topic) == [1, 2, 3, 4]
    before = export_manifest(store)
    with pytest.raises(InputError, match="belonged to an earlier topic of this name"):
        restore(store, RECREATED, as_of_ms=AS_OF, run_id="r")
    assert export_manifest(store) == before and _state(store, RECREATED) == recreated
    _no_cursor_in_a_deleted_ledger(store)


def _journal(store: Store, run_dir: Path) -> dict[str, dict]:
    """The apply's journal rows by topic: their detail."""
    from sqlalchemy import select

    from housekeeping.store import metadata_schema as t

    run_id = json.loads((run_dir / "apply" / "result.json").read_text())["runId"]
    with store.engine.connect() as conn:
        rows = conn.execute(select(t.journal).where(t.journal.c.run_id == run_id)).all()
    return {row.topic: json.loads(row.detail) for row in rows if row.topic}


def test_the_scrub_queues_no_orphan_of_a_held_topic_or_of_one_created_again(tmp_path, metadata_backend):
    import os
    import shutil

    store = _store(tmp_path, {}, "3:4")
    for topic in TOPICS:
        # An extra ledger directory no metadata names, an hour old: the scrub's orphan.
        orphan = store.ledger_dir(topic, 77)
        shutil.copytree(store.ledger_dir(topic, 1), orphan)
        for path in (orphan, *orphan.iterdir()):
            os.utime(path, (os.path.getmtime(path) - 3600,) * 2)
    run_dir = _plan(store, "scrub", "scrub-live", scrub_min_age_seconds=0)
    recreated = _live_changes(store, {"message_ttl_in_seconds": 60})
    result = _apply(store, run_dir)
    queued = {path.split("/")[-2] for path in (q.split(":", 1)[1] for q in result["orphansQueued"])}
    # No policy decides what the scrub queues; a hold and a topic created again under the name stop it.
    assert queued == {"t0", "t1", "t2", "t3"}
    assert "legal hold" in next(why for where, why in result["skippedTopics"].items() if "/t4/" in where)
    assert "created again" in next(why for where, why in result["skippedTopics"].items() if "/t5/" in where)
    assert _state(store, RECREATED) == recreated
