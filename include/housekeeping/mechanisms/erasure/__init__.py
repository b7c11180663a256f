"""Key erasure (no Pulsar counterpart; apache/pulsar#5059 asks for per-key cleanup): forgets one key everywhere the
store holds it. Its package: the mechanism with its setting, form params and fault points (here), its action kinds
(``actions``), its plan tables (``tables``), its requests (``requests``), its apply (``apply``), the proof of
erasure (``proof``), its report (``report``, ``report.md.j2``) and its command group ``housekeeping erase``
(``commands``); its Spark apps are ``spark_apps/erasure``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.core.settings import Setting, Settings
from housekeeping.engine.mechanism import Mechanism, TaskIds
from housekeeping.mechanisms.erasure.actions import EXPEDITE_PURGE, REDACT_COMPACTED, REDACT_LEDGER

if TYPE_CHECKING:
    from housekeeping.store.store import Store

# How long the files a key erasure replaced wait for purge (short: they hold the key the request erases).
ERASURE_GRACE_SECONDS = Setting(
    "HOUSEKEEPING_ERASURE_GRACE_SECONDS",
    int,
    3600,
    minimum=0,
    help="files a key erasure replaced wait this long for purge",
)


class KeyErasure(Mechanism):
    def before_snapshot(self, store: Store, params: Mapping[str, Any], as_of_ms: int, actor: str) -> None:
        from housekeeping.mechanisms.erasure.requests import record_form_request

        record_form_request(store, dict(params), as_of_ms, actor)

    def purge_grace_seconds(self, settings: Settings) -> int:
        return int(ERASURE_GRACE_SECONDS.read())

    def apply(
        self, store: Store, run_dir: Path, *, purge_grace_seconds: int, spark_master: str | None = None
    ) -> dict[str, Any]:
        from housekeeping.mechanisms.erasure.apply import apply_plan

        return apply_plan(store, Path(run_dir), self, purge_grace_seconds=purge_grace_seconds)

    def command_group(self) -> tuple[str, Any]:
        from housekeeping.mechanisms.erasure.commands import erase_app

        return "erase", erase_app


MECHANISM = KeyErasure(
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
    actions=(REDACT_LEDGER, REDACT_COMPACTED, EXPEDITE_PURGE),
    snapshot_tables=("compacted_ledgers", "erasure_requests", "pending_files"),
    policy_driven=False,
    settings=(ERASURE_GRACE_SECONDS,),
    fault_points=(
        "erasure_apply_after_stage",  # a topic's new generations recorded, not yet installed
        "erasure_apply_after_upload",  # an offloaded ledger's redacted object uploaded, its topic not switched
        "erasure_apply_after_install",  # a redacted ledger renamed into place, its topic not switched
        "erasure_apply_inside_topic_transaction",  # a topic's switch made, not committed
        "erasure_apply_after_topic_commit",  # a topic switched and journaled, the next not started
    ),
    form_params={
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
