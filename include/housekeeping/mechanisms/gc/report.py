"""Inactive-topic GC's report: topics deleted per namespace with bytes; every kept topic and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import NAMESPACES, read_run_info, read_snapshot_table
from housekeeping.engine.plan import read_summary, read_table_arrow
from housekeeping.engine.report import StreamedList, run_section, sparse_rows
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


def _shown(row: dict[str, Any]) -> dict[str, Any]:
    """A decision row as the report lists it: lastActive and how long inactive, always there, and lastActive as
    text."""
    row = {"lastActiveMs": None, "inactiveForMs": None, **row}
    row["lastActive"] = format_ms(row["lastActiveMs"]) if row["lastActiveMs"] is not None else None
    return row


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    """Inactive-topic GC: topics deleted per namespace with bytes; every kept topic and why. The decisions (one per
    topic: 100,000 at a large store) are read as Arrow columns; the topic lists are produced as the report is
    written."""
    import pyarrow as pa
    import pyarrow.compute as pc

    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = run_section(run_dir, info, dry_run)
    apply_result = report["apply"] or {}
    decisions = read_table_arrow(run_dir, GC_DECISIONS).sort_by("topic")
    skipped = apply_result.get("skippedTopics", {})
    planned = pc.equal(decisions.column("decision"), "delete")
    if not dry_run and report["apply"]:
        deleted_now = pa.array(sorted(set(apply_result.get("topicsDeleted", []))), pa.string())
        planned = pc.and_(planned, pc.is_in(decisions.column("topic"), value_set=deleted_now))
    deleted, kept = decisions.filter(planned), decisions.filter(pc.invert(planned))
    namespaces_seen = {r["namespace"]: r["topicCount"] for r in read_snapshot_table(run_dir, NAMESPACES)}
    per_namespace = {
        r["namespace"]: {"topics": r["topic_count"], "bytes": r["bytes_sum"], "ledgers": r["ledgers_sum"]}
        for r in deleted.group_by("namespace")
        .aggregate([("topic", "count"), ("bytes", "sum"), ("ledgers", "sum")])
        .to_pylist()
    }
    # A topic planned for deletion that the apply did not delete (it became active) is kept, and says why.
    not_applied = pc.equal(kept.column("decision"), "delete")
    kinds = pc.value_counts(pc.if_else(not_applied, "became_active", kept.column("kind"))).to_pylist()

    def kept_shown(row: dict[str, Any]) -> dict[str, Any]:
        if row["decision"] == "delete":
            return dict(_shown(row), kind="became_active", reason=skipped.get(row["topic"], "not applied"))
        return _shown(row)

    deleted_rows, kept_rows = sparse_rows(deleted), sparse_rows(kept)
    return {
        **report,
        "plan": summary,
        "namespaces": [
            {"namespace": ns, **v, "namespaceTopics": namespaces_seen.get(ns, 0)}
            for ns, v in sorted(per_namespace.items())
        ],
        "totals": {
            "topics": deleted.num_rows,
            "bytes": pc.sum(deleted.column("bytes")).as_py() or 0,
            "ledgers": pc.sum(deleted.column("ledgers")).as_py() or 0,
        },
        "deletedTopics": StreamedList(len(deleted_rows), lambda: map(_shown, deleted_rows)),
        "keptTopics": StreamedList(len(kept_rows), lambda: map(kept_shown, kept_rows)),
        "keptByKind": [
            {
                "kind": k["values"],
                "label": GC_KEEP_KINDS.get(k["values"], k["values"].replace("_", " ")),
                "topics": k["counts"],
            }
            for k in sorted(kinds, key=lambda k: (-k["counts"], k["values"]))
        ],
        "partitionedMetadata": (
            apply_result.get("partitionedMetadataDeleted", [])
            if report["apply"]
            else summary.get("partitionedMetadataToDelete", [])
        ),
        "lastActiveRefreshed": apply_result.get("lastActiveRefreshed") if report["apply"] else None,
    }
