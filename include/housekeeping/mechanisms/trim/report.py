"""Consumed-ledger trim's report: what was reclaimed per namespace, and for every topic why what remains was kept
(the slowest subscription and the bytes it pins, the current ledger, the retention window): what users ask most
about Pulsar retention."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.engine.contract import ACTIONS, BLOCKERS, NAMESPACES
from housekeeping.engine.documents import read_run_info
from housekeeping.engine.plan import read_summary, table_batches
from housekeeping.engine.report import (
    DECISION_COLUMNS,
    StreamedList,
    TopicValuesInOrder,
    ledger_decision,
    plan_entries_per_topic,
    plan_rows,
    run_section,
    sparse_rows,
)
from housekeeping.engine.snapshot_reads import read_snapshot_table
from housekeeping.mechanisms.trim.actions import DELETE_LOCAL_COPY
from housekeeping.mechanisms.trim.tables import TRIM_DECISIONS


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = run_section(run_dir, info, dry_run)
    apply_result = report["apply"]
    retention = TopicValuesInOrder(run_dir, "retentionDescription", "retentionSource")
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
    local_copies = _local_copies(run_dir)
    top_blockers = _top_blockers(run_dir, 25)
    return {
        **report,
        "plan": summary.as_json(),
        "namespaces": namespaces,
        "totals": {
            "ledgers": sum(n["ledgers"] for n in namespaces),
            "bytes": sum(n["bytes"] for n in namespaces),
        },
        "blockers": plan_rows(run_dir, BLOCKERS),
        "topBlockers": top_blockers,
        # Offloaded ledgers past the offload-deletion lag: their local copy goes, the tier's stays.
        "localCopies": sorted(local_copies, key=lambda c: (c["topic"], c["ledgerId"])),
        "localCopyBytes": sum(c["bytes"] for c in local_copies),
        "topics": _topic_entries(run_dir, retention),
    }


def _top_blockers(run_dir: Path, count: int) -> list[dict[str, Any]]:
    """The ``count`` blockers keeping the most bytes (ties by topic, then kind), as the plan table's rows: each
    batch's first ``count`` kept, then theirs (the table is never held whole)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    order = [("bytes", "descending"), ("topic", "ascending"), ("kind", "ascending")]
    leaders = []
    for batch in table_batches(run_dir, BLOCKERS):
        positive = batch.filter(pc.greater(batch.column("bytes"), 0))
        # Taken, not sliced: a slice of the sorted batch would keep all of its rows alive (every blocker, at last).
        leaders.append(positive.take(pc.sort_indices(positive, sort_keys=order).slice(0, count)))
    if not leaders:
        return []
    return list(sparse_rows(pa.Table.from_batches(leaders).sort_by(order).slice(0, count)))


def _local_copies(run_dir: Path) -> list[dict[str, Any]]:
    """The plan's local-copy deletions (read a batch at a time: the actions table holds every ledger the run
    deletes)."""
    import pyarrow.compute as pc

    copies = []
    for batch in table_batches(run_dir, ACTIONS):
        kept = batch.filter(pc.equal(batch.column("action"), DELETE_LOCAL_COPY.name))
        copies.extend(kept.select(["topic", "ledgerId", "bytes", "reason"]).to_pylist())
    return copies


def _topic_entries(run_dir: Path, retention: TopicValuesInOrder) -> StreamedList:
    """Every topic's entry, built from its ledgers' decisions as the report is written."""

    def entry(rows: list[dict[str, Any]]) -> dict[str, Any]:
        description, source = retention[rows[0]["topic"]]
        return {
            "topic": rows[0]["topic"],
            "retention": description,
            "retentionSource": source,
            "deletedLedgers": sum(r["decision"] == "delete" for r in rows),
            "deletedBytes": sum(r["size"] for r in rows if r["decision"] == "delete"),
            "keptLedgers": sum(r["decision"] == "keep" for r in rows),
            "keptBytes": sum(r["size"] for r in rows if r["decision"] == "keep"),
            "decisions": [ledger_decision(r) for r in rows],
        }

    return plan_entries_per_topic(run_dir, TRIM_DECISIONS, DECISION_COLUMNS, entry)
