"""Per-run report: ``report/report.json`` (data) and ``report/report.md`` (the page a person reads).

Each mechanism builds its report's data (``MechanismSpec.report``, in ``housekeeping/mechanisms/``) on what every
report starts with (:func:`run_section`: the run, the gate's verdict, apply and purge results); expiry and backlog
share :func:`build_cursor_report`. :func:`write_report` renders the mechanism's template.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.contract import (
    ACTIONS,
    BACKLOG_QUOTAS,
    BACKLOG_SUBSCRIPTIONS,
    TOPICS,
    RunDir,
    read_json,
    read_run_info,
    read_snapshot_table,
    write_json,
)
from housekeeping.mechanism import MechanismSpec
from housekeeping.plan import read_summary, read_table
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


def run_section(run_dir: Path, info: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    """What every mechanism's report starts with: the run, the gate's verdict, apply and purge results."""
    run = RunDir(run_dir)
    gate = read_json(run.gate_result) or {"success": False, "expectations": [], "failed": []}
    purge_result = read_json(run.purge_result)
    return {
        "mechanism": info["mechanism"],
        "runId": info["runId"],
        "asOf": info["asOf"],
        "asOfMs": info["asOfMs"],
        "dryRun": dry_run,
        "scope": info["scope"],
        "store": info["store"],
        "topicsExamined": len(read_snapshot_table(run, TOPICS)),
        "gate": {
            "success": bool(gate.get("success")),
            "expectations": len(gate.get("expectations", [])),
            "failed": gate.get("failed", []),
        },
        "apply": read_json(run.apply_result),
        # The approval step's request (thresholds, reasons) and decision (who, when); None without one.
        "approval": (
            None
            if not run.approval_request.is_file()
            else {"request": read_json(run.approval_request), "decision": read_json(run.approval_decision)}
        ),
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
    run = RunDir(run_dir)
    info = read_run_info(run)
    summary = read_summary(run.path)
    as_of = int(info["asOfMs"])
    subscriptions = []
    for row in read_table(run.path, BACKLOG_SUBSCRIPTIONS.name):
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
        for q in (
            read_table(run.path, BACKLOG_QUOTAS.name) if run.plan_table(BACKLOG_QUOTAS).is_dir() else []
        )
    ]
    flag_keys = ("measuredValue", "exceededSinceMs", "exceeded", "policy", "limitValue")
    flags = [
        {**dict.fromkeys(flag_keys), **a}
        for a in read_table(run.path, ACTIONS.name)
        if a["action"] == "flag_backlog_quota"
    ]
    report = run_section(run.path, info, dry_run)
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


def render_markdown(report: dict[str, Any], template: str) -> str:
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
    topics = report.get("topics")
    if topics is None or len(topics) <= MAX_TOPICS_IN_MARKDOWN:
        return env.get_template(template).render(r=report)
    text = env.get_template(template).render(r=dict(report, topics=topics[:MAX_TOPICS_IN_MARKDOWN]))
    return text + f"\n_{len(topics) - MAX_TOPICS_IN_MARKDOWN} more topics are in report.json._\n"


def write_report(run_dir: Path, spec: MechanismSpec, *, dry_run: bool) -> Path:
    run = RunDir(run_dir)
    report = spec.build_report(run.path, dry_run=dry_run)
    write_json(run.report_json, report)
    run.report_md.write_text(render_markdown(report, spec.report_template), encoding="utf-8")
    return run.report_md
