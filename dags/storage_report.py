"""
### storage_report (Airflow DAG)

One HTML page about the store, rebuilt each time a housekeeping DAG's apply step changed it (the
`housekeeping_store` Asset every apply emits; a dry run emits none) and every day at 06:00 UTC:

- **bytes per namespace over time** (from the store's own record of its ledgers),
- **capacity**: the limits the newest capacity report finds met within its horizon,
- **bytes reclaimed per mechanism** (purged, and deleted but still restorable),
- **the top blockers** of the newest trim run (stale subscriptions in red),
- **exceeded backlog quotas** per namespace,
- **the latest run of each mechanism**: gate verdict, report, Great Expectations Data Docs.

Plots are static SVG inlined in the page: it opens from disk, offline. Written to
`<store>/reports/storage/index.html` (data: `report.json` beside it); the path is printed in the task log.

Settings: `HOUSEKEEPING_STORE_ROOT`, `HOUSEKEEPING_METADATA_URL`. No Spark: the metadata is small.
"""

from __future__ import annotations

from housekeeping.dag_factory import build_storage_report_dag

dag = build_storage_report_dag(__doc__)
