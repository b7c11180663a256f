"""Inactive-topic GC's report: topics deleted per namespace with bytes; every kept topic and why."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import NAMESPACES, read_run_info, read_snapshot_table
from housekeeping.engine.plan import read_summary, read_table
from housekeeping.engine.report import run_section
from housekeeping.mechanisms.gc.tables import GC_DECISIONS

GC_KEEP_KINDS = {
    "gc_disabled": "brokerDeleteInactiveTopicsEnabled is false",
    "system_topic": "system topic",
    "delete_while_inactive_off": "deleteWhileInactive off",
    "subscriptions": "has subscriptions",
    "backlog": "has backlog",
    "connected_clients": "connected clients",
    "last_active_unknown": "lastActive unknown (stamped now)",
    "inactive_less_than_limit": "inactive for less than the limit",
    "retention_time_infinite": "retention time -1",
    "retention_time": "within retention time",
}


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    """Inactive-topic GC: topics deleted per namespace with bytes; every kept topic and why."""
    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = run_section(run_dir, info, dry_run)
    apply_result = report["apply"] or {}
    decisions = sorted(read_table(run_dir, GC_DECISIONS.name), key=lambda r: r["topic"])
    skipped = apply_result.get("skippedTopics", {})
    deleted_now = set(apply_result.get("topicsDeleted", [])) if not dry_run and report["apply"] else None
    namespaces_seen = {r["namespace"]: r["topicCount"] for r in read_snapshot_table(run_dir, NAMESPACES)}
    per_namespace: dict[str, dict[str, Any]] = {}
    deleted, kept = [], []
    for row in decisions:
        row = {"lastActiveMs": None, "inactiveForMs": None, **row}
        row["lastActive"] = format_ms(row["lastActiveMs"]) if row["lastActiveMs"] is not None else None
        if row["decision"] == "delete" and (deleted_now is None or row["topic"] in deleted_now):
            deleted.append(row)
            ns = per_namespace.setdefault(row["namespace"], {"topics": 0, "bytes": 0, "ledgers": 0})
            ns["topics"] += 1
            ns["bytes"] += row["bytes"]
            ns["ledgers"] += row["ledgers"]
        elif row["decision"] == "delete":
            kept.append(dict(row, kind="became_active", reason=skipped.get(row["topic"], "not applied")))
        else:
            kept.append(row)
    kinds: dict[str, int] = defaultdict(int)
    for row in kept:
        kinds[row["kind"]] += 1
    return {
        **report,
        "plan": summary,
        "namespaces": [
            {"namespace": ns, **v, "namespaceTopics": namespaces_seen.get(ns, 0)}
            for ns, v in sorted(per_namespace.items())
        ],
        "totals": {
            "topics": len(deleted),
            "bytes": sum(r["bytes"] for r in deleted),
            "ledgers": sum(r["ledgers"] for r in deleted),
        },
        "deletedTopics": deleted,
        "keptTopics": kept,
        "keptByKind": [
            {"kind": k, "label": GC_KEEP_KINDS.get(k, k.replace("_", " ")), "topics": n}
            for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "partitionedMetadata": (
            apply_result.get("partitionedMetadataDeleted", [])
            if report["apply"]
            else summary.get("partitionedMetadataToDelete", [])
        ),
        "lastActiveRefreshed": apply_result.get("lastActiveRefreshed") if report["apply"] else None,
    }
