"""A backlog-quota run as the backlog_quota DAG runs it (its task steps in-process, then the report task's alert
notifier), checked against evictions worked out by hand from Pulsar's loop (docs/semantics.md §5),
not against the run's own plan."""

from __future__ import annotations

import json

import pytest

from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.registry import get_mechanism
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.manifest.load import load_manifest
from tests.conftest import cursor_positions, ledger_topic, run_steps, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

AS_OF = 1_793_491_200_000  # 2026-11-01T00:00:00Z
STAMPS = [AS_OF - 3_600_000 + i for i in range(20)]


def md(position: str, **extra) -> dict:
    return {"markDeletePosition": position, **extra}


def _topic(entries: int, **cursors) -> dict:
    """Ledger 1 closed with ``entries`` entries of 100 bytes, an empty current ledger 2."""
    ledgers = [(1, STAMPS[:entries], STAMPS[entries - 1] + 1), (2, [], None)]
    return ledger_topic(ledgers, cursors, entry_size=100)


def quota(policy: str) -> dict:
    return {"backlog_quota_map": {"destination_storage": {"limitSize": 1000, "policy": policy}}}


TOPICS = {
    # 2000 bytes >= 1000: skip (int)((2000 - 900) / 2000 x 20) = 11 entries on the slowest cursor (sub, 1:-1 ->
    # 1:10); the backlog is then 900 bytes, not above the 900-byte target: one step. sub2 (1:15) was never the
    # slowest; the reader never counts.
    "persistent://acme/evict/big": _topic(
        20, sub=md("1:-1"), sub2=md("1:15"), reader=md("1:-1", durable=False)
    ),
    "persistent://acme/evict/small": _topic(5, sub=md("1:-1")),  # 500 bytes: under the quota
    # Over the quota with producer_request_hold: nothing moves; the state is recorded and alerted.
    "persistent://acme/hold/big": _topic(20, sub=md("1:-1")),
}
MOVED = {("persistent://acme/evict/big", "sub"): "1:10"}


class _TaskInstance:
    """What the report task's notifier reads from its context: the snapshot task's XCom."""

    def __init__(self, run_dir) -> None:
        self.run_dir = run_dir

    def xcom_pull(self, task_ids: str) -> dict:
        assert task_ids == "take_snapshot"
        return {"run_dir": str(self.run_dir)}


def test_backlog_quota_evicts_exactly_the_expected_cursors_records_state_and_alerts(tmp_path):
    document = {
        "namespaces": {
            "acme/evict": quota("consumer_backlog_eviction"),
            "acme/hold": quota("producer_request_hold"),
        },
        "topics": TOPICS,
    }
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, document))
    before = cursor_positions(store)
    run_dir = run_steps(store, "backlog", AS_OF, "backlog-1")
    assert cursor_positions(store) == {key: MOVED.get(key, position) for key, position in before.items()}
    states = export_manifest(store)["store"]["backlogQuotaStates"]
    assert [(s["topic"], s["quotaType"], s["exceeded"], s["measured"]) for s in states] == [
        ("persistent://acme/hold/big", "destination_storage", True, 2000)
    ]
    for notifier in get_mechanism("backlog").report_notifiers():
        notifier.notify({"ti": _TaskInstance(run_dir)})
    (alert,) = [
        json.loads(line) for line in (store.root / "alerts" / "backlog_quota.jsonl").read_text().splitlines()
    ]
    assert alert["newlyExceeded"] == ["persistent://acme/hold/big destination_storage"]
    assert "EXCEEDED" in RunDir(run_dir).report_md.read_text()
