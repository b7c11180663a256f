"""SQL tables of the metadata store (SQLAlchemy Core). Portable: SQLite by default, PostgreSQL in deployment.

The DDL is owned by the Alembic migrations in ``housekeeping/migrations``; these Table objects are the
query-side description of the same schema (a test checks the two agree).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
)

NAME = 700  # persistent:// + three segments of at most 200 characters

metadata = MetaData()

store_settings = Table(
    "store_settings",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("value", Text, nullable=False),  # JSON
)

namespaces = Table(
    "namespaces",
    metadata,
    Column("name", String(NAME), primary_key=True),
    Column("policies", Text, nullable=False),  # JSON, manifest shape
)

topics = Table(
    "topics",
    metadata,
    Column("name", String(NAME), primary_key=True),
    Column("namespace", String(NAME), ForeignKey("namespaces.name"), nullable=False),
    Column("policies", Text, nullable=False),  # JSON, topic-level overrides
    # Compare-and-set token: every metadata change to the topic increments it.
    Column("version", BigInteger, nullable=False),
    Column("producers", Integer, nullable=False),
    Column("consumers", Integer, nullable=False),
    Column("last_active_ms", BigInteger, nullable=True),
    # Which creation of the name this row is (0009): a topic deleted and created again starts at version 1 again,
    # so apply compare-and-sets (incarnation, version), never the version alone. NULL: created before 0009.
    Column("incarnation", String(32), nullable=True),
)

ledgers = Table(
    "ledgers",
    metadata,
    Column("topic", String(NAME), ForeignKey("topics.name"), primary_key=True),
    Column("ledger_id", BigInteger, primary_key=True, autoincrement=False),
    Column("entries", BigInteger, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    # Close time (epoch ms, broker clock); NULL for the topic's current (open) ledger.
    Column("closed_at_ms", BigInteger, nullable=True),
    Column("min_entry_ts_ms", BigInteger, nullable=True),
    Column("max_entry_ts_ms", BigInteger, nullable=True),
    # True when the ledger's entries exist as Parquet under the store root.
    Column("entries_stored", Boolean, nullable=False),
    # Which directory holds the entries (0: <ledgerId>, n: <ledgerId>.<n>); key erasure writes n + 1.
    Column("files_generation", BigInteger, nullable=False, server_default="0"),
    # Tiered storage (Pulsar's OffloadContext; docs/store.md): the current or last offload attempt's UUID, written
    # before its upload; complete once the upload was read back whole under that UUID; when completion was recorded
    # (logical time: the offload-deletion lag counts from it); the local copy deleted (bookkeeperDeleted: the
    # ledger stays listed and is read from the tier).
    Column("offload_uuid", String(36), nullable=True),
    Column("offload_complete", Boolean, nullable=False, server_default=false()),
    Column("offloaded_at_ms", BigInteger, nullable=True),
    Column("local_deleted", Boolean, nullable=False, server_default=false()),
)

cursors = Table(
    "cursors",
    metadata,
    Column("topic", String(NAME), ForeignKey("topics.name"), primary_key=True),
    Column("name", String(NAME), primary_key=True),
    Column("durable", Boolean, nullable=False),
    Column("mark_delete_ledger", BigInteger, nullable=False),
    Column("mark_delete_entry", BigInteger, nullable=False),
    Column("last_active_ms", BigInteger, nullable=True),
    # Consumers connected to the subscription (Pulsar's message-expiry guard looks at it).
    Column("consumers", Integer, nullable=False, server_default="0"),
)

journal = Table(
    "journal",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(250), nullable=False),
    Column("mechanism", String(40), nullable=False),
    Column("topic", String(NAME), nullable=True),
    Column("action", String(40), nullable=False),
    # started | applied | skipped_conflict | already_applied | purged | restored | finished | failed;
    # approval (action "approval"): approved | rejected | timed_out
    Column("status", String(40), nullable=False),
    Column("detail", Text, nullable=False),  # JSON
    Column("as_of_ms", BigInteger, nullable=False),
    Column("recorded_at_ms", BigInteger, nullable=False),  # wall clock, audit only
    Index("ix_journal_run", "run_id", "topic"),
    # Who: ``airflow <dag_id> (<run_id>)`` for DAG runs, ``<user>@<host>`` for the CLI (NULL before 0005).
    Column("actor", String(250), nullable=True),
)

pending_deletions = Table(
    "pending_deletions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("topic", String(NAME), nullable=False),
    Column("ledger_id", BigInteger, nullable=False),
    Column("path", Text, nullable=False),  # relative to the store root
    Column("ledger_row", Text, nullable=False),  # JSON of the ledgers row, for restore
    Column("size_bytes", BigInteger, nullable=False),
    Column("run_id", String(250), nullable=False),
    Column("deleted_as_of_ms", BigInteger, nullable=False),
    Column("purge_after_ms", BigInteger, nullable=False),
    Column("status", String(20), nullable=False),  # pending | purged | restored
    Column("finished_as_of_ms", BigInteger, nullable=True),
    # ledger: a ledger of the topic's ledger list (restorable into it); compacted_ledger: a superseded or
    # abandoned compacted ledger (never put back into the ledger list).
    Column("kind", String(20), nullable=False, server_default="ledger"),
    # The key-erasure run whose request covers these files: restore refuses them (an erased key never comes back).
    Column("erased_by", String(250), nullable=True),
    # The tier object purge deletes with the local files (an offloaded ledger) or alone (an abandoned offload
    # attempt's object: ``path`` is then empty).
    Column("tier_key", Text, nullable=True),
    # The incarnation of the topic the ledger belonged to (0009): restore puts it back only into that one.
    Column("topic_incarnation", String(32), nullable=True),
    Index("ix_pending_status", "status", "purge_after_ms"),
    Index("ix_pending_deletions_topic", "topic", "status"),
)


# Backlog quota per topic and quota type, as last measured in logical time. For producer_request_hold and
# producer_exception the write path refuses new producers while ``exceeded`` (Pulsar disconnects them and
# answers ProducerBlockedQuotaExceededError / ...Exception); cleared when the backlog is back under the limit.
backlog_quota_states = Table(
    "backlog_quota_states",
    metadata,
    Column("topic", String(NAME), ForeignKey("topics.name"), primary_key=True),
    Column("quota_type", String(40), primary_key=True),  # destination_storage | message_age
    Column("policy", String(40), nullable=False),
    Column("exceeded", Boolean, nullable=False),
    Column("limit_value", BigInteger, nullable=False),  # bytes or seconds
    Column("measured_value", BigInteger, nullable=True),  # estimated backlog bytes or age in seconds
    Column("exceeded_since_ms", BigInteger, nullable=True),  # logical time the current exceedance began
    Column("cleared_at_ms", BigInteger, nullable=True),
    Column("as_of_ms", BigInteger, nullable=False),  # logical time of the measurement (monotone)
    Column("run_id", String(250), nullable=False),
)


# Pulsar's partitioned-topic metadata (``topics create-partitioned-topic``): partitions are the topics
# ``<name>-partition-<i>``, i < partitions; a partition may be missing (never created or deleted).
partitioned_topics = Table(
    "partitioned_topics",
    metadata,
    Column("name", String(NAME), primary_key=True),
    Column("namespace", String(NAME), ForeignKey("namespaces.name"), nullable=False),
    Column("partitions", Integer, nullable=False),
)

# A topic (or partitioned-topic metadata) deleted by inactive-topic GC, with every metadata row it had, so
# ``housekeeping restore`` can bring it back until the purge (same grace period as its ledgers' files).
deleted_topics = Table(
    "deleted_topics",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("topic", String(NAME), nullable=False),
    Column("kind", String(20), nullable=False),  # topic | partitioned_metadata
    Column("saved_rows", Text, nullable=False),  # JSON: the topic, cursor, quota-state rows and ledger ids
    Column("run_id", String(250), nullable=False),
    Column("deleted_as_of_ms", BigInteger, nullable=False),
    Column("purge_after_ms", BigInteger, nullable=False),
    Column("status", String(20), nullable=False),  # pending | purged | restored
    Column("finished_as_of_ms", BigInteger, nullable=True),
    Index("ix_deleted_topics_topic", "topic", "status"),
)


# A topic's compacted ledger (topic compaction). ``current``: the one readers of the compacted view use (at most
# one per topic), holding the latest entry per key up to ``horizon`` with the entries' original positions.
# ``staged``: written (or being written) by a compaction run that has not switched the topic to it yet; a crash
# leaves it staged, and the next compaction apply either completes the switch (same run) or abandons it into
# the pending-deletion log, so no compacted file is ever unknown to the metadata.
compacted_ledgers = Table(
    "compacted_ledgers",
    metadata,
    Column("topic", String(NAME), ForeignKey("topics.name"), primary_key=True),
    Column("ledger_id", BigInteger, primary_key=True, autoincrement=False),
    Column("status", String(20), nullable=False),  # staged | current
    Column("horizon_ledger", BigInteger, nullable=False),
    Column("horizon_entry", BigInteger, nullable=False),
    Column("entries", BigInteger, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("min_entry_ts_ms", BigInteger, nullable=True),
    Column("max_entry_ts_ms", BigInteger, nullable=True),
    Column("tombstones", BigInteger, nullable=False),
    Column("oldest_tombstone_ts_ms", BigInteger, nullable=True),
    Column("run_id", String(250), nullable=False),
    Column("compacted_as_of_ms", BigInteger, nullable=False),  # logical time of the compaction
    Column("files_generation", BigInteger, nullable=False, server_default="0"),  # as ledgers.files_generation
    Index("ix_compacted_ledgers_status", "topic", "status"),
)


# A hold (``housekeeping hold add``) protects a namespace (``tenant/ns``) or a topic (``persistent://...``; a
# partitioned topic's name covers its partitions): no ledger deletion, topic deletion, compaction rewrite,
# cursor move or purge touches what it covers while it exists. Planner, gate and apply each enforce it.
holds = Table(
    "holds",
    metadata,
    Column("target", String(NAME), primary_key=True),
    Column("scope", String(20), nullable=False),  # namespace | topic
    Column("reason", Text, nullable=False),
    Column("created_by", String(250), nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),  # wall clock, audit only
)


# A request to forget one key (``housekeeping erase request``) in a topic (``persistent://...``; a partitioned
# topic's name covers its partitions) or a namespace (``tenant/ns``). It counts for a run once ``requested_at_ms``
# is at or before the run's as-of. ``state``: pending | held (a hold covers the target; ``state_detail`` says
# which) | done (``state_detail``: the proof-of-erasure report's path) | failed (``state_detail``: why).
erasure_requests = Table(
    "erasure_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # The key's SHA-256 (hex) only: the store never keeps a key it was asked to forget.
    Column("key_sha256", String(64), nullable=False),
    Column("scope", String(20), nullable=False),  # topic | namespace
    Column("target", String(NAME), nullable=False),
    Column("reason", Text, nullable=False),
    Column("requested_at_ms", BigInteger, nullable=False),  # logical: when the request takes effect
    Column("requested_by", String(250), nullable=False),
    Column("recorded_at_ms", BigInteger, nullable=False),  # wall clock, audit only
    Column("state", String(20), nullable=False),
    Column("state_detail", Text, nullable=True),
    Column("run_id", String(250), nullable=True),  # the erasure run that last changed the state
    Column("updated_as_of_ms", BigInteger, nullable=True),
    Index("ix_erasure_requests_state", "state", "requested_at_ms"),
)
