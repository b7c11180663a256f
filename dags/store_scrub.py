"""
### store_scrub (Airflow DAG)

What the metadata says against what the storage holds, on both tiers, and proof that deleted is freed. No broker
does this (BookKeeper's `verifyMetadataOnGC` and Iceberg's orphan-file removal are the models).

**Flow:** `take_snapshot` (one metadata read, then the ledger tree walked and the object tier listed by prefix, then
the metadata read again) -> `plan_store_scrub` (Spark: the findings; every stored ledger's Parquet footers and entry
ids read in parallel) -> `validate_scrub_plan` (Spark + Great Expectations: every repair names an item no row,
pending deletion or run names, older than the minimum age) -> `approve_scrub_repair` -> `apply_scrub_repair`
(orphans into the pending-deletion log, restorable) -> `purge_pending_deletions` -> `write_scrub_report`.

**Findings:** orphans, items purges recorded deleted that are still there, missing ledgers (data loss: an alert,
never hidden by changing the metadata), files that disagree with their row or cannot be read, overdue purges.

**Params:** `dry_run` (report only), `scope`, `as_of` (logical now, for overdue purges), `scrub_min_age_seconds`
(default `HOUSEKEEPING_SCRUB_MIN_AGE_SECONDS`, 3 days: compared with the files' physical modification times).

**Report:** `<store>/runs/scrub/<run>/report/report.md`; `housekeeping metrics` exports the latest scrub's figures.
"""

from __future__ import annotations

from housekeeping.dag_factory import build_housekeeping_dag

dag = build_housekeeping_dag("scrub", doc_md=__doc__)
