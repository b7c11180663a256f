"""Quality-gate checks for topic compaction, re-derived from the snapshot and the entry files apart from the
planner (which groups each topic's entries by key in Arrow, takes each key's last entry and decides the winners
with the rule in Spark; the gate sorts each topic's entries by key, newest first, derives the entries that must
survive itself, and checks the plan's tables against that in Spark).

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

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.contract import ACTIONS, RunDir, read_run_info, table
from housekeeping.engine.gate import CheckFrame, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.mechanisms.compaction.tables import COMPACTION_DROPPED_KEYS, COMPACTION_KEPT
from spark_apps.compaction.entries import (
    DECISION_COLUMNS,
    TopicInput,
    at_positions,
    kept_positions,
    map_topic_inputs,
    positions_by_ledger,
    topic_sources,
)
from spark_apps.shared.io import LedgerFiles, read_snapshot, read_table
from spark_apps.shared.positions import (
    position_text,
)
from spark_apps.shared.session import materialize

if TYPE_CHECKING:
    import pyarrow as pa


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


# What the gate derives from each topic's input, in the task that reads it (``map_topic_inputs``: the input is
# grouped by topic on disk, so none of this shuffles the entries), one table with a row ``kind`` each:
# ``latest`` (per key, its newest position), ``input`` (the input entry at each position the plan keeps) and
# ``counts`` (per topic: entries read, keyless, how many entries must survive (``expectedRows``) and how many kept
# positions are not among them (``unexpectedRows``): equal counts and none unexpected make the two sets equal).
TOPIC_FACTS = table(
    "compaction_topic_facts",
    "kind string, topic string, key string, ledgerId bigint, entryId bigint, size int, entryTs bigint, "
    "entriesRead bigint, keyless bigint, expectedRows bigint, unexpectedRows bigint",
)
_FACT_COLUMNS = ["key", "ledgerId", "entryId", "size", "entryTs"]


def newest_per_key(rows: pa.Table) -> pa.Table:
    """The newest row of each key (keys not null): rows sorted by key and newest position first, each key's
    first row taken. Pure; exact for any ids (no packing), and not the planner's grouping."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ordered = rows.take(
        pc.sort_indices(rows, [("key", "ascending"), ("ledgerId", "descending"), ("entryId", "descending")])
    )
    keys = ordered["key"]
    first = pa.concat_arrays(
        [pa.array([True] * min(1, len(ordered)), pa.bool_()), *pc.not_equal(keys[1:], keys[:-1]).chunks]
    )
    return ordered.filter(first)


def expected_survivors(
    candidates: pa.Table, as_of_ms: int, time_ms: int, size_bytes: int, grace_ms: int
) -> pa.Table:
    """Of a topic's candidates (each key's newest entry, and its keyless entries when the broker retains them),
    those that must be in the new compacted ledger: a tombstone only within its grace, within the compacted
    retention time, and the newest whose sizes add up to the compacted retention size. Pure (SQL's three-valued
    logic, as Spark's)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    age = pc.subtract(pa.scalar(as_of_ms, pa.int64()), candidates["entryTs"])
    gone_tombstone = pc.and_kleene(
        pc.and_kleene(pc.is_valid(candidates["key"]), pc.equal(candidates["size"], 0)),
        pc.or_kleene(pa.scalar(grace_ms <= 0), pc.greater(age, grace_ms)),
    )
    within_time = pc.or_kleene(pa.scalar(time_ms < 0), pc.less_equal(age, time_ms))
    kept = candidates.filter(pc.and_kleene(pc.invert(gone_tombstone), within_time))
    newest_first = kept.take(pc.sort_indices(kept, [("ledgerId", "descending"), ("entryId", "descending")]))
    if size_bytes < 0:
        return newest_first
    newer_bytes = pc.cumulative_sum(newest_first["size"].cast(pa.int64()))
    return newest_first.filter(pc.less_equal(newer_bytes, size_bytes))


def topic_facts(source: dict, parts: Iterable[pa.Table], as_of_ms: int, retain_null_key: bool) -> pa.Table:
    """:data:`TOPIC_FACTS` of one topic, its input read a part (file) at a time: memory follows its keys and the
    entries the plan keeps, not its input. ``source``: the topic's sources row with its compacted-retention
    params and the positions the plan keeps (``kept``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kept_at = positions_by_ledger(source["kept"])
    latest, keyless, inputs = None, [], []
    read = keyless_count = 0
    for part in parts:
        rows = part.select(_FACT_COLUMNS)
        read += rows.num_rows
        keyed = pc.is_valid(rows["key"])
        keyless_rows = rows.filter(pc.invert(keyed))
        keyless_count += keyless_rows.num_rows
        if retain_null_key:
            keyless.append(keyless_rows)
        inputs.append(rows.filter(at_positions(rows, kept_at)))
        keyed_rows = rows.filter(keyed)
        latest = newest_per_key(keyed_rows if latest is None else pa.concat_tables([latest, keyed_rows]))
    schema = pa.schema([TOPIC_FACTS.arrow_schema().field(name) for name in _FACT_COLUMNS])
    latest = latest if latest is not None else schema.empty_table()
    time_ms, size_bytes, grace_ms = (
        source[name]
        for name in ("compactedRetentionTimeMs", "compactedRetentionSizeBytes", "tombstoneGraceMs")
    )
    candidates = pa.concat_tables([latest, *keyless])
    # A topic without params: nothing is expected (as SQL's nulls).
    if None in (time_ms, size_bytes, grace_ms):
        expected = candidates.slice(0, 0)
    else:
        expected = expected_survivors(candidates, as_of_ms, time_ms, size_bytes, grace_ms)
    expected_at = set(zip(expected["ledgerId"].to_pylist(), expected["entryId"].to_pylist(), strict=True))
    unexpected = sum((p["ledgerId"], p["entryId"]) not in expected_at for p in source["kept"] or [])
    counts = pa.table(
        {
            "entriesRead": [read],
            "keyless": [keyless_count],
            "expectedRows": [expected.num_rows],
            "unexpectedRows": [unexpected],
        }
    )
    tables = [
        _facts("latest", source["topic"], latest.select(["key", "ledgerId", "entryId"])),
        _facts("input", source["topic"], pa.concat_tables([schema.empty_table(), *inputs])),
        _facts("counts", source["topic"], counts),
    ]
    return pa.concat_tables(tables)


def _facts(kind: str, topic: str, rows: pa.Table) -> pa.Table:
    """``rows`` as :data:`TOPIC_FACTS` rows (the columns it lacks null)."""
    import pyarrow as pa

    columns = {
        "kind": pa.array([kind] * rows.num_rows, pa.string()),
        "topic": pa.array([topic] * rows.num_rows, pa.string()),
    }
    for field in list(TOPIC_FACTS.arrow_schema())[2:]:
        columns[field.name] = (
            rows[field.name].cast(field.type)
            if field.name in rows.column_names
            else pa.nulls(rows.num_rows, field.type)
        )
    return pa.table(columns)


def gate_topic_facts(
    spark,
    files: LedgerFiles,
    inputs: list[TopicInput],
    facts: DataFrame,
    kept: DataFrame,
    as_of_ms: int,
    retain_null_key: bool,
) -> DataFrame:
    """:data:`TOPIC_FACTS` of every topic the gate reads, materialized once."""
    params = facts.select(
        "topic", "compactedRetentionTimeMs", "compactedRetentionSizeBytes", "tombstoneGraceMs"
    )
    sources = (
        topic_sources(spark, files, inputs)
        .join(params, "topic", "left")
        .join(kept_positions(kept), "topic", "left")
    )
    return materialize(
        map_topic_inputs(
            sources,
            len(inputs),
            files.tier,
            DECISION_COLUMNS.fieldNames(),
            lambda source, parts: topic_facts(source, parts, as_of_ms, retain_null_key),
            TOPIC_FACTS.ddl(),
        )
    )


def kept_checks(
    kept: DataFrame,
    inputs: DataFrame,
    latest: DataFrame,
    facts: DataFrame,
    horizons: DataFrame,
    as_of_ms: int,
    retain_null_key: bool,
) -> DataFrame:
    """``inputs``: the input entries at the kept positions (topic, ledgerId, entryId, key, size, entryTs)."""
    source = inputs.select(
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
    counted: DataFrame,
    latest: DataFrame,
    facts: DataFrame,
    retain_null_key: bool,
) -> DataFrame:
    """``counted``: per topic the entries its input holds (``read``), the keyless ones (``keyless``), how many must
    survive (``expectedRows``) and how many kept positions are not among those (``unexpectedRows``)."""
    keys_latest = latest.groupBy("topic").agg(F.count("*").alias("keys"))
    kept_counts = kept.groupBy("topic").agg(
        F.count("*").alias("keptRows"),
        F.sum(F.col("size").cast("long")).alias("keptBytes"),
        F.sum(F.when(F.col("key").isNotNull(), 1).otherwise(0)).alias("keptKeys"),
    )
    dropped_counts = dropped.groupBy("topic").agg(F.count("*").alias("droppedKeys"))
    zero = F.lit(0)
    frame = (
        actions.join(counted, "topic", "left")
        .join(keys_latest, "topic", "left")
        .join(kept_counts, "topic", "left")
        .join(dropped_counts, "topic", "left")
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
            # Equal counts and no kept entry outside the expected set: the two sets are equal.
            (F.coalesce(F.col("keptRows"), zero) == F.coalesce(F.col("expectedRows"), zero))
            & (F.coalesce(F.col("unexpectedRows"), zero) == 0)
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
    """What the compaction gate reads, once: the plan's tables, the snapshot's facts, and what it derives itself
    from the input entries it reads again (``gate_topic_facts``; keys as their SHA-256 throughout, as the plan
    names them)."""

    as_of_ms: int
    retain_null_key: bool
    actions: DataFrame
    kept: DataFrame
    dropped: DataFrame
    facts: DataFrame
    inputs: DataFrame  # the input entries at the kept positions
    counted: DataFrame  # per topic: read, keyless
    horizons: DataFrame
    latest: DataFrame


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
    kept = materialize(read_table(spark, run, COMPACTION_KEPT))
    derived = gate_topic_facts(spark, LedgerFiles.of(info), inputs, facts, kept, as_of_ms, retain_null_key)
    digest = F.sha2(F.col("key"), 256)
    return GateFrames(
        as_of_ms=as_of_ms,
        retain_null_key=retain_null_key,
        actions=actions,
        kept=kept.withColumnRenamed("keyDigest", "key"),
        dropped=materialize(
            read_table(spark, run, COMPACTION_DROPPED_KEYS).withColumnRenamed("keyDigest", "key")
        ),
        facts=facts,
        inputs=derived.where(F.col("kind") == "input").select(
            "topic", "ledgerId", "entryId", digest.alias("key"), "size", "entryTs"
        ),
        counted=derived.where(F.col("kind") == "counts").select(
            "topic", F.col("entriesRead").alias("read"), "keyless", "expectedRows", "unexpectedRows"
        ),
        horizons=spark.createDataFrame(
            [(i.topic, i.horizon[0], i.horizon[1]) for i in inputs], "topic string, hLedger long, hEntry long"
        ),
        latest=materialize(
            derived.where(F.col("kind") == "latest").select(
                "topic", digest.alias("key"), F.struct("ledgerId", "entryId").alias("latest")
            )
        ),
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
            kept_checks(f.kept, f.inputs, f.latest, f.facts, f.horizons, f.as_of_ms, f.retain_null_key),
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
            topic_checks(f.actions, f.kept, f.dropped, f.counted, f.latest, f.facts, f.retain_null_key),
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
