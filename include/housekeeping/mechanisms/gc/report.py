"""Inactive-topic GC's report: topics deleted per namespace with bytes; every kept topic and why."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import NAMESPACES
from housekeeping.engine.documents import read_run_info
from housekeeping.engine.plan import plan_table_parts, read_part_arrow, read_summary, read_table_arrow
from housekeeping.engine.report import (
    StreamedList,
    merged_part_rows,
    run_section,
    sparse_rows,
    topics_ascending,
)
from housekeeping.engine.snapshot_reads import read_snapshot_table
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
    topic: a million at a large store) are read a part file at a time for the totals, and merged by topic from the
    part files as the topic lists are written (:func:`housekeeping.engine.report.merged_part_rows`); a part not in
    topic order has the table read whole and sorted."""
    import pyarrow as pa
    import pyarrow.compute as pc

    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = run_section(run_dir, info, dry_run)
    apply_result = report["apply"] or {}
    skipped = apply_result.get("skippedTopics", {})
    # Applied: a topic planned for deletion that apply did not delete (it became active) is kept, and says why.
    deleted_now = None if dry_run or not report["apply"] else frozenset(apply_result.get("topicsDeleted", []))
    deleted_now_array = None if deleted_now is None else pa.array(sorted(deleted_now), pa.string())

    def planned(table: Any) -> Any:
        mask = pc.equal(table.column("decision"), "delete")
        if deleted_now_array is not None:
            mask = pc.and_(mask, pc.is_in(table.column("topic"), value_set=deleted_now_array))
        return mask

    parts = plan_table_parts(run_dir, GC_DECISIONS)
    whole: Any = None  # the whole table, sorted, when a part is not in topic order
    in_order = True
    totals = {"topics": 0, "bytes": 0, "ledgers": 0}
    per_namespace: dict[str, dict[str, int]] = {}
    kinds: dict[str, int] = {}  # every kept topic counted under its kind
    for part in parts:
        table = read_part_arrow(part, GC_DECISIONS)
        in_order = in_order and topics_ascending(table.column("topic"))
        _add_up(table, planned(table), totals, per_namespace, kinds)
    if not in_order:
        whole = read_table_arrow(run_dir, GC_DECISIONS).sort_by("topic")

    def is_deleted(row: dict[str, Any]) -> bool:
        return row["decision"] == "delete" and (deleted_now is None or row["topic"] in deleted_now)

    def rows() -> Iterator[dict[str, Any]]:
        if whole is not None:
            return iter(sparse_rows(whole))
        return merged_part_rows(parts, GC_DECISIONS)

    def kept_shown(row: dict[str, Any]) -> dict[str, Any]:
        if row["decision"] == "delete":
            return dict(_shown(row), kind="became_active", reason=skipped.get(row["topic"], "not applied"))
        return _shown(row)

    namespaces_seen = {r["namespace"]: r["topicCount"] for r in read_snapshot_table(run_dir, NAMESPACES)}
    return {
        **report,
        "plan": summary.as_json(),
        "namespaces": [
            {"namespace": ns, **v, "namespaceTopics": namespaces_seen.get(ns, 0)}
            for ns, v in sorted(per_namespace.items())
        ],
        "totals": totals,
        "deletedTopics": StreamedList(totals["topics"], lambda: map(_shown, filter(is_deleted, rows()))),
        "keptTopics": StreamedList(
            sum(kinds.values()), lambda: map(kept_shown, itertools.filterfalse(is_deleted, rows()))
        ),
        "keptByKind": [
            {"kind": kind, "label": GC_KEEP_KINDS.get(kind, kind.replace("_", " ")), "topics": topics}
            for kind, topics in sorted(kinds.items(), key=lambda k: (-k[1], k[0]))
        ],
        "partitionedMetadata": (
            apply_result.get("partitionedMetadataDeleted", [])
            if report["apply"]
            else summary.get("partitionedMetadataToDelete", [])
        ),
        "lastActiveRefreshed": apply_result.get("lastActiveRefreshed") if report["apply"] else None,
    }


def _add_up(
    table: Any,
    planned: Any,
    totals: dict[str, int],
    per_namespace: dict[str, dict[str, int]],
    kinds: dict[str, int],
) -> None:
    """One part's decisions added to the report's figures: the deleted topics' totals per namespace and in all, the
    kept topics' count per kind (a planned deletion not applied counted as ``became_active``)."""
    import pyarrow.compute as pc

    deleted = table.select(["topic", "namespace", "bytes", "ledgers"]).filter(planned)
    kept = table.select(["decision", "kind"]).filter(pc.invert(planned))
    totals["topics"] += deleted.num_rows
    totals["bytes"] += pc.sum(deleted.column("bytes")).as_py() or 0
    totals["ledgers"] += pc.sum(deleted.column("ledgers")).as_py() or 0
    grouped = deleted.group_by("namespace").aggregate(
        [("topic", "count"), ("bytes", "sum"), ("ledgers", "sum")]
    )
    for row in grouped.to_pylist():
        namespace = per_namespace.setdefault(row["namespace"], {"topics": 0, "bytes": 0, "ledgers": 0})
        namespace["topics"] += row["topic_count"]
        namespace["bytes"] += row["bytes_sum"]
        namespace["ledgers"] += row["ledgers_sum"]
    not_applied = pc.equal(kept.column("decision"), "delete")
    for kind in pc.value_counts(pc.if_else(not_applied, "became_active", kept.column("kind"))).to_pylist():
        kinds[kind["values"]] = kinds.get(kind["values"], 0) + kind["counts"]
