"""Spark app: plan topic compaction with retention on the compacted ledger (PULSAR_SEMANTICS.md section 5;
apache/pulsar #19665 / PIP-252, which Pulsar never built).

Which topics (``compaction_candidates``, metadata only):

- ``requested``: named in the run's ``compact_topics`` param (Pulsar's ``topics compact``);
- ``threshold_exceeded``: compaction threshold (topic > namespace > broker
  ``brokerServiceCompactionThresholdInBytes``; 0 = off) > 0 and the ``__compaction`` subscription's estimated
  backlog bytes ``>`` it (``PersistentTopic#checkCompaction``; without the subscription, the topic's stored bytes);
- ``compacted_retention_due`` (a gap Pulsar left, #24791): the current compacted ledger holds entries the
  compacted retention no longer allows, or tombstones past their grace, although nothing new arrived.

What each new compacted ledger holds (``entry_decisions``, pure; the plan computes the same from each key's
latest entry, ``arrow_key_groups`` and ``latest_decisions``): the previous compacted ledger plus the raw entries after its
horizon, up to this run's horizon (the topic's last entry in the snapshot). Per entry:

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
(every key that leaves the compacted view, and why), and ``plan/summary.json``. Nothing is collected to the
driver but per-topic metadata and counts.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.contract import ACTIONS, BLOCKERS, RunDir, read_run_info, table
from housekeeping.mechanisms.compaction.actions import REWRITE_COMPACTED
from housekeeping.mechanisms.compaction.tables import (
    COMPACTION_DECISIONS,
    COMPACTION_DROPPED_KEYS,
    COMPACTION_KEPT,
)
from spark_apps.compaction.entries import (
    DECISION_COLUMNS,
    map_topic_inputs,
    read_compaction_input,
    topic_inputs,
    topic_sources,
)
from spark_apps.shared.holds import keep_held
from spark_apps.shared.io import LedgerFiles, read_snapshot, write_summary, write_table
from spark_apps.shared.plan_app import parse_plan_args, plan_main
from spark_apps.shared.positions import (
    arrow_packed_position,
    arrow_position_packs,
    position_key,
    position_text,
    unpacked_entry,
    unpacked_ledger,
)
from spark_apps.shared.session import materialize, run_scoped_cache

if TYPE_CHECKING:
    import pyarrow as pa

DECISIONS = ("kept", "superseded", "tombstoned", "expired_time", "expired_size", "keyless_dropped")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_plan_args("Plan topic compaction for one run's snapshot.", argv)


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
    (topic, key). Pure. The reference form of the rule, and the plan's when positions do not pack
    (:func:`packable`).

    entries: topic, ledgerId, entryId, entryTs, key, size (+ anything else, passed through);
    params: topic, compactedRetentionTimeMs, compactedRetentionSizeBytes, tombstoneGraceMs."""
    newest_first = F.col("ledgerId").desc(), F.col("entryId").desc()
    by_key = Window.partitionBy("topic", "key").orderBy(*newest_first)
    frame = entries.join(F.broadcast(params), "topic").withColumn(
        "latestForKey", F.col("key").isNotNull() & (F.row_number().over(by_key) == 1)
    )
    return _decide(frame, as_of_ms, retain_null_key)


# Per (topic, key), keyless entries one group per topic: how many entries, and the latest one's position (packed:
# ``spark_apps.shared.positions``), timestamp, size and source; ``unpackable`` 1 when an entry's position does not
# pack (the plan then decides every entry with ``entry_decisions``).
KEY_GROUPS = table(
    "compaction_key_groups",
    "topic string, key string, entriesOfKey bigint, latestPosition bigint, entryTs bigint, size int, "
    "fromCompacted boolean, unpackable int",
)


def arrow_key_groups(topic: str, parts: Iterable[pa.Table]) -> pa.Table:
    """:data:`KEY_GROUPS` of one topic's entries (ledgerId, entryId, key, size, source, entryTs), given in parts
    (a file each), in Arrow: run in the task that reads the topic's input, so grouping by key needs no shuffle (a
    Spark aggregate by (topic, key) shuffled every entry: 10-14 s of a 10 M-entry plan). Each part is grouped as
    it comes and merged into the groups so far, so memory follows the topic's keys, not its entries (Pulsar's
    compaction likewise keeps a map of keys to their latest position). Pure. A key's latest entry is its last in
    position order (Arrow's ordered ``last``), the one with the largest packed position whenever every position
    packs."""
    import pyarrow as pa
    import pyarrow.compute as pc

    groups = None
    for part in parts:
        packs = arrow_position_packs(part["ledgerId"], part["entryId"])
        entries = pa.table(
            {
                "key": part["key"],
                "entriesOfKey": pa.array([1] * part.num_rows, pa.int64()),
                "ledgerId": part["ledgerId"],
                "entryId": part["entryId"],
                "entryTs": part["entryTs"],
                "size": part["size"],
                "fromCompacted": pc.equal(part["source"], "compacted"),
                "unpackable": pc.invert(packs).cast(pa.int32()),
            }
        )
        groups = _latest_per_key(entries if groups is None else pa.concat_tables([groups, entries]))
    if groups is None:
        return KEY_GROUPS.arrow_schema().empty_table()
    return pa.Table.from_pydict(
        {
            "topic": pa.array([topic] * groups.num_rows, pa.string()),
            "key": groups["key"],
            "entriesOfKey": groups["entriesOfKey"],
            "latestPosition": arrow_packed_position(groups["ledgerId"], groups["entryId"]),
            "entryTs": groups["entryTs"],
            "size": groups["size"],
            "fromCompacted": groups["fromCompacted"],
            "unpackable": groups["unpackable"],
        }
    ).cast(KEY_GROUPS.arrow_schema())


def _latest_per_key(rows: pa.Table) -> pa.Table:
    """Rows (one per entry, or per key of earlier parts) folded into one per key: the counts summed, the latest
    position's fields taken, ``unpackable`` the most."""
    import pyarrow.compute as pc

    ordered = rows.take(pc.sort_indices(rows, [("ledgerId", "ascending"), ("entryId", "ascending")]))
    last = pc.ScalarAggregateOptions(skip_nulls=False)
    latest = ("ledgerId", "entryId", "entryTs", "size", "fromCompacted")
    folded = ordered.group_by("key", use_threads=False).aggregate(
        [("entriesOfKey", "sum"), *[(name, "last", last) for name in latest], ("unpackable", "max")]
    )
    names = {"entriesOfKey_sum": "entriesOfKey", "unpackable_max": "unpackable"}
    names |= {f"{name}_last": name for name in latest}
    return folded.rename_columns([names.get(name, name) for name in folded.column_names])


def topic_key_groups(spark, files: LedgerFiles, inputs: list) -> DataFrame:
    """:data:`KEY_GROUPS` of the planned topics' input, each topic grouped in the task that reads it."""
    return map_topic_inputs(
        topic_sources(spark, files, inputs),
        len(inputs),
        files.tier,
        DECISION_COLUMNS.fieldNames(),
        lambda source, parts: arrow_key_groups(source["topic"], parts),
        KEY_GROUPS.ddl(),
    )


def packable(groups: DataFrame) -> bool:
    """Whether every entry's position packed (:data:`KEY_GROUPS`), so the groups' latest entries are exact."""
    return groups.where(F.col("unpackable") == 1).limit(1).count() == 0


def latest_decisions(
    groups: DataFrame, entries: DataFrame, params: DataFrame, as_of_ms: int, retain_null_key: bool
) -> DataFrame:
    """The decisions of the entries that can stay (each key's latest entry, and each keyless entry when retained),
    as :func:`entry_decisions` gives them, from the :data:`KEY_GROUPS` winners: the size window runs on these
    only. Every other entry is superseded or keyless-dropped (:func:`folded_decisions` counts them). Pure."""
    latest = groups.where(F.col("key").isNotNull()).select(
        "topic",
        unpacked_ledger(F.col("latestPosition")).alias("ledgerId"),
        unpacked_entry(F.col("latestPosition")).alias("entryId"),
        "key",
        "entryTs",
        "size",
        F.when(F.col("fromCompacted"), F.lit("compacted")).otherwise(F.lit("raw")).alias("source"),
    )
    if retain_null_key:
        latest = latest.unionByName(entries.where(F.col("key").isNull()).select(*latest.columns))
    frame = latest.join(F.broadcast(params), "topic").withColumn("latestForKey", F.col("key").isNotNull())
    return _decide(frame, as_of_ms, retain_null_key)


def folded_decisions(groups: DataFrame, retain_null_key: bool) -> DataFrame:
    """The entries :func:`latest_decisions` leaves out, as weighted rows for :func:`decision_counts`: per key its
    superseded entries, per topic its keyless ones when they are dropped."""
    superseded = groups.where(F.col("key").isNotNull() & (F.col("entriesOfKey") > 1)).select(
        "topic", F.lit("superseded").alias("decision"), (F.col("entriesOfKey") - 1).alias("weight")
    )
    if retain_null_key:
        return superseded.withColumn("size", F.lit(0))
    keyless = groups.where(F.col("key").isNull()).select(
        "topic", F.lit("keyless_dropped").alias("decision"), F.col("entriesOfKey").alias("weight")
    )
    return superseded.unionByName(keyless).withColumn("size", F.lit(0))


def decision_counts(decisions: DataFrame, folded: DataFrame | None = None) -> DataFrame:
    """Per topic: entriesRead and one count per decision (the columns of a rewrite_compacted action). ``folded``:
    rows standing for ``weight`` entries each (:func:`folded_decisions`), added to the decisions'."""
    tallies = decisions.select("topic", "decision", "size", F.lit(1).cast("long").alias("weight"))
    if folded is not None:
        tallies = tallies.unionByName(
            folded.select("topic", "decision", "size", F.col("weight").cast("long"))
        )
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


def _count_name(decision: str) -> str:
    return "entries" + "".join(part.capitalize() for part in decision.split("_"))


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


def dropped_keys(decisions: DataFrame) -> DataFrame:
    """Keys that leave the compacted view this run: their latest entry is not kept, with the reason."""
    return decisions.where(
        F.col("latestForKey") & F.col("decision").isin("tombstoned", "expired_time", "expired_size")
    ).select(
        "topic",
        F.sha2(F.col("key"), 256).alias("keyDigest"),
        "ledgerId",
        "entryId",
        "entryTs",
        "size",
        F.col("decision").alias("reason"),
    )


def compaction_blockers(candidates: DataFrame) -> DataFrame:
    return candidates.where(F.col("decision") == "skip").select(
        "topic", "kind", F.col("reason").alias("detail"), "bytes", "ledgers"
    )


def decisions_and_counts(
    groups: DataFrame, entries: DataFrame, params: DataFrame, as_of_ms: int, retain_null_key: bool
) -> tuple[DataFrame, DataFrame]:
    """The decisions of the entries that can stay, and every topic's counts, materialized: from each key's winner
    (``groups``: :data:`KEY_GROUPS` of ``entries``) when positions pack, else per entry."""
    groups = materialize(groups)
    if packable(groups):
        decisions = materialize(latest_decisions(groups, entries, params, as_of_ms, retain_null_key))
        counts = materialize(decision_counts(decisions, folded_decisions(groups, retain_null_key)))
    else:
        decisions = materialize(entry_decisions(entries, params, as_of_ms, retain_null_key))
        counts = materialize(decision_counts(decisions))
    return decisions, counts


def run(spark, run_dir: str | Path) -> dict:
    run = RunDir(run_dir)
    with run_scoped_cache(spark):
        info = read_run_info(run)
        as_of_ms = int(info["asOfMs"])
        retain_null_key = bool(info["broker"]["topicCompactionRetainNullKey"])
        snapshot = read_snapshot(spark, run)
        candidates = materialize(
            compaction_candidates(
                snapshot["topics"],
                snapshot["ledgers"],
                snapshot["cursors"],
                snapshot["compacted_ledgers"],
                list(info.get("compactTopics", [])),
                as_of_ms,
                info.get("scheduleIntervalMs"),
            ).transform(lambda c: keep_held(c, snapshot["topics"], decision="decision", keep="skip"))
        )
        planned = candidates.where(F.col("decision") == "compact").collect()  # per-topic metadata only
        params = candidates.where(F.col("decision") == "compact").select(
            "topic", "compactedRetentionTimeMs", "compactedRetentionSizeBytes", "tombstoneGraceMs"
        )
        files, inputs = LedgerFiles.of(info), topic_inputs(planned)
        entries = read_compaction_input(spark, files, inputs)  # read again only for what groups do not hold
        groups = topic_key_groups(spark, files, inputs)
        decisions, counts = decisions_and_counts(groups, entries, params, as_of_ms, retain_null_key)
        write_table(candidates, run, COMPACTION_DECISIONS, ["topic"])
        write_table(compaction_actions(candidates, counts), run, ACTIONS, ["topic", "action"])
        write_table(compaction_blockers(candidates), run, BLOCKERS, ["topic", "kind"])
        kept = (
            decisions.where(F.col("decision") == "kept")
            .withColumn("keyDigest", F.sha2(F.col("key"), 256))
            .select(*COMPACTION_KEPT.names)
        )
        # Parquet: the gate and the apply app read the entries back.
        write_table(kept, run, COMPACTION_KEPT, ["topic", "ledgerId", "entryId"])
        write_table(dropped_keys(decisions), run, COMPACTION_DROPPED_KEYS, ["topic", "keyDigest"])
        totals = counts.agg(*[F.sum(c).alias(c) for c in counts.columns if c != "topic"]).first()
        per_namespace = {
            r["namespace"]: {"topics": int(r["topics"]), "keptBytes": int(r["keptBytes"] or 0)}
            for r in candidates.where(F.col("decision") == "compact")
            .join(counts, "topic", "left")
            .groupBy("namespace")
            .agg(F.count("*").alias("topics"), F.sum("keptBytes").alias("keptBytes"))
            .collect()
        }
        summary = {
            "mechanism": "compaction",
            "runId": info["runId"],
            "asOfMs": as_of_ms,
            "retainNullKey": retain_null_key,
            "topicsToCompact": len(planned),
            "topicsByKind": {
                r["kind"]: int(r["count"]) for r in candidates.groupBy("kind").count().collect()
            },
            "warnings": candidates.where(F.col("warning").isNotNull()).count(),
            **{
                name: int((totals[name] if totals is not None else 0) or 0)
                for name in counts.columns
                if name != "topic"
            },
            "perNamespace": per_namespace,
        }
        write_summary(run, summary)
        return summary


def main(argv: list[str] | None = None) -> int:
    return plan_main("compaction", run, parse_args(argv))
