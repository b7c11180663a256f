"""The capacity report's files and the metrics read from the newest one."""

from __future__ import annotations

import json
import re

import pytest

from housekeeping.observe.capacity.report import read_latest, write_capacity_report
from housekeeping.observe.metrics.exposition import exposition
from housekeeping.store.store import Store
from tests.conftest import load_store
from tests.housekeeping.observe.capacity.test_forecast import AS_OF, DAYS, LEDGER, hourly_topic, manifest

pytestmark = pytest.mark.unit


def test_the_report_files_and_the_metrics_of_the_newest(capsys, tmp_path):
    quota = {"destination_storage": {"limitSize": 10 * LEDGER, "policy": "producer_request_hold"}}
    document = manifest(
        {"backlog_quota_map": quota},
        {"persistent://t/ns/a": hourly_topic(), "persistent://t/ns/b": hourly_topic(days=1)},
    )
    store = Store.open(load_store(capsys, tmp_path, document))
    assert read_latest(store) is None and b"housekeeping_capacity" not in exposition(store, as_of_ms=AS_OF)
    budgets = {"t": {"local": 10**15}}
    page = write_capacity_report(store, AS_OF, horizon_s=30 * 86_400, budgets=budgets)
    out = page.parent
    assert sorted(p.name for p in out.iterdir()) == [
        "forecast.json",
        "index.html",
        "usage-namespace.csv",
        "usage-tenant.csv",
        "usage.json",
    ]
    assert "<script" not in page.read_text() and "<svg" in page.read_text()
    latest = read_latest(store)
    assert latest["asOfMs"] == AS_OF and latest["forecast"] == json.loads((out / "forecast.json").read_text())
    text = exposition(store, as_of_ms=AS_OF).decode()
    assert (
        'housekeeping_capacity_seconds_until{limit="backlog_quota_size",namespace="t/ns",tenant="t"} 0.0'
        in text
    )
    assert 'housekeeping_capacity_seconds_until{limit="local_budget",namespace="",tenant="t"} +Inf' in text
    # The alerts' gauge: the same where the growth is steady (no change of rate found).
    assert (
        'housekeeping_capacity_soonest_seconds_until{limit="backlog_quota_size",namespace="t/ns",tenant="t"} 0.0'
        in text
    )
    # The day's chargeback, listed: b's 24 ledgers and a's first 456 the whole day; a's last 24 arrive hourly
    # during it (the one closing at the as-of: 0 hours).
    listed = ((DAYS * 24 - 24) * 24 + sum(range(24)) + 24 * 24) * LEDGER
    (value,) = re.findall(r'housekeeping_capacity_byte_hours\{tenant="t",tier="listed"\} (\S+)', text)
    assert float(value) == pytest.approx(listed)
