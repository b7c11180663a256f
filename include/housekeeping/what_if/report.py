"""The what-if report: ``report.json`` (exactly what ``housekeeping what-if --format json`` prints) and an offline
``index.html``: for a what-if, each mechanism's two plans, their gate verdicts and the difference per namespace;
for a sweep, the bytes freed at each policy value, one line per namespace, and the table behind it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from housekeeping.engine.pages import bytes_formatter, pyplot, render, svg
from housekeeping.what_if.sweep import sweep_measures

WHAT_IF_JSON = "report.json"
WHAT_IF_HTML = "index.html"
# The policy_what_if DAG's reports: <store>/reports/what-if/<DAG run>/, and latest.json naming the newest.
REPORTS_DIR = Path("reports") / "what-if"
LATEST = "latest.json"


def report_dir_of(store_root: Path, run_id: str) -> Path:
    """Where the policy_what_if DAG run ``run_id`` writes its report (the run id made a directory name)."""
    return Path(store_root) / REPORTS_DIR / re.sub(r"[^A-Za-z0-9._-]", "_", run_id)


TEMPLATE = Path(__file__).parent / "templates" / "what_if_report.html.j2"


def sweep_chart(document: Mapping[str, Any]) -> str:
    """The knob's plotted measure (bytes freed; local bytes left for the offload knobs) against the policy value,
    one line per namespace (values in the order given, evenly spaced: they are usually 1h, 6h, 1d, ... and read
    as labels)."""
    points = document["points"]
    namespaces = sorted({ns for point in points for ns in point["perNamespace"]})
    if not namespaces:
        return ""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(9, 3.8))
    positions = list(range(len(points)))
    sweep = document["sweep"]
    measure, label = sweep.get("plotted") or (
        "bytesFreed",
        "backlog bytes expired" if sweep["policy"] == "ttl" else "bytes freed",
    )
    for namespace in namespaces:
        values = [point["perNamespace"].get(namespace, {}).get(measure, 0) for point in points]
        axes.plot(positions, values, marker="o", markersize=4, label=namespace)
    axes.set_xticks(positions, [point["value"] for point in points])
    axes.yaxis.set_major_formatter(bytes_formatter())
    axes.set_xlabel(f"{sweep['policy']} (set in every namespace)")
    axes.set_ylabel(label)
    axes.set_title(f"{document['mechanism']}: {label} at each {sweep['policy']}, as of {document['asOf']}")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    return svg(figure)


def write_what_if_report(document: Mapping[str, Any], out_dir: Path) -> Path:
    """Writes report.json and index.html into ``out_dir``; returns index.html."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / WHAT_IF_JSON).write_text(json.dumps(document, indent=2), encoding="utf-8")
    return write_page(document, out_dir)


def write_page(document: Mapping[str, Any], out_dir: Path) -> Path:
    """index.html for a report.json already in ``out_dir``."""
    chart = sweep_chart(document) if "sweep" in document else ""
    mechanisms = [] if "sweep" in document else list(document.get("mechanisms", [document]))
    measures = sweep_measures(document["sweep"]) if "sweep" in document else ()
    page = out_dir / WHAT_IF_HTML
    page.write_text(
        render(TEMPLATE, out_dir, d=document, mechanisms=mechanisms, chart=chart, measures=measures),
        encoding="utf-8",
    )
    return page


def record_latest(store_root: Path, report_dir: Path, document: Mapping[str, Any], run_id: str) -> Path:
    """Name ``report_dir`` the latest what-if of the store (the storage report links it)."""
    latest = Path(store_root) / REPORTS_DIR / LATEST
    latest.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "runId": run_id,
        "page": str(Path(report_dir) / WHAT_IF_HTML),
        "asOf": document["asOf"],
        "what": describe(document),
    }
    latest.write_text(json.dumps(body, indent=2), encoding="utf-8")
    return latest


def read_latest(store_root: Path) -> dict[str, Any] | None:
    latest = Path(store_root) / REPORTS_DIR / LATEST
    return json.loads(latest.read_text(encoding="utf-8")) if latest.is_file() else None


def describe(document: Mapping[str, Any]) -> str:
    """One line: what was asked."""
    if "sweep" in document:
        sweep = document["sweep"]
        return f"{document['mechanism']} sweep of {sweep['policy']} over {', '.join(sweep['values'])}"
    names = [m["mechanism"] for m in document.get("mechanisms", [document])]
    return f"what-if of {', '.join(names)}"
