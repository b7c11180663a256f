"""The store scrub's report: the findings by kind (orphans, items purges left, missing and mismatched ledgers,
unreadable files, overdue purges), what the repair queued, and the purges verified against the storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import read_run_info
from housekeeping.engine.plan import read_summary, read_table
from housekeeping.engine.report import run_section
from housekeeping.mechanisms.scrub.tables import ERROR_KINDS, FINDINGS

KIND_ORDER = (*ERROR_KINDS, "purge_overdue")
MAX_FINDINGS_IN_REPORT = 1000


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = run_section(run_dir, info, dry_run)
    findings = [
        FINDINGS.read_row(row, f"{run_dir} plan/findings") for row in read_table(run_dir, FINDINGS.name)
    ]
    findings.sort(key=lambda r: (KIND_ORDER.index(r["kind"]), r["location"], r["path"]))
    kinds = [{"kind": kind, **summary["perKind"][kind]} for kind in KIND_ORDER if kind in summary["perKind"]]
    return {
        **report,
        "plan": summary,
        "wallClock": format_ms(summary["wallClockMs"]),
        "minAgeSeconds": summary["minAgeSeconds"],
        "tier": summary.get("tier"),
        "clean": summary["clean"],
        "kinds": kinds,
        "findings": findings[:MAX_FINDINGS_IN_REPORT],
        "findingsLeftOut": max(0, len(findings) - MAX_FINDINGS_IN_REPORT),
        "freed": summary["freed"],
    }
