"""The cursor mechanisms' report (message expiry, backlog quota): per subscription what was acknowledged, per
namespace the totals, what the run read. Each mechanism adds its own sections (backlog: its quota states)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import Table
from housekeeping.engine.documents import read_run_info
from housekeeping.engine.plan import read_summary, read_table
from housekeeping.engine.report import run_section
from housekeeping.engine.run_dir import RunDir

TEMPLATES = Path(__file__).with_name("templates")  # cursor_common.md.j2, which their templates include


def _subscription(row: dict[str, Any], as_of_ms: int) -> dict[str, Any]:
    # Exact when the planner read the entry; otherwise the ledgers' oldest timestamp, an upper bound on age.
    oldest = row.get("oldestRemainingTsMs")
    exact = oldest is not None
    if not exact:
        oldest = row.get("oldestRemainingLedgerTsMs")
    return dict(
        {"to": None, "backlogBytesAfter": None},
        **row,
        entries=row.get("entriesExpired", row.get("entriesEvicted", 0)),
        bytes=row.get("bytesExpired", row.get("bytesEvicted", 0)),
        oldestRemaining=format_ms(oldest) if oldest is not None else None,
        oldestRemainingAgeSeconds=(as_of_ms - oldest) // 1000 if oldest is not None else None,
        oldestRemainingExact=exact,
    )


def cursor_report(run_dir: Path, subscriptions_table: Table, *, dry_run: bool) -> dict[str, Any]:
    """What every cursor mechanism's report holds, from its per-subscription plan table."""
    run = RunDir(run_dir)
    info = read_run_info(run)
    summary = read_summary(run.path)
    subscriptions = sorted(
        (_subscription(row, int(info.as_of_ms)) for row in read_table(run.path, subscriptions_table.name)),
        key=lambda r: (r["decision"] != "move", r["topic"], r["subscription"]),
    )
    report = run_section(run.path, info, dry_run)
    report.update(
        plan=summary.as_json(),
        namespaces=[{"namespace": ns, **v} for ns, v in sorted(summary["perNamespace"].items())],
        totals={
            "cursors": summary["cursorsToMove"],
            "entries": summary["entriesToAcknowledge"],
            "bytes": summary["bytesToAcknowledge"],
        },
        subscriptions=subscriptions,
        movedSubscriptions=[r for r in subscriptions if r["decision"] == "move"],
        keptWithBacklog=[r for r in subscriptions if r["decision"] == "keep" and r["backlogEntries"] > 0],
        reads=summary.get("reads", {}),
    )
    return report
