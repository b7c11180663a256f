"""
### message_expiry (Airflow DAG)

Message TTL as Pulsar's expiry monitor (`PersistentMessageExpiryMonitor`): for every durable subscription with a
backlog, acknowledge the entries older than the topic's **TTL** (topic > namespace `message_ttl_in_seconds` >
broker `ttlDurationDefaultInSeconds`; 0 = off) by moving its mark-delete. Nothing is deleted here; consumed-ledger
trim frees the bytes under retention.

Exact rule: expired = timestamp (broker timestamp if stored, else publish time) strictly before as_of - TTL.
Whole ledgers closed before the cutoff are expired without reading them (Pulsar's shortcut). Deliberately safer
than Pulsar's binary search: the cursor stops at the first unexpired entry, so out-of-order timestamps never
acknowledge a young message. Never touched: `__compaction`, system topics, readers. Pulsar's guard for
subscriptions with connected consumers and a small backlog applies.

**Flow:** `take_snapshot` -> `plan_message_expiry` (Spark; reads only the ledgers that straddle each cutoff) ->
`validate_expiry_plan` (Spark + Great Expectations re-derive every move) -> `approve_message_expiry` ->
`apply_message_expiry` (per-cursor
compare-and-set: a newer consumer ack is never overwritten) -> `purge_pending_deletions` -> `write_expiry_report`.

**Params:** `dry_run`, `scope`, `as_of` (logical now), `max_deleted_share` (unused: expiry deletes nothing).

**Report:** `<store>/runs/expiry/<run>/report/report.md`: per subscription entries and bytes expired, the oldest
remaining backlog entry, what stopped the expiry.
"""

from __future__ import annotations

from housekeeping.dag_factory import build_housekeeping_dag

dag = build_housekeeping_dag("expiry", doc_md=__doc__)
