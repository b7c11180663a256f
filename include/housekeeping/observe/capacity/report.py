"""The capacity report the ``capacity_report`` DAG writes at each as-of: the period's chargeback (JSON and CSV for
a billing system) and the forecast with its backtest (JSON), and one offline page with their plots.

``<store>/reports/capacity/<as-of>/``: ``usage.json`` (by tenant and by namespace), ``usage-tenant.csv``,
``usage-namespace.csv``, ``forecast.json``, ``index.html``; ``<store>/reports/capacity/latest.json`` names the
newest as-of written (a backfill of an older date never moves it back). The metrics, the storage report and the
console read the latest.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.pages import bytes_formatter, pyplot, render, svg
from housekeeping.engine.run_dir import read_json, write_json
from housekeeping.observe.capacity.forecast import DAY_MS, forecast, kept_cursors
from housekeeping.observe.capacity.record import read_record
from housekeeping.observe.capacity.usage import usage
from housekeeping.store.store import Store

REPORT_DIR = Path("reports") / "capacity"
LATEST = "latest.json"
TEMPLATE = Path(__file__).parent / "templates" / "capacity_report.html.j2"
CSV_COLUMNS = ("tenant", "namespace", "topic", "tier", "byteHours", "avgBytes", "peakBytes")
# Saved policy backtests (``housekeeping backtest --save``): one directory each, the newest shown in the storage report.
BACKTESTS_DIR = Path("reports") / "backtests"
BACKTEST_TEMPLATE = Path(__file__).parent / "templates" / "backtest_report.html.j2"


def as_of_dir(store: Store, as_of_ms: int) -> Path:
    return store.root / REPORT_DIR / format_ms(as_of_ms).replace(":", "-")


def capacity_documents(
    store: Store, as_of_ms: int, *, horizon_s: int, period_ms: int = DAY_MS, budgets: Mapping | None = None
) -> dict[str, Any]:
    """The usage of the period ending at ``as_of_ms`` (by tenant and by namespace) and the forecast, from one read
    of the record."""
    record = read_record(store, as_of_ms)
    period = {"from_ms": as_of_ms - period_ms, "to_ms": as_of_ms}
    return {
        "usage": {by: usage(record, by=by, **period) for by in ("tenant", "namespace")},
        "forecast": forecast(
            record, horizon_s=horizon_s, budgets=budgets, cursor_history=kept_cursors(store)
        ),
    }


def _csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write_capacity_report(
    store: Store, as_of_ms: int, *, horizon_s: int, period_ms: int = DAY_MS, budgets: Mapping | None = None
) -> Path:
    """Write the as-of's files and page; returns the page."""
    documents = capacity_documents(store, as_of_ms, horizon_s=horizon_s, period_ms=period_ms, budgets=budgets)
    out = as_of_dir(store, as_of_ms)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "usage.json", documents["usage"])
    write_json(out / "forecast.json", documents["forecast"])
    for by, document in documents["usage"].items():
        (out / f"usage-{by}.csv").write_text(_csv(document["rows"]), encoding="utf-8")
    page = out / "index.html"
    page.write_text(render(TEMPLATE, out, r=documents, charts=plots(documents)), encoding="utf-8")
    latest_path = store.root / REPORT_DIR / LATEST
    latest = read_json(latest_path)
    if latest is None or latest["asOfMs"] <= as_of_ms:
        write_json(latest_path, {"asOfMs": as_of_ms, "asOf": format_ms(as_of_ms), "dir": out.name})
    return page


def list_reports(store: Store) -> list[dict[str, Any]]:
    """Every capacity report written (each as-of's directory with its page), newest as-of first."""
    root = store.root / REPORT_DIR
    found = []
    for page in root.glob("*/index.html") if root.is_dir() else ():
        forecast = read_json(page.parent / "forecast.json") or {}
        found.append({"dir": page.parent.name, "asOf": forecast.get("asOf") or page.parent.name})
    return sorted(found, key=lambda r: r["dir"], reverse=True)


def read_latest(store: Store) -> dict[str, Any] | None:
    """The newest capacity report: its as-of, its directory, its usage and forecast documents; None before one."""
    latest = read_json(store.root / REPORT_DIR / LATEST)
    if latest is None:
        return None
    out = store.root / REPORT_DIR / latest["dir"]
    return {
        **latest,
        "path": str(out / "index.html"),
        "usage": json.loads((out / "usage.json").read_text(encoding="utf-8")),
        "forecast": json.loads((out / "forecast.json").read_text(encoding="utf-8")),
    }


def nearest_limits(latest: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The newest report's limits met within its horizon at the sooner credible growth, nearest first, at most
    ``count``."""

    def soonest(row: dict[str, Any]) -> int | None:
        return row.get("soonestSecondsUntil", row["secondsUntil"])

    limits = [row for row in latest["forecast"]["limits"] if soonest(row) is not None]
    return sorted(limits, key=soonest)[:count]


def _usage_chart(plt: Any, documents: dict[str, Any]) -> str:
    rows = documents["usage"]["tenant"]["rows"]
    if not rows:
        return ""
    tenants = sorted({row["tenant"] for row in rows})
    tiers = ("local", "tier", "listed")
    figure, axes = plt.subplots(figsize=(9, 0.5 * len(tenants) + 1.2))
    height = 0.8 / len(tiers)
    for i, tier in enumerate(tiers):
        values = {row["tenant"]: row["avgBytes"] for row in rows if row["tier"] == tier}
        axes.barh(
            [k + i * height for k in range(len(tenants))],
            [values.get(tenant, 0) for tenant in tenants],
            height=height,
            label=tier,
        )
    axes.set_yticks([k + height for k in range(len(tenants))], tenants)
    axes.xaxis.set_major_formatter(bytes_formatter())
    axes.set_title("Average bytes per tenant over the period (local: x write quorum)")
    axes.legend(fontsize=8)
    axes.grid(axis="x", alpha=0.3)
    return svg(figure)


def _limits_chart(plt: Any, documents: dict[str, Any]) -> str:
    horizon = documents["forecast"]["horizonSeconds"]
    rows = [row for row in documents["forecast"]["limits"] if row["secondsUntil"] is not None]
    if not rows:
        return ""
    rows.sort(key=lambda row: row["secondsUntil"], reverse=True)
    labels = [f"{row['namespace'] or row['tenant']} {row['limit']}" for row in rows]
    days = [row["secondsUntil"] / 86_400 for row in rows]
    low = [(row["low"] if row["low"] is not None else row["secondsUntil"]) / 86_400 for row in rows]
    high = [(row["high"] if row["high"] is not None else horizon) / 86_400 for row in rows]
    errors = [
        [d - lo for d, lo in zip(days, low, strict=True)],
        [hi - d for d, hi in zip(days, high, strict=True)],
    ]
    figure, axes = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.2))
    colors = ["#c0392b" if d < 7 else "#e67e22" if d < 30 else "#2e86c1" for d in days]
    axes.barh(labels, days, xerr=errors, color=colors, capsize=3)
    for position, value in enumerate(days):
        if value == 0:
            axes.annotate(
                "met now", (0, position), xytext=(4, -3), textcoords="offset points", color="#c0392b"
            )
    axes.set_xlim(0, horizon / 86_400)
    axes.set_xlabel("days until met (bars: the fit's interval)")
    axes.set_title("Limits met within the horizon")
    axes.grid(axis="x", alpha=0.3)
    return svg(figure)


def _backtest_chart(plt: Any, documents: dict[str, Any]) -> str:
    rows = [row for row in documents["forecast"]["backtest"] if row["actualBytes"] > 0]
    if not rows:
        return ""
    figure, axes = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.2))
    names = [row["namespace"] for row in rows]
    positions = range(len(rows))
    axes.barh(
        [p + 0.2 for p in positions], [row["actualBytes"] for row in rows], height=0.4, label="happened"
    )
    axes.barh(
        [p - 0.2 for p in positions], [row["predictedBytes"] for row in rows], height=0.4, label="forecast"
    )
    axes.set_yticks(list(positions), names)
    axes.xaxis.set_major_formatter(bytes_formatter())
    axes.set_title(
        f"Backtest: ingest forecast {rows[0]['days']} days before the as-of, against what happened"
    )
    axes.legend(fontsize=8)
    return svg(figure)


def policy_backtest_chart(document: dict[str, Any], tier: str = "listed") -> str:
    """A backtest's bytes held over its period on ``tier``, per namespace the change touches: in fact (solid) and
    under the alternative (dashed), in the same colour."""
    from datetime import UTC, datetime

    series = {name: tiers[tier] for name, tiers in document.get("series", {}).items() if tier in tiers}
    if not series:
        return ""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(9, 3.6))
    for index, (namespace, points) in enumerate(sorted(series.items())):
        colour = f"C{index % 10}"
        times = [datetime.fromtimestamp(p[0] / 1000, UTC) for p in points]
        axes.plot(times, [p[1] for p in points], color=colour, label=f"{namespace}: in fact")
        axes.plot(
            times, [p[2] for p in points], color=colour, linestyle="--", label=f"{namespace}: the change"
        )
    axes.yaxis.set_major_formatter(bytes_formatter())
    axes.set_title(f"Bytes {tier} from {document['from']} to {document['to']} (UTC)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.autofmt_xdate()
    return svg(figure)


def save_backtest(store: Store, document: dict[str, Any], policies: Mapping[str, Any]) -> Path:
    """Write a backtest's page and data under ``<store>/reports/backtests/<period>-<change>/``; returns the page.
    The same change over the same period is one directory (written again)."""
    import hashlib

    change = hashlib.sha256(json.dumps(policies, sort_keys=True).encode()).hexdigest()[:10]
    name = f"{document['from']}--{document['to']}--{change}".replace(":", "-")
    out = store.root / BACKTESTS_DIR / name
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "report.json", {"policies": dict(policies), "backtest": document})
    charts = {tier: chart for tier in ("listed", "local") if (chart := policy_backtest_chart(document, tier))}
    page = out / "index.html"
    page.write_text(
        render(BACKTEST_TEMPLATE, out, d=document, policies=dict(policies), charts=charts), encoding="utf-8"
    )
    return page


def latest_backtest(store: Store) -> dict[str, Any] | None:
    """The backtest saved last (by its files' time): its page, the change and the document; None before one."""
    root = store.root / BACKTESTS_DIR
    saved = sorted(root.glob("*/report.json"), key=lambda p: p.stat().st_mtime_ns) if root.is_dir() else []
    if not saved:
        return None
    report = read_json(saved[-1]) or {}
    return {"path": str(saved[-1].parent / "index.html"), **report}


CHARTS = {"usage": _usage_chart, "limits": _limits_chart, "backtest": _backtest_chart}


def plots(documents: dict[str, Any]) -> dict[str, str]:
    plt = pyplot()
    return {name: chart for name, draw in CHARTS.items() if (chart := draw(plt, documents))}
