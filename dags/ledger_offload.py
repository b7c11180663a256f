"""
### ledger_offload (Airflow DAG)

Tiered storage as Pulsar's offloader does it (`ManagedLedgerImpl#maybeOffload`): closed ledgers are copied to the
**object tier** (`HOUSEKEEPING_OFFLOAD_URL`: `s3://bucket/prefix` or a directory) once the newest closed ledgers
hold more than the **size threshold** (`managedLedgerOffloadThresholdInBytes`) or a ledger closed longer ago than
the **time threshold** (`managedLedgerOffloadThresholdInSeconds`). The current ledger never; nothing is deleted
and no cursor moves. Without a tier nothing is offloaded and the report says so.

**Flow:** `take_snapshot` -> `plan_ledger_offload` (Spark) -> `validate_offload_plan` (Spark + Great Expectations)
-> `approve_ledger_offload` -> `apply_ledger_offload` (per ledger: a new attempt UUID recorded, upload, read back and compare, then complete
with a compare-and-set) -> `purge_pending_deletions` -> `write_offload_report`.

The local copy of an offloaded ledger is deleted by `consumed_ledger_trim` once the offload-deletion lag
(`managedLedgerOffloadDeletionLagInMillis`, broker default 4 h) has passed; retention deletes the ledger from
both tiers.

**Params:** `dry_run`, `scope`, `as_of` (logical now), `max_deleted_share`.

**Report:** `<store>/runs/offload/<run>/report/report.md`: bytes offloaded per namespace, what stays local and why.

Settings: `HOUSEKEEPING_STORE_ROOT`, `HOUSEKEEPING_METADATA_URL`, `HOUSEKEEPING_OFFLOAD_URL`,
`HOUSEKEEPING_OFFLOAD_ENDPOINT_URL` (and the AWS credentials of the environment). See docs/deployment.md.
"""

from __future__ import annotations

from housekeeping.dag_factory import build_housekeeping_dag

dag = build_housekeeping_dag("offload", doc_md=__doc__)
