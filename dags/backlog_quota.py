"""
### backlog_quota (Airflow DAG)

Backlog quotas as Pulsar's `BacklogQuotaManager`: quotas resolve topic > namespace `backlog_quota_map` > broker
defaults; **destination_storage** (estimated backlog bytes of the slowest durable subscription >= limit) is checked
first, else **message_age** (oldest unacknowledged entry older than the limit: ledger close time, or the entry's
timestamp with `preciseTimeBasedBacklogQuotaCheck`). Readers never count; system topics are exempt.

- `consumer_backlog_eviction`: size evicts the slowest durable cursors to 90% of the limit (Pulsar's skip loop);
  time skips whole closed ledgers older than the limit (never the open ledger), or in precise mode expires by
  entry timestamp with 0.9 x limit. The `__compaction` cursor is never moved.
- `producer_request_hold` / `producer_exception`: the quota state (exceeded, which quota, since when) is recorded in
  the metadata for the write path, cleared when the backlog is back under the limit, shown in the report, and an
  **alert** is raised (task log WARNING, `<store>/alerts/backlog_quota.jsonl`, `HOUSEKEEPING_ALERT_WEBHOOK_URL`)
  without failing the run.

**Flow:** `take_snapshot` -> `plan_backlog_quota` (Spark) -> `validate_backlog_plan` (Spark + Great Expectations
replay every eviction step) -> `approve_backlog_quota` -> `apply_backlog_quota` (per-cursor compare-and-set, quota states) ->
`purge_pending_deletions` -> `write_backlog_report` (+ alert).

**Params:** `dry_run`, `scope`, `as_of`, `max_deleted_share` (unused: nothing is deleted).
"""

from __future__ import annotations

from housekeeping.dag_factory import build_housekeeping_dag

dag = build_housekeeping_dag("backlog", doc_md=__doc__)
