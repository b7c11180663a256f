"""The storage report: one HTML page a person would rather look at than read, rebuilt by the storage_report DAG
each time a housekeeping DAG's apply step changes the store (its Asset event).

From the store alone (no Spark; the metadata and the run directories are small):

- bytes per namespace over time, from the store's own record (docs/semantics.md §12.1); and now, split by tier
  (only local, offloaded with the local copy still kept, only in the object tier);
- bytes reclaimed per mechanism: the pending-deletion log (ledgers and compacted ledgers deleted, by the run
  that deleted them; restored ones excluded), split into purged and still restorable; the local copies of
  offloaded ledgers apart (their data stays in the object tier);
- the top blockers: what keeps the most bytes in the newest trim run (stale subscriptions first);
- backlog-quota states: the exceeded quotas now, per namespace;
- the latest run of each mechanism, with its gate verdict and a link to its Great Expectations Data Docs;
- deletion lag per namespace against its objective (``HOUSEKEEPING_DELETION_LAG_OBJECTIVES``), now and over time
  (each report adds its as-of's figures to ``deletion_lag_history.json``); a breach is alerted by the DAG.

Plots are static SVG drawn by matplotlib and inlined into the page: it opens from disk, offline, with no
JavaScript and no CDN. Written to ``<store>/reports/storage/index.html`` (plus ``report.json``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from housekeeping.core.settings import lag_objective, parse_lag_objectives
from housekeeping.core.timeutil import format_ms
from housekeeping.engine.documents import read_gate_result, read_run_info
from housekeeping.engine.pages import bytes_formatter, pyplot, render, svg
from housekeeping.engine.run_dir import RunDir, read_json, write_json
from housekeeping.observe.metrics.deletion_lag import read_deletion_lag
from housekeeping.store import metadata_schema as t
from housekeeping.store.store import LOCAL_COPY_KIND, RUNS_DIR, Store, read_transaction
from housekeeping.what_if.report import read_latest

REPORT_DIR = Path("reports") / "storage"
TOP_BLOCKERS = 15
TEMPLATE = Path(__file__).parent / "templates" / "storage_report.html.j2"


@dataclass(frozen=True)
class _StoreFacts:
    """What the page reads of the metadata, in one read transaction."""

    run_mechanism: dict[str, str]
    deleted: list[Any]  # pending deletions not restored: (run_id, status, deleted_as_of_ms, size_bytes)
    now_bytes: dict[str, int]  # namespace -> bytes in the ledger lists now
    tier_rows: list[Any]  # (namespace, offload_complete, local_deleted, bytes) of the ledger lists now
    quotas: list[Any]  # exceeded backlog quotas with their topic's namespace

    @classmethod
    def read(cls, store: Store) -> _StoreFacts:
        p, q = t.pending_deletions.c, t.backlog_quota_states.c
        with read_transaction(store.engine) as conn:
            return cls(
                dict(conn.execute(select(t.journal.c.run_id, t.journal.c.mechanism).distinct()).all()),
                conn.execute(
                    select(p.run_id, p.status, p.deleted_as_of_ms, p.size_bytes, p.kind).where(
                        p.status != "restored"
                    )
                ).all(),
                dict(
                    conn.execute(
                        select(t.topics.c.namespace, func.coalesce(func.sum(t.ledgers.c.size_bytes), 0))
                        .select_from(t.topics.outerjoin(t.ledgers, t.ledgers.c.topic == t.topics.c.name))
                        .group_by(t.topics.c.namespace)
                    ).all()
                ),
                conn.execute(
                    select(
                        t.topics.c.namespace,
                        t.ledgers.c.offload_complete,
                        t.ledgers.c.local_deleted,
                        func.sum(t.ledgers.c.size_bytes),
                    )
                    .join(t.topics, t.topics.c.name == t.ledgers.c.topic)
                    .group_by(t.topics.c.namespace, t.ledgers.c.offload_complete, t.ledgers.c.local_deleted)
                ).all(),
                conn.execute(
                    select(
                        t.topics.c.namespace,
                        q.topic,
                        q.quota_type,
                        q.policy,
                        q.measured_value,
                        q.limit_value,
                        q.exceeded_since_ms,
                    )
                    .join(t.topics, t.topics.c.name == q.topic)
                    .where(q.exceeded)
                    .order_by(t.topics.c.namespace, q.topic)
                ).all(),
            )


HISTORY_DAYS = 30
HISTORY_POINTS = 61


def _history(store: Store, as_of_ms: int) -> dict[str, Any]:
    """Bytes in each namespace's ledger lists over the last ``HISTORY_DAYS`` (or since the record's first entry),
    from the store's record (docs/semantics.md §12.1): not from the run directories, which grow with every run."""
    from housekeeping.observe.capacity.record import read_record
    from housekeeping.observe.capacity.usage import series

    return series(read_record(store, as_of_ms), "listed", HISTORY_DAYS, HISTORY_POINTS)


def _by_tier(facts: _StoreFacts) -> dict[str, dict[str, int]]:
    """Per namespace, the ledger lists' bytes by where their copies are: ``localOnly`` (never offloaded, or an
    offload that did not complete), ``both`` (offloaded, the local copy kept until the deletion lag passes) and
    ``tierOnly`` (offloaded, the local copy deleted)."""
    split: dict[str, dict[str, int]] = {
        ns: {"localOnly": 0, "both": 0, "tierOnly": 0} for ns in sorted(facts.now_bytes)
    }
    for namespace, complete, local_deleted, size in facts.tier_rows:
        where = "localOnly" if not complete else ("tierOnly" if local_deleted else "both")
        split[namespace][where] += int(size or 0)
    return split


def _local_copies(facts: _StoreFacts) -> dict[str, int]:
    """Local copies of offloaded ledgers deleted (the data stays in the object tier): purged or pending."""
    freed = {"purged": 0, "pending": 0}
    for row in facts.deleted:
        if row.kind == LOCAL_COPY_KIND:
            freed["purged" if row.status == "purged" else "pending"] += row.size_bytes
    return freed


def _reclaimed(facts: _StoreFacts) -> tuple[dict[str, Any], dict[str, Any]]:
    """Bytes deleted per mechanism (purged, or waiting for purge), and per day of the decisions' as-of; a local
    copy of an offloaded ledger is not data deleted (``_local_copies``)."""
    reclaimed: dict[str, dict[str, int]] = defaultdict(lambda: {"purged": 0, "pending": 0})
    by_day: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in facts.deleted:
        if row.kind == LOCAL_COPY_KIND:
            continue
        mechanism = facts.run_mechanism.get(row.run_id, "other")  # every deleting run journals itself
        reclaimed[mechanism]["purged" if row.status == "purged" else "pending"] += row.size_bytes
        by_day[format_ms(row.deleted_as_of_ms)[:10]][mechanism] += row.size_bytes
    return (
        {m: dict(v) for m, v in sorted(reclaimed.items())},
        {day: dict(v) for day, v in sorted(by_day.items())},
    )


def _latest_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {run["mechanism"]: run for run in runs}
    return [
        {
            "mechanism": mechanism,
            "runId": run["runId"],
            "asOf": run["asOf"],
            "dryRun": (run["report"] or {}).get("dryRun"),
            "gate": run["gate"],
            "report": run["reportPath"],
            "dataDocs": run["dataDocs"],
        }
        for mechanism, run in sorted(latest.items())
    ]


def collect(store: Store, as_of_ms: int, objectives: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Everything the page shows, as data (also written as report.json). ``objectives``: deletion-lag
    objectives per namespace (default: the settings' default)."""
    objectives = objectives if objectives is not None else parse_lag_objectives(None)
    runs = _runs(store)
    facts = _StoreFacts.read(store)
    reclaimed, reclaimed_by_day = _reclaimed(facts)
    # The newest trim run: its report ranks what keeps bytes.
    latest_trim = next(
        (r for r in reversed(runs) if (r.get("report") or {}).get("topBlockers") is not None), None
    )
    return {
        "store": str(store.root),
        "asOf": format_ms(as_of_ms),
        "asOfMs": as_of_ms,
        "namespaceHistory": _history(store, as_of_ms),
        "storedBytesNow": {ns: int(v) for ns, v in sorted(facts.now_bytes.items())},
        "storedBytesByTier": _by_tier(facts),
        "reclaimed": reclaimed,
        "localCopiesReclaimed": _local_copies(facts),
        "reclaimedByDay": reclaimed_by_day,
        "blockersFrom": latest_trim["runId"] if latest_trim else None,
        "topBlockers": (latest_trim["report"]["topBlockers"] or [])[:TOP_BLOCKERS] if latest_trim else [],
        "exceededQuotas": [
            {
                "namespace": q.namespace,
                "topic": q.topic,
                "quotaType": q.quota_type,
                "policy": q.policy,
                "measured": q.measured_value,
                "limit": q.limit_value,
                "exceededSince": format_ms(q.exceeded_since_ms) if q.exceeded_since_ms else None,
            }
            for q in facts.quotas
        ],
        "latestRuns": _latest_runs(runs),
        "runs": len(runs),
        # The policy_what_if DAG's latest report (what a policy change would free), if any.
        "latestWhatIf": read_latest(store.root),
        "deletionLag": deletion_lag_status(store, as_of_ms, objectives),
        "mechanismFigures": _mechanism_figures(store, as_of_ms),
        "capacity": _capacity(store),
        # The policy backtest saved last (``housekeeping backtest --save``), if any.
        "latestBacktest": _backtest(store),
    }


def _backtest(store: Store) -> dict[str, Any] | None:
    from housekeeping.observe.capacity.report import latest_backtest

    return latest_backtest(store)


def _capacity(store: Store) -> dict[str, Any] | None:
    """The newest capacity report: its page and the limits it finds met within its horizon, nearest first."""
    from housekeeping.observe.capacity.report import nearest_limits, read_latest

    latest = read_latest(store)
    if latest is None:
        return None
    return {"asOf": latest["asOf"], "path": latest["path"], "nearest": nearest_limits(latest, TOP_BLOCKERS)}


def _mechanism_figures(store: Store, as_of_ms: int) -> list[dict[str, Any]]:
    """Each mechanism's own latest figures (``Mechanism.metric_samples``: the store scrub's), timestamps as dates; a
    non-zero count of missing, mismatched or not-freed items is marked."""
    from housekeeping.mechanisms.registry import MECHANISMS

    figures = []
    for mechanism in MECHANISMS.values():
        for name, help_text, value in mechanism.metric_samples(store, as_of_ms):
            shown = format_ms(int(value * 1000)) if name.endswith("_timestamp_seconds") else f"{value:g}"
            alert = value > 0 and any(w in name for w in ("missing", "mismatched", "not_freed"))
            figures.append(
                {"mechanism": mechanism.name, "name": name, "help": help_text, "value": shown, "alert": alert}
            )
    return figures


def deletion_lag_status(store: Store, as_of_ms: int, objectives: Mapping[str, int]) -> list[dict[str, Any]]:
    """Per namespace: the deletion lag at ``as_of_ms`` (housekeeping.observe.metrics), its objective, and whether it is
    breached (lag above the objective)."""
    rows = []
    for namespace, (seconds, deletable) in sorted(read_deletion_lag(store, as_of_ms).items()):
        objective = lag_objective(namespace, objectives)
        rows.append(
            {
                "namespace": namespace,
                "lagSeconds": seconds,
                "deletableBytes": deletable,
                "objectiveSeconds": objective,
                "breached": objective is not None and seconds > objective,
            }
        )
    return rows


LAG_HISTORY = "deletion_lag_history.json"


def record_lag_history(out_dir: Path, data: dict[str, Any]) -> dict[str, list[list[float]]]:
    """Add this report's lag per namespace at its as-of to the history (a rerun of the same as-of replaces its
    point, so a backfill replays the same history); returns namespace -> [[as-of ms, lag seconds], ...]."""
    path = out_dir / LAG_HISTORY
    history: dict[str, dict[str, float]] = read_json(path) or {}
    history[str(data["asOfMs"])] = {row["namespace"]: row["lagSeconds"] for row in data["deletionLag"]}
    write_json(path, history)
    series: dict[str, list[list[float]]] = defaultdict(list)
    for as_of, lags in sorted(history.items(), key=lambda item: int(item[0])):
        for namespace, seconds in lags.items():
            series[namespace].append([int(as_of), seconds])
    return dict(sorted(series.items()))


def _runs(store: Store) -> list[dict[str, Any]]:
    """Every run directory with a snapshot, oldest as-of first; the report, gate verdict and Data Docs read only
    for the newest run of each mechanism (the page shows no other)."""
    runs = []
    for run_json in (store.root / RUNS_DIR).glob("*/*/snapshot/run.json"):
        run = RunDir(run_json.parent.parent)
        info = read_run_info(run)
        runs.append(
            {
                "runId": info.run_id,
                "mechanism": info.mechanism,
                "asOf": info.as_of,
                "asOfMs": info.as_of_ms,
                # Only to order runs of the same as-of (a rerun or a manual run beside a backfill): audit time.
                "takenAtMs": info.taken_at_wall_clock_ms or 0,
                "dir": run,
            }
        )
    runs.sort(key=lambda r: (r["asOfMs"], r["takenAtMs"], r["runId"]))
    newest = {run["mechanism"]: run for run in runs}
    for run in newest.values():
        directory = run["dir"]
        report, gate = read_json(directory.report_json), read_gate_result(directory)
        run["report"] = report
        run["reportPath"] = str(directory.report_md) if report is not None else None
        run["gate"] = None if gate is None else ("passed" if gate.success else "REJECTED")
        run["dataDocs"] = str(directory.data_docs_index) if directory.data_docs_index.is_file() else None
    return runs


# ----------------------------------------------------------------------------------------------- plots


def _dates(points: list[Any]) -> list[Any]:
    from datetime import UTC, datetime

    return [datetime.fromtimestamp(ms / 1000, UTC) for ms, _ in points]


def _date_axis(axes: Any, series: list[list[Any]]) -> None:
    """Dates on the x axis, spanning the data: matplotlib alone widens one point (or points at one time) to years
    around it, so the limits are the data's own, padded by 5 % of its span and at least an hour."""
    from datetime import timedelta

    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    stamps = [stamp for points in series for stamp in _dates(points)]
    if stamps:
        low, high = min(stamps), max(stamps)
        pad = max((high - low) * 0.05, timedelta(hours=1))
        axes.set_xlim(low - pad, high + pad)
    locator = AutoDateLocator(maxticks=8)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))


def _namespaces_chart(plt: Any, data: dict[str, Any]) -> str:
    history = {ns: pts for ns, pts in data["namespaceHistory"].items() if pts}
    if not history:
        return ""
    figure, axes = plt.subplots(figsize=(9, 3.6))
    for namespace, points in history.items():
        axes.plot(_dates(points), [b for _, b in points], marker="o", markersize=3, label=namespace)
    axes.yaxis.set_major_formatter(bytes_formatter())
    _date_axis(axes, list(history.values()))
    axes.set_title("Bytes in the ledger lists per namespace (UTC)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    return svg(figure)


def _reclaimed_chart(plt: Any, data: dict[str, Any]) -> str:
    by_day = data["reclaimedByDay"]
    if not by_day:
        return ""
    mechanisms = sorted({m for v in by_day.values() for m in v})
    days = list(by_day)
    figure, axes = plt.subplots(figsize=(9, 3.2))
    bottom = [0] * len(days)
    for mechanism in mechanisms:
        values = [by_day[d].get(mechanism, 0) for d in days]
        axes.bar(days, values, bottom=bottom, label=mechanism)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axes.yaxis.set_major_formatter(bytes_formatter())
    axes.set_title("Bytes reclaimed per mechanism, by day of the decisions' as-of")
    axes.legend(fontsize=8)
    axes.grid(axis="y", alpha=0.3)
    return svg(figure)


def _blockers_chart(plt: Any, data: dict[str, Any]) -> str:
    blockers = data["topBlockers"]
    if not blockers:
        return ""
    figure, axes = plt.subplots(figsize=(9, 0.3 * len(blockers) + 1))
    labels = [f"{b['topic'].split('://', 1)[-1]} ({b['kind']})" for b in blockers][::-1]
    colors = ["#c0392b" if b["kind"] == "slowest_subscription" else "#7f8c8d" for b in blockers][::-1]
    axes.barh(labels, [b["bytes"] for b in blockers][::-1], color=colors)
    axes.xaxis.set_major_formatter(bytes_formatter())
    axes.set_title("Top blockers: bytes kept (red: a subscription that has not consumed them)")
    axes.grid(axis="x", alpha=0.3)
    return svg(figure)


def _deletion_lag_chart(plt: Any, data: dict[str, Any]) -> str:
    lag_history = {ns: pts for ns, pts in (data.get("deletionLagHistory") or {}).items() if pts}
    if not lag_history:
        return ""
    figure, axes = plt.subplots(figsize=(9, 3.2))
    for namespace, points in lag_history.items():
        axes.plot(_dates(points), [s / 3600 for _, s in points], marker="o", markersize=3, label=namespace)
    for objective in sorted(
        {row["objectiveSeconds"] for row in data["deletionLag"] if row["objectiveSeconds"]}
    ):
        axes.axhline(objective / 3600, color="#c0392b", linestyle="--", linewidth=1)
    _date_axis(axes, list(lag_history.values()))
    axes.set_ylabel("hours")
    axes.set_title("Deletion lag per namespace (dashed: objective)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    return svg(figure)


def _quotas_chart(plt: Any, data: dict[str, Any]) -> str:
    quotas = data["exceededQuotas"]
    if not quotas:
        return ""
    per_namespace: dict[str, int] = defaultdict(int)
    for q in quotas:
        per_namespace[q["namespace"]] += 1
    figure, axes = plt.subplots(figsize=(9, 0.35 * len(per_namespace) + 1))
    axes.barh(list(per_namespace), list(per_namespace.values()), color="#e67e22")
    axes.set_title("Exceeded backlog quotas per namespace (now)")
    axes.xaxis.get_major_locator().set_params(integer=True)
    return svg(figure)


CHARTS = {
    "namespaces": _namespaces_chart,
    "reclaimed": _reclaimed_chart,
    "blockers": _blockers_chart,
    "deletion_lag": _deletion_lag_chart,
    "quotas": _quotas_chart,
}


def plots(data: dict[str, Any]) -> dict[str, str]:
    """Inline SVG per chart that has something to draw."""
    from housekeeping.observe.capacity.report import policy_backtest_chart

    plt = pyplot()
    charts = {name: chart for name, draw in CHARTS.items() if (chart := draw(plt, data))}
    latest = data.get("latestBacktest")
    if latest and (chart := policy_backtest_chart(latest["backtest"])):
        charts["backtest"] = chart
    return charts


# ----------------------------------------------------------------------------------------------- page


def render_html(data: dict[str, Any], charts: dict[str, str], out_dir: Path) -> str:
    return render(TEMPLATE, out_dir, r=data, charts=charts)


def write_storage_report(store: Store, as_of_ms: int, objectives: Mapping[str, int] | None = None) -> Path:
    """Build the page and its data; returns the path of index.html."""
    out_dir = store.root / REPORT_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    data = collect(store, as_of_ms, objectives)
    data["deletionLagHistory"] = record_lag_history(out_dir, data)
    (out_dir / "report.json").write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    page = out_dir / "index.html"
    page.write_text(render_html(data, plots(data), out_dir), encoding="utf-8")
    return page
