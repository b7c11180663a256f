"""Key erasure's report: per request what was found, what was redacted and where, the proof of erasure with its
final scan, and the request's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.engine.documents import read_run_info
from housekeeping.engine.plan import read_summary, read_table
from housekeeping.engine.report import run_section
from housekeeping.mechanisms.erasure.tables import ERASURE_DECISIONS, ERASURE_LEDGERS


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    """Key erasure: per request its topics and what was found, the ledgers rewritten, and its proof (which
    records the request's state unless a dry run)."""
    from housekeeping.mechanisms.erasure.proof import prove
    from housekeeping.store.store import Store

    info = read_run_info(run_dir)
    report = run_section(run_dir, info, dry_run)
    decisions = sorted(
        ({"topic": None, "namespace": None, **r} for r in read_table(run_dir, ERASURE_DECISIONS.name)),
        key=lambda r: (r["requestId"], r["topic"] or ""),
    )
    ledgers = sorted(read_table(run_dir, ERASURE_LEDGERS.name), key=lambda r: (r["topic"], r["ledgerId"]))
    proofs = []
    if report["gate"]["success"]:
        # The run's store (its metadata URL from HOUSEKEEPING_METADATA_URL, as every step opens it).
        proofs = prove(Store.open(info.store), Path(run_dir), dry_run=dry_run or report["apply"] is None)
    return {
        **report,
        "plan": read_summary(run_dir).as_json(),
        "decisions": decisions,
        "ledgers": [
            {
                k: r[k]
                for k in (
                    "topic",
                    "ledgerId",
                    "source",
                    "fromGeneration",
                    "toGeneration",
                    "entries",
                    "entriesRedacted",
                    "bytesRedacted",
                    "sizeBefore",
                    "sizeAfter",
                )
            }
            for r in ledgers
        ],
        "proofs": [
            {
                "requestId": p["requestId"],
                "target": p["target"],
                "keyDigest": p["keyDigest"][:16],
                "state": p["state"],
                "detail": p["detail"],
                "filesScanned": p["finalScan"]["filesScanned"],
                "entriesScanned": p["finalScan"]["entriesScanned"],
                "filesHoldingTheKey": len(p["finalScan"]["filesHoldingTheKey"]),
            }
            for p in proofs
        ],
    }
