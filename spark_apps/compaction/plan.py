"""Spark app: plan topic compaction with retention on the compacted ledger (docs/semantics.md §7;
apache/pulsar #19665 / PIP-252, which Pulsar never built).

Which topics (``compaction_candidates``, metadata only):

- ``requested``: named in the run's ``compact_topics`` param (Pulsar's ``topics compact``);
- ``threshold_exceeded``: compaction threshold (topic > namespace > broker
  ``brokerServiceCompactionThresholdInBytes``; 0 = off) > 0 and the ``__compaction`` subscription's estimated
  backlog bytes ``>`` it (``PersistentTopic#checkCompaction``; without the subscription, the topic's stored bytes);
- ``compacted_retention_due`` (a gap Pulsar left, #24791): the current compacted ledger holds entries the
  compacted retention no longer allows, or tombstones past their grace, although nothing new arrived.

What each new compacted ledger holds (``entry_decisions``, pure, the rule's reference in Spark; the plan decides
the same in the task that reads each topic, ``arrow_topic_decisions``): the previous compacted ledger plus the raw
entries after its horizon, up to this run's horizon (the topic's last entry in the snapshot). Per entry:

- ``keyless_dropped``: no key, unless ``topicCompactionRetainNullKey`` (default false since Pulsar 3.2);
- ``superseded``: a later entry of the same key exists up to the horizon (latest entry per key wins);
- ``tombstoned``: the latest entry of its key has an empty payload (size 0: null or empty value) and its grace
  (``compacted_tombstone_grace_seconds``, Kafka's delete.retention.ms, default 0 = Pulsar) is 0 or over;
- ``expired_time``: older than the compacted retention time (as-of - entry timestamp > limit, strict as
  Pulsar's retention);
- ``expired_size``: outside the newest entries whose total size fits the compacted retention size;
- ``kept``: the rest, in the original publish order, with their original positions (message ids).

Writes ``plan/decisions`` (one row per topic: compact or skip, why, the #11211 warning), ``plan/actions``
(``rewrite_compacted`` per topic, with the counts that must reconcile), ``plan/blockers``,
``plan/compaction/kept`` (the new ledgers' entries, without payloads) and ``plan/compaction/dropped_keys``
(every key that leaves the compacted view, and why), and ``plan/summary.json``. The task that decides a topic
writes its kept entries and dropped keys itself (a part file per task and table), so the decisions never pass
through Spark's rows; nothing is collected to the driver but per-topic metadata and counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.contract import ACTIONS, BLOCKERS, table
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.compaction.actions import REWRITE_COMPACTED
from housekeeping.mechanisms.compaction.tables import (
    COMPACTION_DECISIONS,
    COMPACTION_DROPPED_KEYS,
    COMPACTION_KEPT,
)
from spark_apps.compaction.entries import (
    DECISION_COLUMNS,
    TopicWork,
    map_topic_inputs,
    topic_inputs,
    topic_sources,
)
from spark_apps.shared.holds import keep_held
from spark_apps.shared.io import LedgerFiles, key_digests, read_snapshot, write_table
from spark_apps.shared.plan_app import PlanApp
from spark_apps.shared.positions import (
    position_key,
    position_text,
)
from spark_apps.shared.session import materialize, run_scoped_cache
from spark_apps.shared.task_files import finish_parts, prepare_parts

if TYPE_CHECKING:
    import pyarrow as pa

DECISIONS = ("kept", "superseded", "tombstoned", "expired_time", "expired_size", "keyless_dropped")
# The decisions of a key's latest entry that take the key out of the compacted view.
DROPPING = ("tombstoned", "expired_time", "expired_size")


def _count_name(decision: str) -> str:
    return "entries" + "".join(part.capitalize() for part in decision.split("_"))


def _compaction_cursor(cursors: DataFrame) -> DataFrame:
    return cursors.where(F.col("name") == COMPACTION_SUBSCRIPTION).select(
        "topic",
        F.col("markDeleteLedger").alias("cursorLedger"),
        F.col("markDeleteEntry").alias("cursorEntry"),
    )


def _previous_compaction(compacted: DataFrame) -> DataFrame:
    """The compacted ledger in force: where the next read starts (its horizon) and what its retention reads."""
    return compacted.select(
        "topic",
        F.col("ledgerId").alias("prevCompactedLedgerId"),
        F.col("horizonLedger").alias("readFromLedger"),
        F.col("horizonEntry").alias("readFromEntry"),
        F.col("size").alias("compactedBytes"),
        F.col("entries").alias("compactedEntries"),
        F.col("minEntryTsMs").alias("compactedMinTsMs"),
        F.col("tombstones").alias("compactedTombstones"),
        F.col("oldestTombstoneTsMs").alias("compactedOldestTombstoneTsMs"),
        F.col("compactedAsOfMs").alias("prevCompactedAsOfMs"),
    )


def _raw_storage(ledgers: DataFrame, cursor: DataFrame) -> DataFrame:
    """Per topic: stored bytes and ledgers, the __compaction cursor's backlog (Pulsar's
    ``ManagedCursorImpl#getEstimatedSizeSinceMarkDelete``: whole ledgers after its mark-delete plus the unread
    share of the ledger it sits in; no cursor: all bytes), the last entry and the oldest raw entry's time."""
    with_cursor = ledgers.join(cursor, "topic", "left")
    share_unread = F.when(
        F.col("entries") > 0,
        F.col("size") * (F.col("entries") - F.col("cursorEntry") - 1) / F.col("entries"),
    ).otherwise(F.lit(0))
    backlog_part = (
        F.when(F.col("cursorLedger").isNull(), F.col("size"))
        .when(F.col("ledgerId") > F.col("cursorLedger"), F.col("size"))
        .when(F.col("ledgerId") == F.col("cursorLedger"), F.greatest(share_unread, F.lit(0)))
        .otherwise(F.lit(0))
    )
    return with_cursor.groupBy("topic").agg(
        F.sum("size").alias("storedBytes"),
        F.count("*").alias("ledgers"),
        F.sum(backlog_part).cast("long").alias("backlogBytes"),
        F.max(
            F.when(
                F.col("entries") > 0,
                position_key(F.col("ledgerId").cast("long"), (F.col("entries") - 1).cast("long")),
            )
        ).alias("lastEntry"),
        F.min(F.when(F.col("entries") > 0, F.col("minEntryTsMs"))).alias("oldestRawTsMs"),
    )


def _raw_ledgers_to_read(ledgers: DataFrame, previous: DataFrame) -> DataFrame:
    """Raw ledgers that can hold entries in (readFrom, horizon], and how many of them are not stored as files."""
    return (
        ledgers.join(previous.select("topic", "readFromLedger"), "topic", "left")
        .where(
            (F.col("entries") > 0)
            & (F.col("readFromLedger").isNull() | (F.col("ledgerId") >= F.col("readFromLedger")))
        )
        .groupBy("topic")
        .agg(
            F.sort_array(F.collect_list(F.when(F.col("entriesStored"), F.col("ledgerId")))).alias(
                "rawLedgerIds"
            ),
            F.sum(F.when(~F.col("entriesStored"), 1).otherwise(0)).alias("ledgersNotStored"),
        )
    )


def compaction_inputs(
    topics: DataFrame, ledgers: DataFrame, cursors: DataFrame, compacted: DataFrame, compact_topics: list[str]
) -> DataFrame:
    """Per topic, what a compaction would read: the previous compaction, the raw storage and backlog, whether the
    run names it (``requested``), and the horizon. Pure."""
    cursor = _compaction_cursor(cursors)
    previous = _previous_compaction(compacted)
    return (
        topics.join(_raw_storage(ledgers, cursor), "topic", "left")
        .join(cursor, "topic", "left")
        .join(previous, "topic", "left")
        .withColumn(
            "requested", F.col("topic").isin(list(compact_topics)) if compact_topics else F.lit(False)
        )
        # The horizon never goes back: the last raw entry, or the previous horizon when nothing after it is
        # left (raw ledgers trimmed up to the __compaction cursor and an empty current ledger; a compaction
        # then only applies the compacted ledger's retention).
        .withColumn(
            "horizon",
            F.greatest(
                F.col("lastEntry"),
                F.when(
                    F.col("readFromLedger").isNotNull(),
                    position_key(F.col("readFromLedger").cast("long"), F.col("readFromEntry").cast("long")),
                ),
            ),
        )
        .withColumn("horizonLedger", F.col("horizon.ledgerId"))
        .withColumn("horizonEntry", F.col("horizon.entryId"))
        .join(_raw_ledgers_to_read(ledgers, previous), "topic", "left")
    )


def compaction_kind(as_of_ms: int) -> Column:
    """Why a topic is compacted or not, typed, in precedence order."""
    as_of = F.lit(as_of_ms)
    has_new = F.col("lastEntry").isNotNull() & (
        F.col("readFromLedger").isNull()
        | (F.col("lastEntry") > position_key("readFromLedger", "readFromEntry"))
    )
    retention_due = F.col("prevCompactedLedgerId").isNotNull() & (
        (
            (F.col("compactedRetentionTimeMs") >= 0)
            & (as_of - F.col("compactedMinTsMs") > F.col("compactedRetentionTimeMs"))
        )
        | (
            (F.col("compactedRetentionSizeBytes") >= 0)
            & (F.col("compactedBytes") > F.col("compactedRetentionSizeBytes"))
        )
        | (
            (F.col("compactedTombstones") > 0)
            & (as_of - F.col("compactedOldestTombstoneTsMs") > F.col("tombstoneGraceMs"))
        )
    )
    threshold_on = F.col("compactionThresholdBytes") > 0
    over = threshold_on & has_new & (F.col("backlogBytes") > F.col("compactionThresholdBytes"))
    something = has_new | F.col("prevCompactedLedgerId").isNotNull()
    wanted = (F.col("requested") & something) | over | retention_due
    return (
        F.when(wanted & (F.coalesce(F.col("ledgersNotStored"), F.lit(0)) > 0), F.lit("entries_not_stored"))
        .when(F.col("requested") & something, F.lit("requested"))
        .when(over, F.lit("threshold_exceeded"))
        .when(retention_due, F.lit("compacted_retention_due"))
        .when(F.col("requested"), F.lit("nothing_to_compact"))
        .when(~threshold_on, F.lit("threshold_off"))
        .when(~has_new, F.lit("nothing_new"))
        .otherwise(F.lit("under_threshold"))
    )


def compaction_reason() -> Column:
    """Why, for a person, by ``kind``."""
    threshold = F.format_string(
        "__compaction backlog %d bytes vs compaction threshold %d bytes",
        F.coalesce(F.col("backlogBytes"), F.lit(0)),
        F.col("compactionThresholdBytes"),
    )
    return (
        F.when(
            F.col("kind") == "entries_not_stored",
            F.format_string(
                "%d ledger(s) to read are metadata only (no entries stored); cannot compact",
                F.col("ledgersNotStored"),
            ),
        )
        .when(F.col("kind") == "requested", F.lit("named in the run's compact_topics param"))
        .when(F.col("kind") == "threshold_exceeded", F.concat(threshold, F.lit(": over the threshold")))
        .when(
            F.col("kind") == "compacted_retention_due",
            F.format_string(
                "the compacted ledger holds entries or tombstones the compacted retention (%s) no longer allows",
                F.col("compactedRetentionDescription"),
            ),
        )
        .when(F.col("kind") == "nothing_to_compact", F.lit("named, but the topic has no entries"))
        .when(F.col("kind") == "threshold_off", F.lit("compaction threshold is 0 (off)"))
        .when(F.col("kind") == "nothing_new", F.lit("no entry after the compacted horizon"))
        .otherwise(F.concat(threshold, F.lit(": not over")))
    )


def retention_warning(as_of_ms: int, schedule_interval_ms: int | None) -> Column:
    """apache/pulsar#11211: keys published between two compactions are lost if the raw retention trims them
    first. The time between compactions: since the previous compaction (else since the oldest raw entry), and at
    least the DAG's schedule interval."""
    as_of = F.lit(as_of_ms)
    interval = F.greatest(
        as_of - F.coalesce(F.col("prevCompactedAsOfMs"), F.col("oldestRawTsMs"), as_of),
        F.lit(schedule_interval_ms or 0),
    )
    enabled = (
        (F.col("compactionThresholdBytes") > 0)
        | F.col("requested")
        | F.col("prevCompactedLedgerId").isNotNull()
    )
    return F.when(
        enabled & (F.col("retentionTimeMs") >= 0) & (F.col("retentionTimeMs") < interval),
        F.format_string(
            "raw retention time %d s (%s) is shorter than the time between compactions %d s: entries can be "
            "trimmed before compaction reads them (apache/pulsar#11211)",
            (F.col("retentionTimeMs") / 1000).cast("long"),
            F.col("retentionSource"),
            (interval / 1000).cast("long"),
        ),
    )


def compaction_candidates(
    topics: DataFrame,
    ledgers: DataFrame,
    cursors: DataFrame,
    compacted: DataFrame,
    compact_topics: list[str],
    as_of_ms: int,
    schedule_interval_ms: int | None = None,
) -> DataFrame:
    """One row per topic: ``decision`` compact|skip, ``kind``, ``reason``, where its input lies, and the
    apache/pulsar #11211 ``warning`` (raw retention shorter than the time between compactions). Pure."""
    frame = compaction_inputs(topics, ledgers, cursors, compacted, compact_topics).withColumn(
        "kind", compaction_kind(as_of_ms)
    )
    return frame.select(
        "topic",
        "namespace",
        F.when(F.col("kind").isin("requested", "threshold_exceeded", "compacted_retention_due"), "compact")
        .otherwise("skip")
        .alias("decision"),
        "kind",
        compaction_reason().alias("reason"),
        retention_warning(as_of_ms, schedule_interval_ms).alias("warning"),
        F.coalesce(F.col("storedBytes"), F.lit(0)).alias("bytes"),
        F.coalesce(F.col("ledgers"), F.lit(0)).alias("ledgers"),
        F.coalesce(F.col("backlogBytes"), F.lit(0)).alias("backlogBytes"),
        "compactionThresholdBytes",
        "prevCompactedLedgerId",
        F.col("compactedBytes").alias("prevCompactedBytes"),
        "readFromLedger",
        "readFromEntry",
        "horizonLedger",
        "horizonEntry",
        "cursorLedger",
        "cursorEntry",
        F.coalesce(F.col("rawLedgerIds"), F.array().cast("array<long>")).alias("rawLedgerIds"),
        "compactedRetentionTimeMs",
        "compactedRetentionSizeBytes",
        "compactedRetentionDescription",
        "tombstoneGraceMs",
        "retentionTimeMs",
    )


def _decide(frame: DataFrame, as_of_ms: int, retain_null_key: bool) -> DataFrame:
    """The rule on entries that carry their topic's params and ``latestForKey`` (the entry is its key's latest up
    to the horizon): every row gets its ``decision`` (one of DECISIONS)."""
    as_of = F.lit(as_of_ms)
    newest_first = F.col("ledgerId").desc(), F.col("entryId").desc()
    age = as_of - F.col("entryTs")
    tombstone = F.col("size") == 0
    first = (
        F.when(F.col("key").isNull() & F.lit(not retain_null_key), F.lit("keyless_dropped"))
        .when(F.col("key").isNotNull() & ~F.col("latestForKey"), F.lit("superseded"))
        .when(
            F.col("key").isNotNull()
            & tombstone
            & ((F.col("tombstoneGraceMs") <= 0) | (age > F.col("tombstoneGraceMs"))),
            F.lit("tombstoned"),
        )
        .when(
            (F.col("compactedRetentionTimeMs") >= 0) & (age > F.col("compactedRetentionTimeMs")),
            F.lit("expired_time"),
        )
    )
    frame = frame.withColumn("decision", first)
    # The size window: survivors so far, newest first, kept while their running total fits the limit.
    newest = Window.partitionBy("topic").orderBy(*newest_first).rowsBetween(Window.unboundedPreceding, 0)
    survivors = frame.where(F.col("decision").isNull()).withColumn(
        "retainedBytes", F.sum(F.col("size").cast("long")).over(newest)
    )
    survivors = survivors.withColumn(
        "decision",
        F.when(
            (F.col("compactedRetentionSizeBytes") >= 0)
            & (F.col("retainedBytes") > F.col("compactedRetentionSizeBytes")),
            F.lit("expired_size"),
        ).otherwise(F.lit("kept")),
    ).drop("retainedBytes")
    return frame.where(F.col("decision").isNotNull()).unionByName(survivors)


def entry_decisions(entries: DataFrame, params: DataFrame, as_of_ms: int, retain_null_key: bool) -> DataFrame:
    """Every input entry with its ``decision`` (one of DECISIONS), its key's latest entry found with a window over
    (topic, key). Pure. The rule's reference form, in Spark: the plan decides each topic in the task that reads it
    (:func:`arrow_topic_decisions`), and tests/compaction/test_plan.py holds the two equal entry by entry.

    entries: topic, ledgerId, entryId, entryTs, key, size (+ anything else, passed through);
    params: topic, compactedRetentionTimeMs, compactedRetentionSizeBytes, tombstoneGraceMs."""
    newest_first = F.col("ledgerId").desc(), F.col("entryId").desc()
    by_key = Window.partitionBy("topic", "key").orderBy(*newest_first)
    frame = entries.join(F.broadcast(params), "topic").withColumn(
        "latestForKey", F.col("key").isNotNull() & (F.row_number().over(by_key) == 1)
    )
    return _decide(frame, as_of_ms, retain_null_key)


# The plan's decisions, each topic's from the task that reads its input (:func:`arrow_topic_decisions`): every
# entry that can stay (each key's latest up to the horizon, ``latestForKey``; each keyless entry when retained)
# with its decision, and per topic one row for each decision the other entries share (``superseded``, and
# ``keyless_dropped`` unless keyless entries are retained; no position), ``weight`` the entries a row stands for.
TOPIC_DECISIONS = table(
    "compaction_topic_decisions",
    "topic string, ledgerId bigint, entryId bigint, key string, entryTs bigint, size int, source string, "
    "latestForKey boolean, decision string, weight bigint",
)
# Per decided topic: how many entries it read and how many got each decision, and the kept entries' bytes (the
# counts of its rewrite_compacted action).
TOPIC_COUNTS = table(
    "compaction_topic_counts",
    ", ".join(
        [
            "topic string",
            "entriesRead bigint",
            *[f"{_count_name(d)} bigint" for d in DECISIONS],
            "keptBytes bigint",
            "entriesExpired bigint",
        ]
    ),
)
# What the rule reads of a topic beyond its entries: the planned candidate's columns of these names.
RULE_PARAMS = ("compactedRetentionTimeMs", "compactedRetentionSizeBytes", "tombstoneGraceMs")
# A key's group while a topic's parts are folded: the latest entry's fields and how many entries the key has.
_GROUP_COLUMNS = ("key", "entriesOfKey", "ledgerId", "entryId", "entryTs", "size", "source")
# How many entry rows a task holds before folding them into the groups (~40 MB): memory follows the topic's keys
# plus this, not its entries, and a topic of a few ledgers is folded once.
_FOLD_ROWS = 1 << 20


def arrow_topic_decisions(
    source: dict[str, Any], parts: Iterable[pa.Table], as_of_ms: int, retain_null_key: bool
) -> pa.Table:
    """:data:`TOPIC_DECISIONS` of one topic (``source``: its ``topic`` and :data:`RULE_PARAMS`) from its entries
    (ledgerId, entryId, key, size, source, entryTs) given in parts (a file each), in Arrow. Run in the task that
    reads the topic's input, so neither grouping by key nor the rule needs a shuffle (in Spark: a hash aggregate by
    (topic, key) over every entry, then the rule and the size window over the winners: most of a large plan). The parts' keyed rows are held until there are :data:`_FOLD_ROWS` of them, then folded into one row
    per key with the groups so far, so memory follows the topic's keys plus that, not its entries (Pulsar's
    compactor likewise keeps a map of keys to their latest position); a key's latest entry is its last in position
    order, exact for any ids. Pure."""
    import pyarrow as pa
    import pyarrow.compute as pc

    # held: the groups folded so far (first, once there are any) and the keyed rows since (``unfolded`` of them).
    held, unfolded, retained, keyless = [], 0, [], 0
    for part in parts:
        has_key = pc.is_valid(part["key"])
        loose = part.filter(pc.invert(has_key))
        keyless += loose.num_rows
        if retain_null_key and loose.num_rows:
            retained.append(loose)
        keyed = part.filter(has_key)
        keyed = keyed.append_column("entriesOfKey", pa.repeat(1, keyed.num_rows).cast(pa.int64()))
        held.append(keyed.select(_GROUP_COLUMNS))
        unfolded += keyed.num_rows
        if unfolded >= _FOLD_ROWS:
            held, unfolded = [_latest_per_key(held)], 0
    groups = _latest_per_key(held) if unfolded else (held[0] if held else None)
    schema = TOPIC_DECISIONS.arrow_schema()
    stay = [] if groups is None else [groups.append_column("latestForKey", pa.repeat(True, groups.num_rows))]
    stay += [rows.append_column("latestForKey", pa.repeat(False, rows.num_rows)) for rows in retained]
    stay_schema = pa.schema([schema.field(name) for name in (*_GROUP_COLUMNS[2:], "key", "latestForKey")])
    stay = [rows.select(stay_schema.names).cast(stay_schema) for rows in stay]
    decided = _arrow_decide(pa.concat_tables(stay), source, as_of_ms) if stay else None
    # A key's entries but its latest (the sum is null when the topic has no keyed entry).
    superseded = 0 if groups is None else (pc.sum(groups["entriesOfKey"]).as_py() or 0) - groups.num_rows
    folded = {"superseded": superseded, "keyless_dropped": 0 if retain_null_key else keyless}
    shared = pa.Table.from_pylist(
        [
            {"topic": source["topic"], "decision": d, "latestForKey": False, "weight": n}
            for d, n in folded.items()
            if n
        ],
        schema,
    )
    if decided is None:
        return shared
    decided = decided.append_column("weight", pa.repeat(1, decided.num_rows).cast(pa.int64()))
    decided = decided.append_column("topic", pa.repeat(source["topic"], decided.num_rows).cast(pa.string()))
    return pa.concat_tables([decided.select(schema.names).cast(schema), shared])


def _latest_per_key(tables: list[pa.Table]) -> pa.Table:
    """Rows of ``_GROUP_COLUMNS`` (one per entry, or per key of earlier folds) folded into one per key: its latest
    row (the last in position order) with the key's entries summed. One sort of the positions and one hash
    aggregate of row numbers, so only the winners' rows are copied."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = pa.concat_tables(tables)
    order = pc.sort_indices(rows, [("ledgerId", "ascending"), ("entryId", "ascending")])
    ranked = pa.table(
        {
            "key": rows["key"].take(order),
            "rank": pa.array(range(rows.num_rows), pa.int64()),
            "entriesOfKey": rows["entriesOfKey"].take(order),
        }
    )
    folded = ranked.group_by("key", use_threads=False).aggregate([("rank", "max"), ("entriesOfKey", "sum")])
    latest = rows.take(order.take(folded["rank_max"]))
    counted = latest.schema.get_field_index("entriesOfKey")
    return latest.set_column(counted, "entriesOfKey", folded["entriesOfKey_sum"]).select(_GROUP_COLUMNS)


def _arrow_decide(rows: pa.Table, params: dict[str, Any], as_of_ms: int) -> pa.Table:
    """:func:`_decide` on one topic's entries that can stay (``latestForKey`` set), in Arrow: ``decision`` added,
    the rows newest first. A comparison with a null (a param, a timestamp, a size) holds for no row, as in Spark's
    ``when``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = rows.take(pc.sort_indices(rows, [("ledgerId", "descending"), ("entryId", "descending")]))
    grace, time_limit = params.get("tombstoneGraceMs"), params.get("compactedRetentionTimeMs")
    size_limit = params.get("compactedRetentionSizeBytes")
    nowhere = pa.repeat(False, rows.num_rows)
    age = pc.subtract(pa.scalar(as_of_ms, pa.int64()), rows["entryTs"])

    def over(values: pa.Array, limit: int | None) -> pa.Array:
        """``values > limit`` where it holds; nowhere when the limit is off (null or negative)."""
        return nowhere if limit is None or limit < 0 else pc.fill_null(pc.greater(values, limit), False)

    past_grace = (
        nowhere if grace is None else pa.repeat(True, rows.num_rows) if grace <= 0 else over(age, grace)
    )
    tombstone = pc.fill_null(pc.and_(pc.is_valid(rows["key"]), pc.equal(rows["size"], 0)), False)
    first = pc.if_else(
        pc.and_(tombstone, past_grace),
        pa.scalar("tombstoned"),
        pc.if_else(over(age, time_limit), pa.scalar("expired_time"), pa.scalar(None, pa.string())),
    )
    # The size window: survivors so far, newest first, kept while their running total fits the limit.
    survivors = pc.is_null(first)
    sizes = pc.if_else(survivors, pc.fill_null(rows["size"].cast(pa.int64()), 0), 0)
    retained_bytes = pc.cumulative_sum(sizes)
    window = pc.if_else(over(retained_bytes, size_limit), pa.scalar("expired_size"), pa.scalar("kept"))
    return rows.append_column("decision", pc.coalesce(first, window))


def decide_topics(
    spark,
    files: LedgerFiles,
    inputs: list,
    params: DataFrame,
    as_of_ms: int,
    retain_null_key: bool,
    parts: Mapping[str, tuple[str, pa.Schema]],
) -> DataFrame:
    """:data:`TOPIC_COUNTS` of the planned topics, each topic decided in the task that reads its input, which also
    writes the topic's kept entries and dropped keys (``parts``: :data:`COMPACTION_KEPT` and
    :data:`COMPACTION_DROPPED_KEYS` by name, a part file per task each), so the decisions never pass through
    Spark's rows. ``params``: topic and :data:`RULE_PARAMS` per planned topic."""

    def per_topic(work: TopicWork) -> pa.Table:
        decisions = arrow_topic_decisions(work.source, work.entries, as_of_ms, retain_null_key)
        work.written.write(COMPACTION_KEPT.name, kept_entries(decisions))
        work.written.write(COMPACTION_DROPPED_KEYS.name, dropped_keys(decisions))
        return arrow_topic_counts(decisions)

    return map_topic_inputs(
        topic_sources(spark, files, inputs).join(F.broadcast(params), "topic"),
        len(inputs),
        files.tier,
        DECISION_COLUMNS.fieldNames(),
        per_topic,
        TOPIC_COUNTS.ddl(),
        parts=parts,
    )


def decision_counts(decisions: DataFrame) -> DataFrame:
    """:data:`TOPIC_COUNTS` of decisions in Spark: the counts' reference form, which tests/compaction/test_plan.py
    holds equal to the plan's (:func:`arrow_topic_counts`). A row stands for ``weight`` entries when it has that
    column (:data:`TOPIC_DECISIONS`), else for one."""
    weight = F.col("weight") if "weight" in decisions.columns else F.lit(1)
    tallies = decisions.select("topic", "decision", "size", weight.cast("long").alias("weight"))
    counts = tallies.groupBy("topic").agg(
        F.sum("weight").alias("entriesRead"),
        *[
            F.sum(F.when(F.col("decision") == d, F.col("weight")).otherwise(0)).alias(_count_name(d))
            for d in DECISIONS
        ],
        F.sum(F.when(F.col("decision") == "kept", F.col("size")).otherwise(0))
        .cast("long")
        .alias("keptBytes"),
    )
    return counts.withColumn("entriesExpired", F.col("entriesExpiredTime") + F.col("entriesExpiredSize"))


def arrow_topic_counts(decisions: pa.Table) -> pa.Table:
    """One topic's :data:`TOPIC_COUNTS` row from its :data:`TOPIC_DECISIONS` (no row when it has none): how many
    entries were read and how many got each decision, and the kept entries' bytes. Pure."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = TOPIC_COUNTS.arrow_schema()
    if not decisions.num_rows:
        return schema.empty_table()
    by_decision = decisions.group_by("decision", use_threads=False).aggregate([("weight", "sum")])
    weights = dict(
        zip(by_decision["decision"].to_pylist(), by_decision["weight_sum"].to_pylist(), strict=True)
    )
    is_kept = pc.equal(decisions["decision"], "kept")
    counts = {_count_name(d): weights.get(d, 0) for d in DECISIONS}
    row = {
        "topic": decisions["topic"][0].as_py(),
        "entriesRead": sum(weights.values()),
        **counts,
        "keptBytes": pc.sum(pc.if_else(is_kept, decisions["size"].cast(pa.int64()), 0)).as_py(),
        "entriesExpired": counts["entriesExpiredTime"] + counts["entriesExpiredSize"],
    }
    return pa.Table.from_pylist([row], schema)


def kept_entries(decisions: pa.Table) -> pa.Table:
    """One topic's :data:`COMPACTION_KEPT` rows from its decisions, in position order. Pure."""
    import pyarrow.compute as pc

    kept = decisions.filter(pc.equal(decisions["decision"], "kept"))
    kept = kept.take(pc.sort_indices(kept, [("ledgerId", "ascending"), ("entryId", "ascending")]))
    return kept.append_column("keyDigest", key_digests(kept["key"])).select(COMPACTION_KEPT.names)


def dropped_keys(decisions: pa.Table) -> pa.Table:
    """One topic's :data:`COMPACTION_DROPPED_KEYS` rows: the keys that leave the compacted view this run (their
    latest entry is not kept), with the reason, by key digest. Pure."""
    import pyarrow as pa
    import pyarrow.compute as pc

    leaving = pc.and_(
        decisions["latestForKey"], pc.is_in(decisions["decision"], value_set=pa.array(DROPPING))
    )
    dropped = decisions.filter(pc.fill_null(leaving, False))
    dropped = dropped.append_column("keyDigest", key_digests(dropped["key"]))
    dropped = dropped.append_column("reason", dropped["decision"])
    return dropped.take(pc.sort_indices(dropped, [("keyDigest", "ascending")])).select(
        COMPACTION_DROPPED_KEYS.names
    )


def compaction_actions(candidates: DataFrame, counts: DataFrame) -> DataFrame:
    """``rewrite_compacted`` per compacted topic: ``ledgerId`` the compacted ledger it replaces (null: none),
    ``from``/``to`` the __compaction cursor move (``from`` null: the cursor is created at ``to``), ``readFrom``
    where the raw read started (the previous horizon; null: the first entry), the reconciling counts, ``bytes``
    the new compacted ledger's and ``bytesReplaced`` the one it replaces (null: none)."""
    planned = candidates.where(F.col("decision") == "compact").join(counts, "topic", "left")
    zero = F.lit(0).cast("long")
    return planned.select(
        "topic",
        F.lit(REWRITE_COMPACTED.name).alias("action"),
        F.col("prevCompactedLedgerId").alias("ledgerId"),
        F.lit(COMPACTION_SUBSCRIPTION).alias("subscription"),
        position_text(F.col("cursorLedger"), F.col("cursorEntry")).alias("from"),
        position_text(F.col("horizonLedger"), F.col("horizonEntry")).alias("to"),
        F.coalesce(F.col("keptBytes"), zero).alias("bytes"),
        F.col("prevCompactedBytes").alias("bytesReplaced"),
        F.concat_ws("; ", F.col("reason"), F.col("warning")).alias("reason"),
        position_text(F.col("readFromLedger"), F.col("readFromEntry")).alias("readFrom"),
        *[
            F.coalesce(F.col(name), zero).cast("long").alias(name)
            for name in ("entriesRead", *map(_count_name, DECISIONS), "entriesExpired")
        ],
    )


def compaction_blockers(candidates: DataFrame) -> DataFrame:
    return candidates.where(F.col("decision") == "skip").select(
        "topic", "kind", F.col("reason").alias("detail"), "bytes", "ledgers"
    )


def execute(spark, run: RunDir, info: RunInfo) -> dict[str, Any]:
    """Decide every compacted topic's entries; write the plan tables; the summary's figures."""
    with run_scoped_cache(spark):
        as_of_ms = int(info.as_of_ms)
        retain_null_key = bool(info.broker["topicCompactionRetainNullKey"])
        snapshot = read_snapshot(spark, run)
        candidates = materialize(
            compaction_candidates(
                snapshot["topics"],
                snapshot["ledgers"],
                snapshot["cursors"],
                snapshot["compacted_ledgers"],
                list(info.option("compactTopics", [])),
                as_of_ms,
                info.schedule_interval_ms,
            ).transform(lambda c: keep_held(c, snapshot["topics"], decision="decision", keep="skip"))
        )
        planned = candidates.where(F.col("decision") == "compact").collect()  # per-topic metadata only
        params = candidates.where(F.col("decision") == "compact").select("topic", *RULE_PARAMS)
        files, inputs = LedgerFiles.of(info), topic_inputs(planned)
        parts = {
            written.name: (str(run.plan_table(written)), written.arrow_schema())
            for written in (COMPACTION_KEPT, COMPACTION_DROPPED_KEYS)
        }
        prepare_parts(parts, run.plan_dir)
        counts = materialize(decide_topics(spark, files, inputs, params, as_of_ms, retain_null_key, parts))
        finish_parts(parts)
        write_table(candidates, run, COMPACTION_DECISIONS, ["topic"])
        write_table(compaction_actions(candidates, counts), run, ACTIONS, ["topic", "action"])
        write_table(compaction_blockers(candidates), run, BLOCKERS, ["topic", "kind"])
        groups = summary_groups(candidates, counts).collect()  # one row per namespace, kind and decision
        return {"retainNullKey": retain_null_key, **summary_figures(groups)}


def summary_groups(candidates: DataFrame, counts: DataFrame) -> DataFrame:
    """Per namespace, kind and decision: how many topics, how many with a warning, and their counts summed (one
    query for the whole summary)."""
    return (
        candidates.join(counts, "topic", "left")
        .groupBy("namespace", "kind", "decision")
        .agg(
            F.count("*").alias("topics"),
            F.count("warning").alias("warnings"),
            *[F.sum(name).alias(name) for name in _SUMMED],
        )
    )


# The counts the summary adds up over the compacted topics.
_SUMMED = tuple(name for name in TOPIC_COUNTS.names if name != "topic")


def summary_figures(groups: Iterable[Any]) -> dict[str, Any]:
    """The plan's figures from :func:`summary_groups`: topics to compact, topics by kind, warnings, the counts'
    totals and, per namespace, the compacted topics and their kept bytes. Pure."""
    by_kind: dict[str, int] = {}
    per_namespace: dict[str, dict[str, int]] = {}
    totals = dict.fromkeys(_SUMMED, 0)
    warnings = 0
    for group in groups:
        by_kind[group["kind"]] = by_kind.get(group["kind"], 0) + group["topics"]
        warnings += group["warnings"]
        for name in _SUMMED:
            totals[name] += group[name] or 0
        if group["decision"] == "compact":
            namespace = per_namespace.setdefault(group["namespace"], {"topics": 0, "keptBytes": 0})
            namespace["topics"] += group["topics"]
            namespace["keptBytes"] += group["keptBytes"] or 0
    return {
        "topicsToCompact": sum(n["topics"] for n in per_namespace.values()),
        "topicsByKind": by_kind,
        "warnings": warnings,
        **totals,
        "perNamespace": per_namespace,
    }


APP = PlanApp("compaction", "Plan topic compaction for one run's snapshot.", execute)
parse_args, run, main = APP.parse_args, APP.run, APP.main
