"""
### compacted_ledger_retention (Airflow DAG)

Topic compaction as Pulsar's compactor (latest entry per key up to a horizon; an empty payload is a tombstone
that removes its key; keyless entries dropped unless `topicCompactionRetainNullKey`), plus what Pulsar never
shipped (apache/pulsar#19665, PIP-252): **retention on the compacted ledger**. `compacted_retention`
{retentionTimeInMinutes, retentionSizeInMB} (namespace/topic; -1 keeps, unset keeps all) leaves out entries older
than the time limit and keeps only the newest entries whose total fits the size limit;
`compacted_tombstone_grace_seconds` keeps tombstones that long so readers see the delete (Kafka's
delete.retention.ms; default 0 = Pulsar).

Topics compacted: compaction threshold (topic > namespace > `brokerServiceCompactionThresholdInBytes`, 0 = off)
exceeded by the `__compaction` subscription's backlog; topics named in `compact_topics`; topics whose compacted
ledger holds entries the retention no longer allows.

**Flow:** `take_snapshot` -> `plan_compaction` (Spark: what each new compacted ledger holds, why keys left) ->
`validate_compaction_plan` (Spark + Great Expectations: output keys are input keys, each the latest up to the
horizon, retention and tombstone grace hold, nothing missing, counts reconcile) -> `approve_compaction` ->
`skip_apply_on_dry_run` ->
`apply_compaction` (Spark writes each new compacted ledger whole, then one metadata switch per topic moves the
`__compaction` cursor to the horizon and sends the previous compacted ledger to the pending-deletion log) ->
`purge_pending_deletions` -> `write_compaction_report` (incl. the apache/pulsar#11211 warning: raw retention shorter
than the time between compactions).

**Params:** `dry_run`, `scope`, `as_of`, `compact_topics` (list of `persistent://...` topics to compact whatever
their backlog); `max_deleted_share` is not used by compaction (it deletes no raw ledger).
"""

from __future__ import annotations

from housekeeping.dag_factory import build_housekeeping_dag

dag = build_housekeeping_dag("compaction", doc_md=__doc__)
