"""
### consumed_ledger_trim (Airflow DAG)

Frees storage as Pulsar's consumed-ledger monitor does (`ManagedLedgerImpl#internalTrimLedgers`): below the
**slowest durable subscription's mark-delete**, delete the oldest closed ledgers whose **retention** has run
out (time: closed more than `retentionTimeInMinutes` ago; size: what would remain is still at least
`retentionSizeInMB`). The current ledger is never deleted; readers never pin data and are fast-forwarded.

**Flow:** `take_snapshot` -> `plan_ledger_trim` (Spark) -> `validate_trim_plan` (Spark + Great Expectations)
-> `approve_ledger_trim` (a person decides a plan over the approval thresholds)
-> `apply_ledger_trim` (metadata first, compare-and-set per topic, pending-deletion log)
-> `purge_pending_deletions` (files only after the grace period) -> `write_trim_report`.

**Params:** `dry_run` (plan, gate and report only), `scope` (tenant, namespace or topic globs), `as_of`
(logical now; empty = data interval end or run time), `max_deleted_share` (blast-radius override).

**Report:** `<store>/runs/trim/<run>/report/report.md` (path printed by `write_trim_report`): bytes reclaimed per
namespace, and per topic why the rest was kept (slowest subscription, current ledger, retention window).

Settings: `HOUSEKEEPING_STORE_ROOT`, `HOUSEKEEPING_METADATA_URL`, `HOUSEKEEPING_PURGE_GRACE_SECONDS`,
`HOUSEKEEPING_MAX_DELETED_SHARE`, Spark connection `spark_default`. See README.
"""

from __future__ import annotations

from housekeeping.dag_factory import build_housekeeping_dag

dag = build_housekeeping_dag("trim", doc_md=__doc__)
