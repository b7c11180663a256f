"""Ledger offload's report: bytes offloaded per namespace, what stays local and why (under the thresholds, the
current ledger, no offloader), ledgers whose upload failed, and per topic every ledger's decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.engine.contract import BLOCKERS
from housekeeping.engine.documents import read_run_info
from housekeeping.engine.plan import read_summary
from housekeeping.engine.report import (
    DECISION_COLUMNS,
    TopicValuesInOrder,
    ledger_decision,
    plan_entries_per_topic,
    plan_rows,
    run_section,
)
from housekeeping.mechanisms.offload.tables import OFFLOAD_DECISIONS


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = run_section(run_dir, info, dry_run)
    applied = report["apply"] or {}
    offloaded = applied.get("perNamespace") if not dry_run and applied else summary["perNamespace"]
    policies = TopicValuesInOrder(run_dir, "offloadPolicyDescription")

    def entry(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "topic": rows[0]["topic"],
            "policy": policies.get(rows[0]["topic"], ""),
            "offloadLedgers": sum(r["decision"] == "offload" for r in rows),
            "offloadBytes": sum(r["size"] for r in rows if r["decision"] == "offload"),
            "decisions": [ledger_decision(r) for r in rows],
        }

    namespaces = [
        {"namespace": ns, "ledgers": v.get("ledgers", 0), "bytes": v.get("bytes", 0)}
        for ns, v in sorted((offloaded or {}).items())
    ]
    return {
        **report,
        "plan": summary.as_json(),
        "offloader": summary.get("offloader"),
        "why": summary.get("why"),
        "namespaces": namespaces,
        "totals": {
            "ledgers": sum(n["ledgers"] for n in namespaces),
            "bytes": sum(n["bytes"] for n in namespaces),
        },
        "failed": applied.get("failedLedgers") or {},
        "blockers": plan_rows(run_dir, BLOCKERS),
        "topics": plan_entries_per_topic(run_dir, OFFLOAD_DECISIONS, DECISION_COLUMNS, entry),
    }
