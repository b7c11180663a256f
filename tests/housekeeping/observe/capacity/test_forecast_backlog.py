"""The backlog's own trend beside the stall answer (docs/semantics.md §12.3): a subscription that consumes half of
what producers add has its backlog fitted from the cursor history the runs kept, and the quota is met at that
trend's pace; the stall answer (the subscription stops now) stays the sooner one."""

from __future__ import annotations

import pytest

from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.steps import snapshot_step
from housekeeping.observe.capacity.forecast import forecast, kept_cursors
from housekeeping.observe.capacity.record import read_record
from housekeeping.store import clients
from housekeeping.store.cursor_history import record_cursors
from housekeeping.store.store import Store
from tests.conftest import load_store, topic_body

pytestmark = pytest.mark.unit

HOUR = 3_600_000
DAY = 24 * HOUR
MIB = 1024 * 1024
T0 = 1_790_000_000_000 - 1_790_000_000_000 % DAY
TOPIC = "persistent://t/b/a"


def _limit(document: dict) -> dict:
    (row,) = [r for r in document["limits"] if r["limit"] == "backlog_quota_size"]
    return row


def test_the_backlog_trend_follows_what_the_subscription_consumes(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOUSEKEEPING_CURSOR_HISTORY_INTERVAL_SECONDS", "0")
    # 1 MiB closed every hour for a week (10 entries each); a 96 MiB backlog quota.
    ledgers = [(i, 10, MIB, T0 + i * HOUR) for i in range(1, 169)] + [(169, 0, 0, None)]
    document = {
        "namespaces": {
            "t/b": {
                "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
                "backlog_quota_map": {
                    "destination_storage": {"limitSize": 96 * MIB, "policy": "producer_request_hold"}
                },
            }
        },
        "topics": {TOPIC: topic_body(ledgers, {"sub": "1:-1"})},
    }
    store = Store.open(load_store(capsys, tmp_path, document))
    as_of = T0 + 168 * HOUR
    stall = _limit(forecast(read_record(store, as_of), horizon_s=30 * 86_400))
    # Every 6 hours a run keeps the cursors: the subscription has acknowledged half of what arrived.
    for k in range(1, 29):
        at = T0 + 6 * k * HOUR
        clients.acknowledge(store, TOPIC, "sub", f"{3 * k}:9", now_ms=at)
        info = snapshot_step(store, "backlog", run_id=f"r{k}", as_of_ms=at, actor="test")
        record_cursors(
            store,
            RunDir(info.run_dir).snapshot_table("cursors"),
            as_of_ms=at,
            mechanism="backlog",
            run_id=f"r{k}",
        )
    row = _limit(
        forecast(read_record(store, as_of), horizon_s=30 * 86_400, cursor_history=kept_cursors(store))
    )
    # Now: 84 MiB behind (ledgers 85-168); at 24 MiB a day of ingest a stall meets 96 MiB in half a day, at the
    # backlog's own 12 MiB a day in one.
    assert row["currentBytes"] == pytest.approx(84 * MIB)
    trend = row["backlogTrend"]
    assert trend["bytesPerDay"] == pytest.approx(12 * MIB)
    assert trend["points"] == 28
    assert trend["secondsUntil"] == pytest.approx(86_400, rel=0.01)
    assert row["secondsUntil"] == pytest.approx(43_200, rel=0.05)
    # Without the history the row has no trend; the stall answer is the ingest's, as before.
    assert stall["backlogTrend"] is None
    # A backfilled as-of before the later runs reads only the runs it had.
    earlier = _limit(
        forecast(
            read_record(store, T0 + 72 * HOUR), horizon_s=30 * 86_400, cursor_history=kept_cursors(store)
        )
    )
    assert earlier["backlogTrend"]["points"] == 12
    assert earlier["backlogTrend"]["bytesPerDay"] == pytest.approx(12 * MIB)
