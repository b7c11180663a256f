"""Key erasure (no Pulsar counterpart; apache/pulsar#5059): its spec and report (per request what was found, what
was redacted and where, the proof of erasure with its final scan, and the request's state)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from housekeeping.contract import ERASURE_DECISIONS, ERASURE_LEDGERS, read_run_info
from housekeeping.mechanism import MechanismSpec, TaskIds
from housekeeping.plan import read_summary, read_table
from housekeeping.report import run_section


def build_report(run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
    """Key erasure: per request its topics and what was found, the ledgers rewritten, and its proof (which
    records the request's state unless a dry run)."""
    from housekeeping.erasure_proof import prove
    from housekeeping.store import Store

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
        proofs = prove(Store.open(info["store"]), Path(run_dir), dry_run=dry_run or report["apply"] is None)
    return {
        **report,
        "plan": read_summary(run_dir),
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


def record_form_request(store: Any, params: dict[str, Any], as_of_ms: int, actor: str) -> None:
    """A request from the trigger form (``erase_key`` or ``erase_key_sha256``, ``erase_topic`` or
    ``erase_namespace``, ``erase_reason``), in effect at the run's logical time; recorded once per run."""
    from housekeeping.erasure_requests import add_request

    if not (params.get("erase_key") or params.get("erase_key_sha256")):
        return
    add_request(
        store,
        key=params.get("erase_key") or None,
        key_sha256=params.get("erase_key_sha256") or None,
        topic=params.get("erase_topic") or None,
        namespace=params.get("erase_namespace") or None,
        reason=str(params.get("erase_reason") or ""),
        requested_at_ms=as_of_ms,
        actor=actor,
        once=True,
    )


SPEC = MechanismSpec(
    name="erasure",
    title="key erasure",
    pulsar="none (apache/pulsar#5059 asks for per-key cleanup)",
    dag_id="key_erasure",
    schedule="@daily",
    tags=("erasure",),
    task_ids=TaskIds(
        plan="plan_key_erasure",
        validate="validate_erasure_plan",
        apply="apply_key_erasure",
        report="write_erasure_report",
    ),
    plan_app="spark_apps.erasure.plan",
    gate_checks="spark_apps.erasure.gate",
    library_apply="housekeeping.erasure_apply",
    purge_grace_setting="erasure_grace_seconds",
    actions=("redact_ledger", "redact_compacted", "expedite_purge"),
    snapshot_tables=("compacted_ledgers", "erasure_requests", "pending_files"),
    report=build_report,
    report_template="erasure_report.md.j2",
    before_snapshot=record_form_request,
    policy_driven=False,
    extra_params={
        "erase_key": {
            "default": None,
            "type": ["null", "string"],
            "title": "Erase this key",
            "description": "Record a request to erase this message key before the run (as `housekeeping erase "
            "request`), in effect at the run's as-of. Airflow keeps a run's conf: to keep the key out of it, give "
            "erase_key_sha256 instead.",
        },
        "erase_key_sha256": {
            "default": None,
            "type": ["null", "string"],
            "pattern": "^[0-9a-f]{64}$",
            "title": "Erase the key with this SHA-256",
            "description": "The key's SHA-256 in hex, instead of erase_key (the key itself is then typed nowhere).",
        },
        "erase_topic": {
            "default": None,
            "type": ["null", "string"],
            "pattern": "^persistent://[^/]+/[^/]+/.+$",
            "title": "in topic",
            "description": "persistent://tenant/ns/topic (a partitioned topic's name: all its partitions); or "
            "erase_namespace.",
        },
        "erase_namespace": {
            "default": None,
            "type": ["null", "string"],
            "pattern": "^[^/]+/[^/]+$",
            "title": "in namespace",
            "description": "tenant/namespace: every topic of it; or erase_topic.",
        },
        "erase_reason": {
            "default": None,
            "type": ["null", "string"],
            "title": "Reason",
            "description": "Why (kept with the request and journaled), e.g. the ticket.",
        },
    },
)
