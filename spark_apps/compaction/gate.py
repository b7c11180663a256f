"""Quality-gate checks for topic compaction, re-derived from the snapshot and the entry files apart from the
planner (which takes each key's winner with ``max_by`` and decides the winners only; the gate aggregates the latest
position per key and joins it back to every entry).

Every ``rewrite_compacted`` action: the topic is in the snapshot and compaction applies to it (named in the
run's params, a threshold > 0, or a compacted ledger to keep under retention); it replaces the snapshot's
current compacted ledger (``ledgerId``), read the raw entries from that ledger's horizon (``readFrom``), moves
the ``__compaction`` cursor from where the snapshot has it (``from``) to the topic's last entry (``to``, the
horizon), never backward; one action per topic.

Every entry of the new compacted ledgers (``plan/compaction/kept``): it is an input entry (same position, key,
size, timestamp); a keyed entry is the latest entry of its key up to the horizon; a keyless one is only there
when the broker retains null keys; it is within the compacted retention time; a tombstone is within its grace;
unique per position.

Per topic: the kept entries fit the compacted retention size; nothing is missing (the gate's own count of the
entries that must survive equals the kept count); every key of the input is either kept or listed in
``dropped_keys`` with its latest entry and a reason that holds; the counts reconcile: read = kept + superseded
+ tombstoned + expired + keyless dropped, each part matching the gate's own count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.contract import ACTIONS, RunDir, read_run_info
from housekeeping.engine.gate import CheckFrame, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.mechanisms.compaction.tables import COMPACTION_DROPPED_KEYS, COMPACTION_KEPT
from spark_apps.compaction.entries import TopicInput, read_compaction_input
from spark_apps.shared.io import LedgerFiles, read_snapshot, read_table
from spark_apps.shared.positions import (
    packed_position,
    position_packs,
    position_text,
    unpacked_entry,
    unpacked_ledger,
)
from spark_apps.shared.session import materialize


def snapshot_facts(snapshot: dict[str, DataFrame], compact_topics: list[str]) -> DataFrame:
    """Per topic, from the snapshot alone: the compacted ledger in force, the __compaction cursor, the last
    entry (the horizon), the compaction settings."""
    last = (
        snapshot["ledgers"]
        .where(F.col("entries") > 0)
        .groupBy("topic")
        .agg(F.max(F.struct("ledgerId", (F.col("entries") - 1).alias("entryId"))).alias("last"))
    )
    cursor = snapshot["cursors"].where(F.col("name") == COMPACTION_SUBSCRIPTION)
    compacted = snapshot["compacted_ledgers"]
    requested = F.col("topic").isin(list(compact_topics)) if compact_topics else F.lit(False)
    return (
        snapshot["topics"]
        .join(last, "topic", "left")
        .join(cursor.select("topic", "markDeleteLedger", "markDeleteEntry"), "topic", "left")
        .join(
            compacted.select(
                "topic",
                F.col("ledgerId").alias("currentCompacted"),
                F.col("size").alias("currentCompactedBytes"),
                F.col("horizonLedger").alias("cHorizonLedger"),
                F.col("horizonEntry").alias("cHorizonEntry"),
            ),
            "topic",
            "left",
        )
        .select(
            "topic",
            (
                requested | (F.col("compactionThresholdBytes") > 0) | F.col("currentCompacted").isNotNull()
            ).alias("eligible"),
            "currentCompacted",
            "currentCompactedBytes",
            position_text(F.col("cHorizonLedger"), F.col("cHorizonEntry")).alias("expectedReadFrom"),
            "cHorizonLedger",
            "cHorizonEntry",
            position_text(F.col("markDeleteLedger"), F.col("markDeleteEntry")).alias("expectedFrom"),
            F.col("last.ledgerId").alias("lastLedger"),
            F.col("last.entryId").alias("lastEntry"),
            "compactedRetentionTimeMs",
            "compactedRetentionSizeBytes",
            "tombstoneGraceMs",
        )
    )


def action_checks(actions: DataFrame, facts: DataFrame, allowed: tuple[str, ...]) -> DataFrame:
    # The last raw entry, or the compacted horizon in force if no raw entry is after it (never backward).
    last = F.struct(F.col("lastLedger").cast("long").alias("l"), F.col("lastEntry").cast("long").alias("e"))
    in_force = F.struct(
        F.col("cHorizonLedger").cast("long").alias("l"), F.col("cHorizonEntry").cast("long").alias("e")
    )
    newest = F.greatest(
        F.when(F.col("lastLedger").isNotNull(), last), F.when(F.col("cHorizonLedger").isNotNull(), in_force)
    )
    horizon = position_text(newest["l"], newest["e"])
    frame = actions.join(facts, "topic", "left")
    to_l = F.split(F.col("to"), ":").getItem(0).cast("long")
    to_e = F.split(F.col("to"), ":").getItem(1).cast("long")
    from_l = F.split(F.col("from"), ":").getItem(0).cast("long")
    from_e = F.split(F.col("from"), ":").getItem(1).cast("long")
    return frame.select(
        "topic",
        F.col("action").isin(*allowed).alias("is_rewrite_compacted"),
        F.coalesce(F.col("eligible"), F.lit(False)).alias("topic_in_snapshot_and_eligible"),
        (F.col("subscription") == COMPACTION_SUBSCRIPTION).alias("moves_the_compaction_cursor"),
        F.col("ledgerId")
        .eqNullSafe(F.col("currentCompacted"))
        .alias("replaces_the_current_compacted_ledger"),
        F.col("bytesReplaced")
        .eqNullSafe(F.col("currentCompactedBytes"))
        .alias("replaced_bytes_are_the_current_compacted_size"),
        F.col("readFrom").eqNullSafe(F.col("expectedReadFrom")).alias("reads_from_the_compacted_horizon"),
        F.col("from").eqNullSafe(F.col("expectedFrom")).alias("cursor_from_is_current"),
        F.coalesce(F.col("to") == horizon, F.lit(False)).alias("horizon_is_the_last_entry"),
        F.coalesce(
            F.col("from").isNull()
            | (F.struct(to_l.alias("l"), to_e.alias("e")) >= F.struct(from_l.alias("l"), from_e.alias("e"))),
            F.lit(False),
        ).alias("cursor_never_moves_backward"),
    )


def gate_inputs(facts: DataFrame, ledgers: DataFrame, topics: list[str]) -> list[TopicInput]:
    """Where each planned topic's input lies, from the snapshot (the gate's own reading)."""
    rows = {r["topic"]: r for r in facts.where(F.col("topic").isin(topics)).collect()} if topics else {}
    stored = {}
    for r in (
        ledgers.where(F.col("topic").isin(topics) & (F.col("entries") > 0) & F.col("entriesStored"))
        .select("topic", "ledgerId")
        .collect()
        if topics
        else []
    ):
        stored.setdefault(r["topic"], []).append(int(r["ledgerId"]))
    inputs = []
    for topic, row in sorted(rows.items()):
        if row["lastLedger"] is None and row["currentCompacted"] is None:
            continue
        low = (
            None if row["cHorizonLedger"] is None else (int(row["cHorizonLedger"]), int(row["cHorizonEntry"]))
        )
        last = None if row["lastLedger"] is None else (int(row["lastLedger"]), int(row["lastEntry"]))
        horizon = max((p for p in (last, low) if p is not None), default=(-1, -1))  # never backward
        inputs.append(
            TopicInput(
                topic=topic,
                compacted_ledger_id=row["currentCompacted"],
                read_from=low,
                horizon=horizon,
                raw_ledger_ids=tuple(sorted(i for i in stored.get(topic, []) if low is None or i >= low[0])),
            )
        )
    return inputs


# The gate's latest position per key as one packed long while every position fits (``spark_apps.shared.positions``):
# Spark hash-aggregates a long, while a max over a struct sorts every entry (19.6 s of the gate at 10 M entries).
# Whether every position fits is aggregated alongside; when one does not, the struct max decides.
def latest_per_key(entries: DataFrame) -> DataFrame:
    """topic, key, latest: the newest position of each key in the input (an aggregate, not a ranking),
    materialized."""
    keyed = entries.where(F.col("key").isNotNull())
    fits = position_packs(F.col("ledgerId"), F.col("entryId"))
    packed = materialize(
        keyed.groupBy("topic", "key").agg(
            F.max(packed_position(F.col("ledgerId"), F.col("entryId"))).alias("position"),
            F.min(fits.cast("int")).alias("fits"),
        )
    )
    if packed.where(F.col("fits") == 0).limit(1).count() == 0:
        return packed.select(
            "topic",
            "key",
            F.struct(
                unpacked_ledger(F.col("position")).alias("ledgerId"),
                unpacked_entry(F.col("position")).alias("entryId"),
            ).alias("latest"),
        )
    return materialize(
        keyed.groupBy("topic", "key").agg(F.max(F.struct("ledgerId", "entryId")).alias("latest"))
    )


def expected_survivors(
    entries: DataFrame, latest: DataFrame, facts: DataFrame, as_of_ms: int, retain_null_key: bool
) -> DataFrame:
    """The input entries that must be in the new compacted ledger, derived with an aggregate of the latest
    position per key (not the planner's ranking)."""
    age = F.lit(as_of_ms) - F.col("entryTs")
    frame = (
        entries.join(latest, ["topic", "key"], "left")
        .join(
            F.broadcast(
                facts.select(
                    "topic", "compactedRetentionTimeMs", "compactedRetentionSizeBytes", "tombstoneGraceMs"
                )
            ),
            "topic",
        )
        .withColumn(
            "isLatest",
            F.col("key").isNotNull() & (F.col("latest") == F.struct(F.col("ledgerId"), F.col("entryId"))),
        )
    )
    candidate = (
        (F.col("isLatest") | (F.col("key").isNull() & F.lit(retain_null_key)))
        & ~(
            F.col("key").isNotNull()
            & (F.col("size") == 0)
            & ((F.col("tombstoneGraceMs") <= 0) | (age > F.col("tombstoneGraceMs")))
        )
        & ((F.col("compactedRetentionTimeMs") < 0) | (age <= F.col("compactedRetentionTimeMs")))
    )
    newest = (
        Window.partitionBy("topic")
        .orderBy(F.col("ledgerId").desc(), F.col("entryId").desc())
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    return (
        frame.where(candidate)
        .withColumn("newerBytes", F.sum(F.col("size").cast("long")).over(newest))
        .where(
            (F.col("compactedRetentionSizeBytes") < 0)
            | (F.col("newerBytes") <= F.col("compactedRetentionSizeBytes"))
        )
        .select("topic", "ledgerId", "entryId")
    )


def kept_checks(
    kept: DataFrame,
    entries: DataFrame,
    latest: DataFrame,
    facts: DataFrame,
    horizons: DataFrame,
    as_of_ms: int,
    retain_null_key: bool,
) -> DataFrame:
    source = entries.select(
        "topic",
        "ledgerId",
        "entryId",
        F.col("key").alias("inKey"),
        F.col("size").alias("inSize"),
        F.col("entryTs").alias("inTs"),
        F.lit(True).alias("inInput"),
    )
    age = F.lit(as_of_ms) - F.col("inTs")
    frame = (
        kept.join(source, ["topic", "ledgerId", "entryId"], "left")
        .join(latest, ["topic", "key"], "left")
        .join(facts.select("topic", "compactedRetentionTimeMs", "tombstoneGraceMs"), "topic", "left")
        .join(horizons, "topic", "left")
    )
    return frame.select(
        "topic",
        "ledgerId",
        "entryId",
        F.coalesce(F.col("inInput"), F.lit(False)).alias("entry_is_an_input_entry"),
        F.coalesce(
            F.col("key").eqNullSafe(F.col("inKey"))
            & (F.col("size") == F.col("inSize"))
            & (F.col("entryTs") == F.col("inTs")),
            F.lit(False),
        ).alias("entry_matches_its_input"),
        F.coalesce(
            F.col("key").isNull() | (F.col("latest") == F.struct(F.col("ledgerId"), F.col("entryId"))),
            F.lit(False),
        ).alias("latest_for_its_key"),
        (F.col("key").isNotNull() | F.lit(retain_null_key)).alias("keyed_or_null_keys_retained"),
        F.coalesce(
            (F.col("compactedRetentionTimeMs") < 0) | (age <= F.col("compactedRetentionTimeMs")), F.lit(False)
        ).alias("within_compacted_retention_time"),
        F.coalesce(
            F.col("key").isNull()
            | (F.col("size") != 0)
            | ((F.col("tombstoneGraceMs") > 0) & (age <= F.col("tombstoneGraceMs"))),
            F.lit(False),
        ).alias("tombstone_within_grace"),
        F.coalesce(
            F.struct(F.col("ledgerId"), F.col("entryId")) <= F.struct(F.col("hLedger"), F.col("hEntry")),
            F.lit(False),
        ).alias("at_or_before_horizon"),
    )


def topic_checks(
    actions: DataFrame,
    kept: DataFrame,
    dropped: DataFrame,
    entries: DataFrame,
    latest: DataFrame,
    expected: DataFrame,
    facts: DataFrame,
    retain_null_key: bool,
) -> DataFrame:
    counted = entries.groupBy("topic").agg(
        F.count("*").alias("read"),
        F.sum(F.when(F.col("key").isNull(), 1).otherwise(0)).alias("keyless"),
    )
    keys_latest = latest.groupBy("topic").agg(F.count("*").alias("keys"))
    kept_counts = kept.groupBy("topic").agg(
        F.count("*").alias("keptRows"),
        F.sum(F.col("size").cast("long")).alias("keptBytes"),
        F.sum(F.when(F.col("key").isNotNull(), 1).otherwise(0)).alias("keptKeys"),
    )
    expected_counts = expected.groupBy("topic").agg(F.count("*").alias("expectedRows"))
    # Equal counts and no kept entry outside the expected set: the two sets are equal.
    extra = (
        kept.join(expected, ["topic", "ledgerId", "entryId"], "left_anti")
        .groupBy("topic")
        .agg(F.count("*").alias("unexpectedRows"))
    )
    dropped_counts = dropped.groupBy("topic").agg(F.count("*").alias("droppedKeys"))
    zero = F.lit(0)
    frame = (
        actions.join(counted, "topic", "left")
        .join(keys_latest, "topic", "left")
        .join(kept_counts, "topic", "left")
        .join(expected_counts, "topic", "left")
        .join(dropped_counts, "topic", "left")
        .join(extra, "topic", "left")
        .join(facts.select("topic", "compactedRetentionSizeBytes"), "topic", "left")
    )
    read = F.coalesce(F.col("read"), zero)
    keyed = read - F.coalesce(F.col("keyless"), zero)
    keys = F.coalesce(F.col("keys"), zero)
    parts = (
        F.col("entriesKept")
        + F.col("entriesSuperseded")
        + F.col("entriesTombstoned")
        + F.col("entriesExpiredTime")
        + F.col("entriesExpiredSize")
        + F.col("entriesKeylessDropped")
    )
    return frame.select(
        "topic",
        (F.col("entriesRead") == read).alias("read_count_matches_the_input"),
        (parts == F.col("entriesRead")).alias("counts_reconcile"),
        (F.col("entriesExpired") == F.col("entriesExpiredTime") + F.col("entriesExpiredSize")).alias(
            "expired_is_time_plus_size"
        ),
        (F.col("entriesKept") == F.coalesce(F.col("keptRows"), zero)).alias("kept_count_matches_the_ledger"),
        (
            (F.coalesce(F.col("keptRows"), zero) == F.coalesce(F.col("expectedRows"), zero))
            & F.col("unexpectedRows").isNull()
        ).alias("no_entry_missing_or_extra"),
        (F.col("entriesSuperseded") == keyed - keys).alias("superseded_count_matches"),
        (
            F.col("entriesKeylessDropped")
            == (zero if retain_null_key else F.coalesce(F.col("keyless"), zero))
        ).alias("keyless_count_matches"),
        (keys == F.coalesce(F.col("keptKeys"), zero) + F.coalesce(F.col("droppedKeys"), zero)).alias(
            "every_key_kept_or_dropped_with_a_reason"
        ),
        (
            (F.col("compactedRetentionSizeBytes") < 0)
            | (F.coalesce(F.col("keptBytes"), zero) <= F.col("compactedRetentionSizeBytes"))
        ).alias("within_compacted_retention_size"),
        (F.col("bytes") == F.coalesce(F.col("keptBytes"), zero)).alias("bytes_match_the_kept_entries"),
    )


def dropped_checks(
    dropped: DataFrame, latest: DataFrame, kept: DataFrame, facts: DataFrame, as_of_ms: int
) -> DataFrame:
    kept_keys = kept.where(F.col("key").isNotNull()).select("topic", "key", F.lit(True).alias("alsoKept"))
    age = F.lit(as_of_ms) - F.col("entryTs")
    frame = (
        dropped.join(latest, ["topic", "key"], "left")
        .join(kept_keys, ["topic", "key"], "left")
        .join(facts.select("topic", "compactedRetentionTimeMs", "tombstoneGraceMs"), "topic", "left")
    )
    reason_holds = (
        F.when(
            F.col("reason") == "tombstoned",
            (F.col("size") == 0) & ((F.col("tombstoneGraceMs") <= 0) | (age > F.col("tombstoneGraceMs"))),
        )
        .when(
            F.col("reason") == "expired_time",
            (F.col("compactedRetentionTimeMs") >= 0) & (age > F.col("compactedRetentionTimeMs")),
        )
        # Size expiry is checked per topic (the kept entries already fill the limit: no_entry_missing_or_extra).
        .when(F.col("reason") == "expired_size", F.lit(True))
        .otherwise(F.lit(False))
    )
    return frame.select(
        "topic",
        "key",
        F.coalesce(F.col("latest") == F.struct(F.col("ledgerId"), F.col("entryId")), F.lit(False)).alias(
            "dropped_entry_is_the_latest_for_its_key"
        ),
        F.col("alsoKept").isNull().alias("dropped_key_not_also_kept"),
        F.coalesce(reason_holds, F.lit(False)).alias("drop_reason_holds"),
    )


@dataclass(frozen=True)
class GateFrames:
    """What the compaction gate reads, once: the plan's tables, the snapshot's facts, and the input entries it
    reads again itself (keys as their SHA-256 throughout, as the plan names them)."""

    as_of_ms: int
    retain_null_key: bool
    actions: DataFrame
    kept: DataFrame
    dropped: DataFrame
    facts: DataFrame
    entries: DataFrame
    horizons: DataFrame
    latest: DataFrame
    expected: DataFrame


def read_frames(spark, run_dir: str | Path) -> GateFrames:
    run = RunDir(run_dir)
    info = read_run_info(run)
    as_of_ms = int(info["asOfMs"])
    retain_null_key = bool(info["broker"]["topicCompactionRetainNullKey"])
    snapshot = read_snapshot(spark, run)
    actions = materialize(read_table(spark, run, ACTIONS))
    facts = materialize(snapshot_facts(snapshot, list(info.get("compactTopics", []))))
    topics = [r["topic"] for r in actions.select("topic").distinct().collect()]
    inputs = gate_inputs(facts, snapshot["ledgers"], topics)
    entries = materialize(
        read_compaction_input(spark, LedgerFiles.of(info), inputs).withColumn(
            "key", F.sha2(F.col("key"), 256)
        )
    )
    latest = latest_per_key(entries)
    return GateFrames(
        as_of_ms=as_of_ms,
        retain_null_key=retain_null_key,
        actions=actions,
        kept=materialize(read_table(spark, run, COMPACTION_KEPT).withColumnRenamed("keyDigest", "key")),
        dropped=materialize(
            read_table(spark, run, COMPACTION_DROPPED_KEYS).withColumnRenamed("keyDigest", "key")
        ),
        facts=facts,
        entries=entries,
        horizons=spark.createDataFrame(
            [(i.topic, i.horizon[0], i.horizon[1]) for i in inputs], "topic string, hLedger long, hEntry long"
        ),
        latest=latest,
        expected=materialize(expected_survivors(entries, latest, facts, as_of_ms, retain_null_key)),
    )


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    import great_expectations.expectations as gxe

    f = read_frames(spark, run_dir)
    return [
        CheckFrame(
            "actions",
            action_checks(f.actions, f.facts, spec.action_names),
            [
                gxe.ExpectColumnValuesToBeUnique(column="topic"),
                *must_be_true(
                    "is_rewrite_compacted",
                    "topic_in_snapshot_and_eligible",
                    "moves_the_compaction_cursor",
                    "replaces_the_current_compacted_ledger",
                    "replaced_bytes_are_the_current_compacted_size",
                    "reads_from_the_compacted_horizon",
                    "cursor_from_is_current",
                    "horizon_is_the_last_entry",
                    "cursor_never_moves_backward",
                ),
            ],
        ),
        CheckFrame(
            "kept_entries",
            kept_checks(f.kept, f.entries, f.latest, f.facts, f.horizons, f.as_of_ms, f.retain_null_key),
            [
                gxe.ExpectCompoundColumnsToBeUnique(column_list=["topic", "ledgerId", "entryId"]),
                *must_be_true(
                    "entry_is_an_input_entry",
                    "entry_matches_its_input",
                    "latest_for_its_key",
                    "keyed_or_null_keys_retained",
                    "within_compacted_retention_time",
                    "tombstone_within_grace",
                    "at_or_before_horizon",
                ),
            ],
            materialize_first=True,  # one row per kept entry: millions in a large compaction
        ),
        CheckFrame(
            "topics",
            topic_checks(
                f.actions, f.kept, f.dropped, f.entries, f.latest, f.expected, f.facts, f.retain_null_key
            ),
            must_be_true(
                "read_count_matches_the_input",
                "counts_reconcile",
                "expired_is_time_plus_size",
                "kept_count_matches_the_ledger",
                "no_entry_missing_or_extra",
                "superseded_count_matches",
                "keyless_count_matches",
                "every_key_kept_or_dropped_with_a_reason",
                "within_compacted_retention_size",
                "bytes_match_the_kept_entries",
            ),
        ),
        CheckFrame(
            "dropped_keys",
            dropped_checks(f.dropped, f.latest, f.kept, f.facts, f.as_of_ms),
            [
                gxe.ExpectCompoundColumnsToBeUnique(column_list=["topic", "key"]),
                *must_be_true(
                    "dropped_entry_is_the_latest_for_its_key",
                    "dropped_key_not_also_kept",
                    "drop_reason_holds",
                ),
            ],
        ),
    ]
