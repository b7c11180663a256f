"""
### inactive_topic_gc (Airflow DAG)

Inactive-topic deletion as Pulsar's `PersistentTopic#checkGC`, only while the broker's
`brokerDeleteInactiveTopicsEnabled` is true. `inactive_topic_policies` resolve topic > namespace > broker.
A topic is **active** while a producer or consumer is connected, and in `delete_when_no_subscriptions` mode while
any subscription exists, in `delete_when_subscriptions_caught_up` mode while any subscription has a backlog. An
inactive topic is deleted when it has been inactive for at least `maxInactiveDurationSeconds` since `lastActive`
and its retention *time* does not keep it (-1 keeps it forever; size never counts). System topics (`__...`) are
never deleted. Each partition is decided alone; partitioned metadata goes only with
`brokerDeleteInactivePartitionedTopicMetadataEnabled` once no partition is left. Topics found active get
`lastActive` = the run's logical time, as checkGC stamps them.

**Flow:** `take_snapshot` -> `plan_inactive_topic_gc` (Spark) -> `validate_gc_plan` (Spark + Great Expectations
re-derive inactivity per topic, refuse system topics, blast radius per namespace) -> `approve_inactive_topic_gc`
-> `apply_inactive_topic_gc`
(re-checks each topic against the current metadata; a client, subscription or backlog that appeared -> skipped and
reported; otherwise cursors, policies and ledgers go through the pending-deletion log) -> `purge_pending_deletions`
-> `write_gc_report`. `housekeeping restore TOPIC --store DIR` brings a topic back until its purge.

**Params:** `dry_run`, `scope`, `as_of`, `max_deleted_topic_share` (blast radius: share of a namespace's topics
one run may delete; empty = `HOUSEKEEPING_MAX_DELETED_TOPIC_SHARE`, default 0.5); `max_deleted_share` (bytes)
is not used by GC.
"""

from __future__ import annotations

from housekeeping.dag_factory import build_housekeeping_dag

dag = build_housekeeping_dag("gc", doc_md=__doc__)
