"""Per-run report: ``report/report.json`` (machine) and ``report/report.md`` (a person reads it).

Answers the question users ask most about Pulsar retention: what was reclaimed per namespace, and for
every topic why what remains was kept (the slowest subscription and the bytes it pins, the current
ledger, the retention window).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from housekeeping.plan import read_summary, read_table
from housekeeping.snapshot import read_jsonl, read_run_info
from housekeeping.timeutil import format_ms

MAX_TOPICS_IN_MARKDOWN = 200


def human_bytes(value: int | float | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _common(run_dir: Path, info: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    """What every mechanism's report starts with: the run, the gate's verdict, apply and purge results."""
    gate = _read_json(run_dir / "gate" / "result.json") or {
        "success": False,
        "expectations": [],
        "failed": [],
    }
    purge_result = _read_json(run_dir / "apply" / "purge.json")
    return {
        "mechanism": info["mechanism"],
        "runId": info["runId"],
        "asOf": info["asOf"],
        "asOfMs": info["asOfMs"],
        "dryRun": dry_run,
        "scope": info["scope"],
        "store": info["store"],
        "topicsExamined": len(read_jsonl(run_dir / "snapshot" / "topics.jsonl")),
        "gate": {
            "success": bool(gate.get("success")),
            "expectations": len(gate.get("expectations", [])),
            "failed": gate.get("failed", []),
        },
        "apply": _read_json(run_dir / "apply" / "result.json"),
        # nextPurgeAfter is always there (None when nothing waits: a purge that emptied the log).
        "purge": (
            dict(
                purge_result,
                nextPurgeAfter=(
                    format_ms(purge_result["nextPurgeAfterMs"])
                    if purge_result.get("nextPurgeAfterMs")
                    else None
                ),
            )
            if purge_result
            else purge_result
        ),
    }


def build_cursor_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    """Message expiry and backlog quota: per subscription what was acknowledged, and the quota states."""
    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    as_of = int(info["asOfMs"])
    subscriptions = []
    for row in read_table(run_dir, "subscriptions"):
        # Exact when the planner read the entry; otherwise the ledgers' oldest timestamp, an upper bound on age.
        oldest = row.get("oldestRemainingTsMs")
        exact = oldest is not None
        if not exact:
            oldest = row.get("oldestRemainingLedgerTsMs")
        subscriptions.append(
            dict(
                {"to": None, "backlogBytesAfter": None},
                **row,
                entries=row.get("entriesExpired", row.get("entriesEvicted", 0)),
                bytes=row.get("bytesExpired", row.get("bytesEvicted", 0)),
                oldestRemaining=format_ms(oldest) if oldest is not None else None,
                oldestRemainingAgeSeconds=(as_of - oldest) // 1000 if oldest is not None else None,
                oldestRemainingExact=exact,
            )
        )
    subscriptions.sort(key=lambda r: (r["decision"] != "move", r["topic"], r["subscription"]))
    # Spark's JSON writer leaves null fields out; the templates expect every field present.
    quota_keys = ("oldestBacklogTsMs", "oldestBacklogAgeSeconds", "handled", "note", "backlogBytes")
    quotas = [
        {**dict.fromkeys(quota_keys), **q}
        for q in (read_table(run_dir, "quotas") if (run_dir / "plan" / "quotas").is_dir() else [])
    ]
    flag_keys = ("measuredValue", "exceededSinceMs", "exceeded", "policy", "limitValue")
    flags = [
        {**dict.fromkeys(flag_keys), **a}
        for a in read_table(run_dir, "actions")
        if a["action"] == "flag_backlog_quota"
    ]
    report = _common(run_dir, info, dry_run)
    report.update(
        plan=summary,
        namespaces=[{"namespace": ns, **v} for ns, v in sorted(summary["perNamespace"].items())],
        totals={
            "cursors": summary["cursorsToMove"],
            "entries": summary["entriesToAcknowledge"],
            "bytes": summary["bytesToAcknowledge"],
        },
        subscriptions=subscriptions,
        movedSubscriptions=[r for r in subscriptions if r["decision"] == "move"],
        keptWithBacklog=[r for r in subscriptions if r["decision"] == "keep" and r["backlogEntries"] > 0],
        quotas=[
            dict(
                q,
                oldestBacklog=format_ms(q["oldestBacklogTsMs"])
                if q.get("oldestBacklogTsMs") is not None
                else None,
            )
            for q in quotas
            if q.get("sizeQuotaLimitBytes", -1) >= 0 or q.get("timeQuotaLimitSeconds", -1) > 0
        ],
        quotaFlags=flags,
        exceededQuotas=[f for f in flags if f.get("exceeded")],
        reads=summary.get("reads", {}),
    )
    return report


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


def build_gc_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    """Inactive-topic GC: topics deleted per namespace with bytes; every kept topic and why."""
    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = _common(run_dir, info, dry_run)
    apply_result = report["apply"] or {}
    decisions = sorted(read_table(run_dir, "decisions"), key=lambda r: r["topic"])
    skipped = apply_result.get("skippedTopics", {})
    deleted_now = set(apply_result.get("topicsDeleted", [])) if not dry_run and report["apply"] else None
    namespaces_seen = {
        r["namespace"]: r["topicCount"] for r in read_jsonl(run_dir / "snapshot" / "namespaces.jsonl")
    }
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


def build_compaction_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    """Compaction: per compacted topic what the new compacted ledger holds and why entries and keys left it;
    topics not compacted and why; the apache/pulsar#11211 warnings."""
    import pyarrow.parquet as pq

    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = _common(run_dir, info, dry_run)
    apply_result = report["apply"] or {}
    decisions = sorted(read_table(run_dir, "decisions"), key=lambda r: r["topic"])
    actions = {a["topic"]: a for a in read_table(run_dir, "actions")}
    dropped_dir = Path(run_dir) / "plan" / "compaction" / "dropped_keys"
    dropped: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    samples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if dropped_dir.is_dir() and any(dropped_dir.glob("*.parquet")):
        for row in pq.read_table(dropped_dir, columns=["topic", "key", "reason", "entryTs"]).to_pylist():
            dropped[row["topic"]][row["reason"]] += 1
            if len(samples[row["topic"]]) < 10:
                samples[row["topic"]].append(dict(row, entryTime=format_ms(row["entryTs"])))
    applied = set(apply_result.get("appliedTopics", [])) | set(apply_result.get("alreadyAppliedTopics", []))
    skipped = apply_result.get("skippedTopics", {})
    compacted, not_compacted = [], []
    for row in decisions:
        action = actions.get(row["topic"])
        if action is None:
            not_compacted.append(row)
            continue
        status = (
            "planned (dry run)"
            if dry_run or not report["apply"]
            else (
                "applied"
                if row["topic"] in applied
                else f"skipped: {skipped.get(row['topic'], 'not applied')}"
            )
        )
        compacted.append(
            {
                **{k: action.get(k, 0) for k in action if k.startswith("entries")},
                "topic": row["topic"],
                "kind": row["kind"],
                "reason": row["reason"],
                "status": status,
                "compactedLedger": apply_result.get("compactedLedgers", {}).get(row["topic"]),
                "replaces": action.get("ledgerId"),
                "horizon": action["to"],
                "readFrom": action.get("readFrom") or "first entry",
                "keptBytes": action.get("bytes", 0),
                "retention": row.get("compactedRetentionDescription"),
                "tombstoneGraceSeconds": (row.get("tombstoneGraceMs") or 0) // 1000,
                "droppedKeys": dict(dropped.get(row["topic"], {})),
                "droppedKeySamples": samples.get(row["topic"], []),
            }
        )
    kinds: dict[str, int] = defaultdict(int)
    for row in not_compacted:
        kinds[row["kind"]] += 1
    return {
        **report,
        "plan": summary,
        "compactedTopics": compacted,
        "notCompacted": [
            {"topic": r["topic"], "kind": r["kind"], "reason": r["reason"], "bytes": r["bytes"]}
            for r in not_compacted
        ],
        "notCompactedByKind": [
            {"kind": k, "topics": n} for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])
        ],
        "warnings": [{"topic": r["topic"], "warning": r["warning"]} for r in decisions if r.get("warning")],
    }


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    if info["mechanism"] == "compaction":
        return build_compaction_report(run_dir, dry_run=dry_run)
    if info["mechanism"] in ("expiry", "backlog"):
        return build_cursor_report(run_dir, dry_run=dry_run)
    if info["mechanism"] == "gc":
        return build_gc_report(run_dir, dry_run=dry_run)
    summary = read_summary(run_dir)
    decisions = read_table(run_dir, "decisions")
    blockers = read_table(run_dir, "blockers")
    report = _common(run_dir, info, dry_run)
    apply_result = report["apply"]
    topics_meta = {row["topic"]: row for row in read_jsonl(run_dir / "snapshot" / "topics.jsonl")}
    stored = {
        row["namespace"]: row["storedBytes"] for row in read_jsonl(run_dir / "snapshot" / "namespaces.jsonl")
    }

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
    topics = []
    for topic in sorted(per_topic):
        rows = sorted(per_topic[topic], key=lambda r: r["ledgerId"])
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
        "topics": topics,
    }


def render_markdown(report: dict[str, Any]) -> str:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("housekeeping", "templates"),
        undefined=StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
        autoescape=False,
    )
    env.filters["human"] = human_bytes
    env.filters["ms"] = format_ms
    if "topics" not in report:  # cursor mechanisms and GC
        return env.get_template(f"{report['mechanism']}_report.md.j2").render(r=report)
    shown = dict(report, topics=report["topics"][:MAX_TOPICS_IN_MARKDOWN])
    text = env.get_template(f"{report['mechanism']}_report.md.j2").render(r=shown)
    if len(report["topics"]) > MAX_TOPICS_IN_MARKDOWN:
        text += f"\n_{len(report['topics']) - MAX_TOPICS_IN_MARKDOWN} more topics are in report.json._\n"
    return text


def write_report(run_dir: Path, *, dry_run: bool) -> Path:
    report = build_report(run_dir, dry_run=dry_run)
    out = Path(run_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True), encoding="utf-8")
    markdown = out / "report.md"
    markdown.write_text(render_markdown(report), encoding="utf-8")
    return markdown
