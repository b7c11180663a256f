"""The storage report page from its data (no Spark): every chart is inline SVG, the page works with nothing
on record yet, and it never reaches for the network (no script, no external link)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from housekeeping.observe.storage_report import plots, render_html

pytestmark = pytest.mark.unit

DAY = 86_400_000
T0 = 1_793_491_200_000  # 2026-11-01T00:00:00Z


def _data(**overrides):
    data = {
        "store": "/s",
        "asOf": "2026-11-03T00:00:00.000Z",
        "asOfMs": T0 + 2 * DAY,
        "namespaceHistory": {
            "acme/orders": [[T0, 3_000_000], [T0 + DAY, 1_000_000]],
            "public/default": [[T0, 5]],
        },
        "storedBytesNow": {"acme/orders": 1_000_000, "public/default": 5},
        "reclaimed": {"trim": {"purged": 1_500_000, "pending": 500_000}, "gc": {"purged": 0, "pending": 700}},
        "reclaimedByDay": {"2026-11-01": {"trim": 1_500_000}, "2026-11-02": {"trim": 500_000, "gc": 700}},
        "blockersFrom": "run-1",
        "topBlockers": [
            {
                "topic": "persistent://acme/orders/a",
                "kind": "slowest_subscription",
                "bytes": 900,
                "detail": "d <b>",
            },
            {"topic": "persistent://acme/orders/b", "kind": "current_ledger", "bytes": 100, "detail": "open"},
        ],
        "exceededQuotas": [
            {
                "namespace": "acme/orders",
                "topic": "persistent://acme/orders/a",
                "quotaType": "destination_storage",
                "policy": "producer_exception",
                "measured": 12,
                "limit": 10,
                "exceededSince": None,
            }
        ],
        "latestRuns": [
            {
                "mechanism": "trim",
                "runId": "run-1",
                "asOf": "2026-11-02T00:00:00.000Z",
                "dryRun": False,
                "gate": "REJECTED",
                "report": "/s/runs/trim/run-1/report/report.md",
                "dataDocs": "/s/runs/trim/run-1/gate/data_docs/index.html",
            }
        ],
        "runs": 3,
        "deletionLag": [
            {
                "namespace": "acme/orders",
                "lagSeconds": 7200.0,
                "deletableBytes": 900,
                "objectiveSeconds": 3600,
                "breached": True,
            },
            {
                "namespace": "public/default",
                "lagSeconds": 0.0,
                "deletableBytes": 0,
                "objectiveSeconds": 21600,
                "breached": False,
            },
        ],
        "deletionLagHistory": {"acme/orders": [[T0, 0.0], [T0 + DAY, 3600.0], [T0 + 2 * DAY, 7200.0]]},
        "latestWhatIf": {
            "runId": "manual__1",
            "page": "/s/reports/what-if/manual__1/index.html",
            "asOf": "2026-11-03T00:00:00.000Z",
            "what": "trim sweep of retention-time over 1h, 1d",
        },
    }
    data.update(overrides)
    return data


def test_every_chart_is_inline_svg_and_the_page_is_self_contained(tmp_path):
    data = _data()
    charts = plots(data)
    assert set(charts) == {"namespaces", "reclaimed", "blockers", "quotas", "deletion_lag"}
    assert all(svg.startswith("<svg") for svg in charts.values())
    html = render_html(data, charts, Path("/s/reports/storage"))
    assert html.count("<svg") == 5 and "<script" not in html
    # The deletion lag against its objective: acme/orders has waited 2 h for a 1 h objective.
    assert "Deletion lag per namespace" in html and "BREACHED" in html and "2h" in html
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "nothing may load from the network"
    assert "d &lt;b&gt;" in html, "text from the store is escaped"
    assert 'href="../../runs/trim/run-1/gate/data_docs/index.html"' in html, "links are relative to the page"
    assert 'class="rejected"' in html and "1.4 MiB" in html
    assert (
        '<a id="latest-what-if" href="../what-if/manual__1/index.html">trim sweep of retention-time' in html
    )


def test_a_store_with_nothing_on_record_still_gets_a_page(tmp_path):
    empty = _data(
        namespaceHistory={},
        storedBytesNow={},
        reclaimed={},
        reclaimedByDay={},
        blockersFrom=None,
        topBlockers=[],
        exceededQuotas=[],
        latestRuns=[],
        runs=0,
        latestWhatIf=None,
        deletionLag=[],
        deletionLagHistory={},
    )
    assert plots(empty) == {}
    html = render_html(empty, {}, tmp_path)
    assert (
        "Nothing deleted yet" in html and "No backlog quota is exceeded" in html and "No what-if yet" in html
    )


def test_a_time_axis_spans_its_data_not_years():
    """One deletion-lag history point once stretched the axis from 2025 to 2029: the limits are the data's own."""
    from housekeeping.engine.pages import pyplot
    from housekeeping.observe.storage_report import _date_axis, _dates

    plt = pyplot()
    for points in ([[1_795_000_000_000, 5.0]], [[1_795_000_000_000, 5.0], [1_795_086_400_000, 7.0]]):
        figure, axes = plt.subplots()
        axes.plot(_dates(points), [v for _, v in points])
        _date_axis(axes, [points])
        low, high = axes.get_xlim()  # matplotlib date numbers: days
        span = (points[-1][0] - points[0][0]) / 86_400_000
        assert span <= high - low <= span * 1.1 + 2 / 24 + 1e-6
        plt.close(figure)
