"""
### capacity_report (Airflow DAG)

Every day at 01:00 UTC, from the store's own record (no Spark, no sampling):

- **chargeback** of the day before: byte-hours, average and peak bytes per tenant and per namespace, on the local
  disks (times the write quorum), in the object tier and as the policies see them (`usage.json`,
  `usage-tenant.csv`, `usage-namespace.csv` for a billing system);
- **the forecast**: when each namespace meets its backlog quotas and retention size, and each tenant its budgets
  (`HOUSEKEEPING_CAPACITY_BUDGETS`), growth fitted to the ingest, with its backtest (`forecast.json`);
- one offline page with their plots.

Written to `<store>/reports/capacity/<as-of>/index.html`; the path is printed in the task log. The metrics
(`housekeeping_capacity_*`), the storage report and the console show the newest. Backfill it over past dates:
each run's as-of is its logical date, so a backfilled date gives what a run on that date gave.

Params: `as_of` (empty: the logical date), `horizon` (default 30d). Settings: `HOUSEKEEPING_STORE_ROOT`,
`HOUSEKEEPING_METADATA_URL`, `HOUSEKEEPING_CAPACITY_BUDGETS`.
"""

from __future__ import annotations

from housekeeping.dag_factory import build_capacity_report_dag

dag = build_capacity_report_dag(__doc__)
