"""The storage report: one HTML page a person would rather look at than read, rebuilt by the storage_report DAG
each time a housekeeping DAG's apply step changes the store (its Asset event).

From the store alone (no Spark; the metadata and the run directories are small):

- bytes per namespace over time: every run's snapshot records each namespace's stored bytes at its as-of;
- bytes reclaimed per mechanism: the pending-deletion log (ledgers and compacted ledgers deleted, by the run
  that deleted them; restored ones excluded), split into purged and still restorable;
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
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from housekeeping import metadata_schema as t
from housekeeping.contract import NAMESPACES, RunDir, read_json, read_jsonl, read_run_info, write_json
from housekeeping.metrics import read_deletion_lag
from housekeeping.pages import bytes_formatter, pyplot, render, svg
from housekeeping.settings import lag_objective, parse_lag_objectives
from housekeeping.store import RUNS_DIR, Store, read_transaction
from housekeeping.timeutil import format_ms
from housekeeping.what_if_report import read_latest

REPORT_DIR = Path("reports") / "storage"
TOP_BLOCKERS = 15


def collect(store: Store, as_of_ms: int, objectives: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Everything the page shows, as data (also written as report.json). ``objectives``: deletion-lag
    objectives per namespace (default: the settings' default)."""
    objectives = objectives if objectives is not None else parse_lag_objectives(None)
    runs = _runs(store)
    with read_transaction(store.engine) as conn:
        run_mechanism = dict(conn.execute(select(t.journal.c.run_id, t.journal.c.mechanism).distinct()).all())
        deleted = conn.execute(
            select(
                t.pending_deletions.c.run_id,
                t.pending_deletions.c.status,
                t.pending_deletions.c.deleted_as_of_ms,
                t.pending_deletions.c.size_bytes,
            ).where(t.pending_deletions.c.status != "restored")
        ).all()
        now_bytes = dict(
            conn.execute(
                select(t.topics.c.namespace, func.coalesce(func.sum(t.ledgers.c.size_bytes), 0))
                .select_from(t.topics.outerjoin(t.ledgers, t.ledgers.c.topic == t.topics.c.name))
                .group_by(t.topics.c.namespace)
            ).all()
        )
        quotas = conn.execute(
            select(
                t.topics.c.namespace,
                t.backlog_quota_states.c.topic,
                t.backlog_quota_states.c.quota_type,
                t.backlog_quota_states.c.policy,
                t.backlog_quota_states.c.measured_value,
                t.backlog_quota_states.c.limit_value,
                t.backlog_quota_states.c.exceeded_since_ms,
            )
            .join(t.topics, t.topics.c.name == t.backlog_quota_states.c.topic)
            .where(t.backlog_quota_states.c.exceeded)
            .order_by(t.topics.c.namespace, t.backlog_quota_states.c.topic)
        ).all()

    history: dict[str, dict[int, int]] = defaultdict(dict)
    for run in runs:
        for row in run["namespaces"]:
            history[row["namespace"]][run["asOfMs"]] = row["storedBytes"]
    for namespace, stored in now_bytes.items():
        history[namespace].setdefault(as_of_ms, int(stored))

    reclaimed: dict[str, dict[str, int]] = defaultdict(lambda: {"purged": 0, "pending": 0})
    reclaimed_by_day: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in deleted:
        mechanism = run_mechanism.get(row.run_id, "other")  # every deleting run journals itself
        reclaimed[mechanism]["purged" if row.status == "purged" else "pending"] += row.size_bytes
        reclaimed_by_day[format_ms(row.deleted_as_of_ms)[:10]][mechanism] += row.size_bytes

    # The newest run whose report ranks what keeps bytes (consumed-ledger trim's does).
    latest_trim = next(
        (r for r in reversed(runs) if (r["report"] or {}).get("topBlockers") is not None), None
    )
    blockers = (latest_trim["report"]["topBlockers"] or [])[:TOP_BLOCKERS] if latest_trim else []
    latest: dict[str, dict[str, Any]] = {}
    for run in runs:
        latest[run["mechanism"]] = run
    return {
        "store": str(store.root),
        "asOf": format_ms(as_of_ms),
        "asOfMs": as_of_ms,
        "namespaceHistory": {ns: sorted(points.items()) for ns, points in sorted(history.items())},
        "storedBytesNow": {ns: int(v) for ns, v in sorted(now_bytes.items())},
        "reclaimed": {m: dict(v) for m, v in sorted(reclaimed.items())},
        "reclaimedByDay": {day: dict(v) for day, v in sorted(reclaimed_by_day.items())},
        "blockersFrom": latest_trim["runId"] if latest_trim else None,
        "topBlockers": blockers,
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
            for q in quotas
        ],
        "latestRuns": [
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
        ],
        "runs": len(runs),
        # The policy_what_if DAG's latest report (what a policy change would free), if any.
        "latestWhatIf": read_latest(store.root),
        "deletionLag": deletion_lag_status(store, as_of_ms, objectives),
    }


def deletion_lag_status(store: Store, as_of_ms: int, objectives: Mapping[str, int]) -> list[dict[str, Any]]:
    """Per namespace: the deletion lag at ``as_of_ms`` (housekeeping.metrics), its objective, and whether it is
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
    """Every run directory with a snapshot, oldest as-of first."""
    runs = []
    for run_json in (store.root / RUNS_DIR).glob("*/*/snapshot/run.json"):
        run = RunDir(run_json.parent.parent)
        info = read_run_info(run)
        namespaces_path = run.snapshot_table(NAMESPACES)
        report = read_json(run.report_json)
        gate = read_json(run.gate_result)
        runs.append(
            {
                "runId": info["runId"],
                "mechanism": info["mechanism"],
                "asOf": info["asOf"],
                "asOfMs": info["asOfMs"],
                # Only to order runs of the same as-of (a rerun or a manual run beside a backfill): audit time.
                "takenAtMs": info.get("takenAtWallClockMs") or 0,
                "namespaces": read_jsonl(namespaces_path) if namespaces_path.is_file() else [],
                "report": report,
                "reportPath": str(run.report_md) if report is not None else None,
                "gate": None if gate is None else ("passed" if gate["success"] else "REJECTED"),
                "dataDocs": str(run.data_docs_index) if run.data_docs_index.is_file() else None,
            }
        )
    return sorted(runs, key=lambda r: (r["asOfMs"], r["takenAtMs"], r["runId"]))


# ----------------------------------------------------------------------------------------------- plots


def plots(data: dict[str, Any]) -> dict[str, str]:
    """Inline SVG per chart (empty string when there is nothing to draw)."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    plt = pyplot()
    charts: dict[str, str] = {}

    history = {ns: pts for ns, pts in data["namespaceHistory"].items() if pts}
    if history:
        from datetime import UTC, datetime

        figure, axes = plt.subplots(figsize=(9, 3.6))
        for namespace, points in history.items():
            axes.plot(
                [datetime.fromtimestamp(ms / 1000, UTC) for ms, _ in points],
                [b for _, b in points],
                marker="o",
                markersize=3,
                label=namespace,
            )
        axes.yaxis.set_major_formatter(bytes_formatter())
        locator = AutoDateLocator(maxticks=8)
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        axes.set_title("Stored bytes per namespace (at each run's as-of, UTC)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
        charts["namespaces"] = svg(figure)

    by_day = data["reclaimedByDay"]
    if by_day:
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
        charts["reclaimed"] = svg(figure)

    blockers = data["topBlockers"]
    if blockers:
        figure, axes = plt.subplots(figsize=(9, 0.3 * len(blockers) + 1))
        labels = [f"{b['topic'].split('://', 1)[-1]} ({b['kind']})" for b in blockers][::-1]
        colors = ["#c0392b" if b["kind"] == "slowest_subscription" else "#7f8c8d" for b in blockers][::-1]
        axes.barh(labels, [b["bytes"] for b in blockers][::-1], color=colors)
        axes.xaxis.set_major_formatter(bytes_formatter())
        axes.set_title("Top blockers: bytes kept (red: a subscription that has not consumed them)")
        axes.grid(axis="x", alpha=0.3)
        charts["blockers"] = svg(figure)

    lag_history = {ns: pts for ns, pts in (data.get("deletionLagHistory") or {}).items() if pts}
    if lag_history:
        from datetime import UTC, datetime

        figure, axes = plt.subplots(figsize=(9, 3.2))
        for namespace, points in lag_history.items():
            axes.plot(
                [datetime.fromtimestamp(ms / 1000, UTC) for ms, _ in points],
                [seconds / 3600 for _, seconds in points],
                marker="o",
                markersize=3,
                label=namespace,
            )
        objectives = sorted(
            {row["objectiveSeconds"] for row in data["deletionLag"] if row["objectiveSeconds"]}
        )
        for objective in objectives:
            axes.axhline(objective / 3600, color="#c0392b", linestyle="--", linewidth=1)
        locator = AutoDateLocator(maxticks=8)
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        axes.set_ylabel("hours")
        axes.set_title("Deletion lag per namespace (dashed: objective)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
        charts["deletion_lag"] = svg(figure)

    quotas = data["exceededQuotas"]
    if quotas:
        per_namespace: dict[str, int] = defaultdict(int)
        for q in quotas:
            per_namespace[q["namespace"]] += 1
        figure, axes = plt.subplots(figsize=(9, 0.35 * len(per_namespace) + 1))
        axes.barh(list(per_namespace), list(per_namespace.values()), color="#e67e22")
        axes.set_title("Exceeded backlog quotas per namespace (now)")
        axes.xaxis.get_major_locator().set_params(integer=True)
        charts["quotas"] = svg(figure)
    return charts


# ----------------------------------------------------------------------------------------------- page


def render_html(data: dict[str, Any], charts: dict[str, str], out_dir: Path) -> str:
    return render("storage_report.html.j2", out_dir, r=data, charts=charts)


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
