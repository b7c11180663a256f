"""Ledger offload's report: bytes offloaded per namespace, what stays local and why (under the thresholds, the
current ledger, no offloader), ledgers whose upload failed, and per topic every ledger's decision."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import BLOCKERS, TOPICS, read_run_info, read_snapshot_table
from housekeeping.engine.plan import read_summary, read_table
from housekeeping.engine.report import run_section
from housekeeping.mechanisms.offload.tables import OFFLOAD_DECISIONS


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = run_section(run_dir, info, dry_run)
    applied = report["apply"] or {}
    offloaded = applied.get("perNamespace") if not dry_run and applied else summary["perNamespace"]
    policies = {row["topic"]: row["offloadPolicyDescription"] for row in read_snapshot_table(run_dir, TOPICS)}
    per_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in read_table(run_dir, OFFLOAD_DECISIONS.name):
        per_topic[row["topic"]].append(row)
    topics = []
    for topic in sorted(per_topic):
        rows = sorted(per_topic.pop(topic), key=lambda r: r["ledgerId"])
        topics.append(
            {
                "topic": topic,
                "policy": policies.get(topic, ""),
                "offloadLedgers": sum(r["decision"] == "offload" for r in rows),
                "offloadBytes": sum(r["size"] for r in rows if r["decision"] == "offload"),
                "decisions": [
                    {
                        "ledgerId": r["ledgerId"],
                        "entries": r["entries"],
                        "size": r["size"],
                        "closed": format_ms(r["closedAtMs"]) if r.get("closedAtMs") is not None else "open",
                        "decision": r["decision"],
                        "kind": r["kind"],
                        "reason": r["reason"],
                    }
                    for r in rows
                ],
            }
        )
    namespaces = [
        {"namespace": ns, "ledgers": v.get("ledgers", 0), "bytes": v.get("bytes", 0)}
        for ns, v in sorted((offloaded or {}).items())
    ]
    return {
        **report,
        "plan": summary,
        "offloader": summary.get("offloader"),
        "why": summary.get("why"),
        "namespaces": namespaces,
        "totals": {
            "ledgers": sum(n["ledgers"] for n in namespaces),
            "bytes": sum(n["bytes"] for n in namespaces),
        },
        "failed": applied.get("failedLedgers") or {},
        "blockers": read_table(run_dir, BLOCKERS.name),
        "topics": topics,
    }
