"""Compaction's report: per compacted topic what the new compacted ledger holds and why entries and keys left it;
topics not compacted and why; the apache/pulsar#11211 warnings."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import ACTIONS
from housekeeping.engine.documents import read_run_info
from housekeeping.engine.plan import read_summary, read_table
from housekeeping.engine.report import run_section
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.compaction.tables import COMPACTION_DECISIONS, COMPACTION_DROPPED_KEYS


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    """Compaction: per compacted topic what the new compacted ledger holds and why entries and keys left it;
    topics not compacted and why; the apache/pulsar#11211 warnings."""
    import pyarrow.parquet as pq

    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    report = run_section(run_dir, info, dry_run)
    apply_result = report["apply"] or {}
    decisions = sorted(read_table(run_dir, COMPACTION_DECISIONS.name), key=lambda r: r["topic"])
    actions = {a["topic"]: a for a in read_table(run_dir, ACTIONS.name)}
    dropped_dir = RunDir(run_dir).plan_table(COMPACTION_DROPPED_KEYS)
    dropped: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    samples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if dropped_dir.is_dir() and any(dropped_dir.glob("*.parquet")):
        for row in pq.read_table(
            dropped_dir, columns=["topic", "keyDigest", "reason", "entryTs"]
        ).to_pylist():
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
        "plan": summary.as_json(),
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
