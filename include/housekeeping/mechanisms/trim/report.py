"""Consumed-ledger trim's report: what was reclaimed per namespace, and for every topic why what remains was kept
(the slowest subscription and the bytes it pins, the current ledger, the retention window): what users ask most
about Pulsar retention."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import (
    ACTIONS,
    BLOCKERS,
    NAMESPACES,
    TOPICS,
    read_run_info,
    read_snapshot_table,
)
from housekeeping.engine.plan import read_summary, read_table
from housekeeping.engine.report import run_section
from housekeeping.mechanisms.trim.actions import DELETE_LOCAL_COPY
from housekeeping.mechanisms.trim.tables import TRIM_DECISIONS


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    decisions = read_table(run_dir, TRIM_DECISIONS.name)
    blockers = read_table(run_dir, BLOCKERS.name)
    report = run_section(run_dir, info, dry_run)
    apply_result = report["apply"]
    topics_meta = {row["topic"]: row for row in read_snapshot_table(run_dir, TOPICS)}
    stored = {row["namespace"]: row["storedBytes"] for row in read_snapshot_table(run_dir, NAMESPACES)}

    reclaimed = (
        (apply_result or {}).get("perNamespace") if not dry_run and apply_result else summary["perNamespace"]
    )
    namespaces = [
        {
            "namespace": ns,
            "ledgers": reclaimed.get(ns, {}).get("ledgers", 0),
            "bytes": reclaimed.get(ns, {}).get("bytes", 0),
            "storedBytes": stored[ns],
            "share": reclaimed.get(ns, {}).get("bytes", 0) / max(stored[ns], 1),
        }
        for ns in sorted(stored)
    ]
    per_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in decisions:
        per_topic[row["topic"]].append(row)
    # Each topic's raw rows are dropped once its entry is built (one per ledger: 437,614 at 100,000 topics).
    del decisions
    topics = []
    for topic in sorted(per_topic):
        rows = sorted(per_topic.pop(topic), key=lambda r: r["ledgerId"])
        meta = topics_meta[topic]
        topics.append(
            {
                "topic": topic,
                "retention": meta["retentionDescription"],
                "retentionSource": meta["retentionSource"],
                "deletedLedgers": sum(r["decision"] == "delete" for r in rows),
                "deletedBytes": sum(r["size"] for r in rows if r["decision"] == "delete"),
                "keptLedgers": sum(r["decision"] == "keep" for r in rows),
                "keptBytes": sum(r["size"] for r in rows if r["decision"] == "keep"),
                "decisions": [
                    {
                        "ledgerId": r["ledgerId"],
                        "entries": r["entries"],
                        "size": r["size"],
                        "closed": format_ms(r.get("closedAtMs"))
                        if r.get("closedAtMs") is not None
                        else "open",
                        "decision": r["decision"],
                        "kind": r["kind"],
                        "reason": r["reason"],
                    }
                    for r in rows
                ],
            }
        )
    local_copies = [
        {"topic": a["topic"], "ledgerId": a["ledgerId"], "bytes": a["bytes"], "reason": a["reason"]}
        for a in read_table(run_dir, ACTIONS.name)
        if a["action"] == DELETE_LOCAL_COPY.name
    ]
    top_blockers = sorted(
        (b for b in blockers if b["bytes"] > 0), key=lambda b: (-b["bytes"], b["topic"], b["kind"])
    )[:25]
    return {
        **report,
        "plan": summary,
        "namespaces": namespaces,
        "totals": {
            "ledgers": sum(n["ledgers"] for n in namespaces),
            "bytes": sum(n["bytes"] for n in namespaces),
        },
        "blockers": blockers,
        "topBlockers": top_blockers,
        # Offloaded ledgers past the offload-deletion lag: their local copy goes, the tier's stays.
        "localCopies": sorted(local_copies, key=lambda c: (c["topic"], c["ledgerId"])),
        "localCopyBytes": sum(c["bytes"] for c in local_copies),
        "topics": topics,
    }
