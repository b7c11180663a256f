"""The store scrub's report: the findings by kind (orphans, items purges left, missing and mismatched ledgers,
unreadable files, overdue purges), what the repair queued, and the purges verified against the storage."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.documents import PlanSummary, read_document, read_run_info
from housekeeping.engine.plan import read_summary, read_table
from housekeeping.engine.report import run_section
from housekeeping.mechanisms.scrub.tables import ERROR_KINDS, FINDINGS
from housekeeping.store.store import RUNS_DIR

if TYPE_CHECKING:
    from housekeeping.store.store import Store

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
        "plan": summary.as_json(),
        "wallClock": format_ms(summary["wallClockMs"]),
        "minAgeSeconds": summary["minAgeSeconds"],
        "tier": summary.get("tier"),
        "clean": summary["clean"],
        "kinds": kinds,
        "findings": findings[:MAX_FINDINGS_IN_REPORT],
        "findingsLeftOut": max(0, len(findings) - MAX_FINDINGS_IN_REPORT),
        "freed": summary["freed"],
    }


def latest_scrub(store: Store, as_of_ms: int) -> dict[str, Any] | None:
    """The newest completed scrub's plan summary (its plan written) made at or before ``as_of_ms``; None: none yet."""
    found = []
    for summary_path in (store.root / RUNS_DIR / "scrub").glob("*/plan/summary.json"):
        summary = read_document(PlanSummary, summary_path)
        if summary is not None and summary.mechanism == "scrub" and summary.as_of_ms <= as_of_ms:
            found.append(((summary.as_of_ms, int(summary["wallClockMs"])), summary.as_json()))
    return max(found, key=lambda f: f[0])[1] if found else None


def metric_samples(store: Store, as_of_ms: int) -> list[tuple[str, str, float]]:
    """The latest scrub's figures (none before the first scrub)."""
    summary = latest_scrub(store, as_of_ms)
    if summary is None:
        return []
    kinds = summary["perKind"]
    return [
        (
            "housekeeping_scrub_orphans",
            "Orphans the latest store scrub found (items no metadata names).",
            summary["orphans"],
        ),
        ("housekeeping_scrub_orphan_bytes", "Bytes of those orphans.", summary["orphanBytes"]),
        (
            "housekeeping_scrub_missing_ledgers",
            "Ledgers the metadata lists whose files the latest scrub found gone (data loss).",
            summary["missingLedgers"],
        ),
        (
            "housekeeping_scrub_mismatched_ledgers",
            "Ledgers whose files the latest scrub found unreadable or different from their metadata row.",
            summary["mismatchedLedgers"],
        ),
        (
            "housekeeping_scrub_not_freed",
            "Items purges recorded deleted that the latest scrub found still stored.",
            kinds.get("not_freed", {}).get("count", 0),
        ),
        (
            "housekeeping_scrub_last_as_of_timestamp_seconds",
            "Logical time of the latest store scrub.",
            summary["asOfMs"] / 1000,
        ),
        (
            "housekeeping_scrub_last_listed_timestamp_seconds",
            "Wall-clock time the latest store scrub listed the storage.",
            summary["wallClockMs"] / 1000,
        ),
    ]
