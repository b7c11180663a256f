"""Quality-gate checks for topic compaction, re-derived from the snapshot and the entry files apart from the
planner (which groups each topic's entries by key in Arrow, takes each key's last entry and decides the winners
with the rule in Spark; the gate sorts each topic's entries by key, newest first, derives the entries that must
survive itself, and checks the plan's kept entries and dropped keys of the topic against its input in the task
that reads it; the actions and the per-topic counts are checked in Spark).

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

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from housekeeping.core.names import COMPACTION_SUBSCRIPTION
from housekeeping.engine.contract import ACTIONS, Table, table
from housekeeping.engine.documents import read_run_info
from housekeeping.engine.gate import CheckFrame, expect, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.compaction.tables import COMPACTION_DROPPED_KEYS, COMPACTION_KEPT
from spark_apps.compaction.entries import (
    DECISION_COLUMNS,
    TOPIC_SOURCES,
    TopicInput,
    TopicWork,
    at_positions,
    map_topic_inputs,
    positions_by_ledger,
    topic_sources,
)
from spark_apps.shared.io import LedgerFiles, key_digests, read_snapshot, read_table
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


# What each kept entry and each dropped key must satisfy (the columns of the check frames GX validates, one
# definition for the task that computes them and the suites).
KEPT_CHECKS = (
    "position_is_unique",
    "entry_is_an_input_entry",
    "entry_matches_its_input",
    "latest_for_its_key",
    "keyed_or_null_keys_retained",
    "within_compacted_retention_time",
    "tombstone_within_grace",
    "at_or_before_horizon",
)
DROPPED_CHECKS = ("dropped_entry_is_the_latest_for_its_key", "dropped_key_not_also_kept", "drop_reason_holds")

# What the gate derives in the task that reads each topic's input (``map_topic_inputs``: the input is grouped by
# topic on disk, so none of this shuffles the entries), one table with a row ``kind`` each: ``kept`` (per kept
# entry of the plan, its checks; only those a check fails for leave the task, ``failing_kept_only``), ``dropped``
# (per dropped key, its checks) and ``counts`` (per topic: entries read, keyless, keys, how many entries must
# survive (``expectedRows``) and how many kept positions are not among them (``unexpectedRows``): equal counts and
# none unexpected make the two sets equal).
TOPIC_FACTS = table(
    "compaction_topic_facts",
    "kind string, topic string, ledgerId bigint, entryId bigint, key string, "
    + ", ".join(f"{name} boolean" for name in (*KEPT_CHECKS, *DROPPED_CHECKS))
    + ", entriesRead bigint, keyless bigint, keys bigint, expectedRows bigint, unexpectedRows bigint, "
    "keptRows bigint, keptBytes bigint, keptKeys bigint, droppedKeys bigint",
)
# The plan's rows a topic's task checks (keys as the plan names them: their SHA-256, ``key_digests``).
KEPT_ROW = table(
    "compaction_gate_kept_row", "ledgerId bigint, entryId bigint, key string, size int, entryTs bigint"
)
DROPPED_ROW = table(
    "compaction_gate_dropped_row",
    "key string, ledgerId bigint, entryId bigint, size int, entryTs bigint, reason string",
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


def input_at_positions(entries: pa.Table, latest: pa.Table) -> pa.Table:
    """The input ``entries`` at the plan's positions as :func:`at_input` joins them: inKey (the key's digest),
    inSize, inTs, inNewest (the entry is its key's newest in ``latest``, :func:`newest_per_key`) and inInput."""
    import pyarrow as pa
    import pyarrow.compute as pc

    newest = latest.select(["key", "ledgerId", "entryId"]).rename_columns(
        ["key", "newestLedger", "newestEntry"]
    )
    entries = entries.join(newest, keys="key", join_type="left outer")
    return pa.table(
        {
            "ledgerId": entries["ledgerId"],
            "entryId": entries["entryId"],
            "inKey": key_digests(entries["key"]),
            "inSize": entries["size"],
            "inTs": entries["entryTs"],
            "inNewest": _false_if_null(
                pc.and_(
                    pc.equal(entries["newestLedger"], entries["ledgerId"]),
                    pc.equal(entries["newestEntry"], entries["entryId"]),
                )
            ),
            "inInput": pa.array([True] * entries.num_rows, pa.bool_()),
        }
    )


def at_input(rows: pa.Table, input_at: pa.Table) -> pa.Table:
    """``rows`` (a plan's rows with ``ledgerId`` and ``entryId``) joined with the input entry at their position
    (:func:`input_at_positions`), its columns null where there is none."""
    return rows.join(input_at, keys=["ledgerId", "entryId"], join_type="left outer")


def with_position_rows(rows: pa.Table) -> pa.Table:
    """``rows`` with ``positionRows``: how many of them are at the same position (null for a null position).
    The plan's kept rows of a topic are all in its task, so this is the position's uniqueness in the plan: a
    boolean GX checks, instead of GX's compound-uniqueness check, which on Spark is a shuffle of every kept entry."""
    counts = rows.group_by(["ledgerId", "entryId"]).aggregate([([], "count_all")])
    return rows.join(
        counts.rename_columns(["ledgerId", "entryId", "positionRows"]),
        keys=["ledgerId", "entryId"],
        join_type="left outer",
    )


def _false_if_null(values):
    import pyarrow.compute as pc

    return pc.fill_null(values, False)


def _equal_null_safe(left, right):
    import pyarrow.compute as pc

    return pc.if_else(
        pc.and_(pc.is_null(left), pc.is_null(right)), True, _false_if_null(pc.equal(left, right))
    )


def kept_checks(kept: pa.Table, params: dict, as_of_ms: int, retain_null_key: bool) -> dict[str, pa.Array]:
    """:data:`KEPT_CHECKS` of each kept row (:data:`KEPT_ROW`, joined by :func:`at_input`) of one topic. Pure.
    ``params``: the topic's compactedRetentionTimeMs, tombstoneGraceMs and horizonLedger/horizonEntry (None when
    the snapshot has none: the check fails). An entry is the latest of its key (by digest) exactly when the input
    entry at its position has that digest and is the newest of its own key."""
    import pyarrow as pa
    import pyarrow.compute as pc

    key, size, ledger, entry = kept["key"], kept["size"], kept["ledgerId"], kept["entryId"]
    time_ms, grace_ms = (
        pa.scalar(params[n], pa.int64()) for n in ("compactedRetentionTimeMs", "tombstoneGraceMs")
    )
    horizon_ledger, horizon_entry = (
        pa.scalar(params[n], pa.int64()) for n in ("horizonLedger", "horizonEntry")
    )
    age = pc.subtract(pa.scalar(as_of_ms, pa.int64()), kept["inTs"])
    return {
        "position_is_unique": _false_if_null(pc.equal(kept["positionRows"], 1)),
        "entry_is_an_input_entry": pc.is_valid(kept["inInput"]),
        "entry_matches_its_input": _false_if_null(
            pc.and_kleene(
                pc.and_kleene(_equal_null_safe(key, kept["inKey"]), pc.equal(size, kept["inSize"])),
                pc.equal(kept["entryTs"], kept["inTs"]),
            )
        ),
        "latest_for_its_key": _false_if_null(
            pc.or_kleene(pc.is_null(key), pc.and_kleene(pc.equal(kept["inKey"], key), kept["inNewest"]))
        ),
        "keyed_or_null_keys_retained": pc.or_(pc.is_valid(key), pa.scalar(retain_null_key)),
        "within_compacted_retention_time": _false_if_null(
            pc.or_kleene(pc.less(time_ms, 0), pc.less_equal(age, time_ms))
        ),
        "tombstone_within_grace": _false_if_null(
            pc.or_kleene(
                pc.or_kleene(pc.is_null(key), pc.not_equal(size, 0)),
                pc.and_kleene(pc.greater(grace_ms, 0), pc.less_equal(age, grace_ms)),
            )
        ),
        # A position with a null id is never at or before the horizon (it is no input entry either).
        "at_or_before_horizon": _false_if_null(
            pc.or_kleene(
                pc.less(ledger, horizon_ledger),
                pc.and_kleene(pc.equal(ledger, horizon_ledger), pc.less_equal(entry, horizon_entry)),
            )
        ),
    }


def dropped_checks(
    dropped: pa.Table, kept_keys: pa.Array, params: dict, as_of_ms: int
) -> dict[str, pa.Array]:
    """:data:`DROPPED_CHECKS` of each dropped row (:data:`DROPPED_ROW`, joined by :func:`at_input`) of one topic.
    Pure. ``kept_keys``: the digests of the topic's kept keyed entries. A drop's reason is checked against the
    row's own size and time; that the kept entries are exactly those that must survive is the topic's check."""
    import pyarrow as pa
    import pyarrow.compute as pc

    time_ms, grace_ms = (
        pa.scalar(params[n], pa.int64()) for n in ("compactedRetentionTimeMs", "tombstoneGraceMs")
    )
    key, reason = dropped["key"], dropped["reason"]
    age = pc.subtract(pa.scalar(as_of_ms, pa.int64()), dropped["entryTs"])
    tombstoned = pc.and_kleene(
        pc.equal(dropped["size"], 0), pc.or_kleene(pc.less_equal(grace_ms, 0), pc.greater(age, grace_ms))
    )
    expired_time = pc.and_kleene(pc.greater_equal(time_ms, 0), pc.greater(age, time_ms))

    def reason_is(name: str):
        return _false_if_null(pc.equal(reason, name))

    # Size expiry is checked per topic (the kept entries already fill the limit: no_entry_missing_or_extra).
    holds = pc.if_else(
        reason_is("tombstoned"),
        tombstoned,
        pc.if_else(reason_is("expired_time"), expired_time, reason_is("expired_size")),
    )
    return {
        "dropped_entry_is_the_latest_for_its_key": _false_if_null(
            pc.and_kleene(pc.equal(dropped["inKey"], key), dropped["inNewest"])
        ),
        "dropped_key_not_also_kept": pc.invert(pc.is_in(key, value_set=kept_keys)),
        "drop_reason_holds": _false_if_null(holds),
    }


def _plan_rows(rows: pa.Table | None, spec) -> pa.Table:
    return spec.arrow_schema().empty_table() if rows is None else rows.select(spec.arrow_schema().names)


def topic_facts(source: dict, parts: Iterable[pa.Table], as_of_ms: int, retain_null_key: bool) -> pa.Table:
    """:data:`TOPIC_FACTS` of one topic, its input read a part (file) at a time: memory follows its keys and the
    plan's rows of the topic, not its input. ``source``: the topic's sources row with its compacted-retention
    params, its horizon, and the plan's ``kept`` (:data:`KEPT_ROW`) and ``dropped`` (:data:`DROPPED_ROW`) rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kept = _plan_rows(source.get("kept"), KEPT_ROW)
    dropped = _plan_rows(source.get("dropped"), DROPPED_ROW)
    wanted = positions_by_ledger(
        pa.concat_tables([kept.select(["ledgerId", "entryId"]), dropped.select(["ledgerId", "entryId"])])
    )
    schema = pa.schema([KEPT_ROW.arrow_schema().field(name) for name in _FACT_COLUMNS])  # typed as the plan's
    latest, keyless, at_plan_rows = schema.empty_table(), [], []
    read = keyless_count = 0
    for part in parts:
        rows = part.select(_FACT_COLUMNS).cast(schema)
        read += rows.num_rows
        keyed = pc.is_valid(rows["key"])
        keyless_rows = rows.filter(pc.invert(keyed))
        keyless_count += keyless_rows.num_rows
        if retain_null_key:
            keyless.append(keyless_rows)
        at_plan_rows.append(rows.filter(at_positions(rows, wanted)))
        latest = newest_per_key(pa.concat_tables([latest, rows.filter(keyed)]))
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
    unexpected = sum(
        position not in expected_at
        for position in zip(kept["ledgerId"].to_pylist(), kept["entryId"].to_pylist(), strict=True)
    )
    input_at = input_at_positions(pa.concat_tables([schema.empty_table(), *at_plan_rows]), latest)
    kept_at, dropped_at = with_position_rows(at_input(kept, input_at)), at_input(dropped, input_at)
    kept_keys = pc.drop_null(kept["key"]).combine_chunks() if kept.num_rows else pa.array([], pa.string())
    topic = source["topic"]
    counts = pa.table(
        {
            "entriesRead": [read],
            "keyless": [keyless_count],
            "keys": [latest.num_rows],
            "expectedRows": [expected.num_rows],
            "unexpectedRows": [unexpected],
            "keptRows": [kept.num_rows],
            "keptBytes": [pc.sum(kept["size"].cast(pa.int64())).as_py() or 0],
            "keptKeys": [kept.num_rows - kept["key"].null_count],
            "droppedKeys": [dropped.num_rows],
        }
    )
    return pa.concat_tables(
        [
            _facts(
                "kept",
                topic,
                kept_at.select(["ledgerId", "entryId"]),
                kept_checks(kept_at, source, as_of_ms, retain_null_key),
            ),
            _facts(
                "dropped",
                topic,
                dropped_at.select(["key"]),
                dropped_checks(dropped_at, kept_keys, source, as_of_ms),
            ),
            _facts("counts", topic, counts),
        ]
    )


def _facts(
    kind: str, topic: str | None, rows: pa.Table, checks: dict[str, pa.Array] | None = None
) -> pa.Table:
    """``rows`` and ``checks`` as :data:`TOPIC_FACTS` rows (the columns they lack null)."""
    import pyarrow as pa

    given = {name: rows[name] for name in rows.column_names} | (checks or {})
    columns = {
        "kind": pa.array([kind] * rows.num_rows, pa.string()),
        "topic": pa.array([topic] * rows.num_rows, pa.string()),
    }
    for field in list(TOPIC_FACTS.arrow_schema())[2:]:
        columns[field.name] = (
            given[field.name].cast(field.type) if field.name in given else pa.nulls(rows.num_rows, field.type)
        )
    return pa.table(columns)


def failing_kept_only(facts: pa.Table) -> pa.Table:
    """:data:`TOPIC_FACTS` rows without the ``kept`` rows whose every check holds: a kept entry's row leaves its
    task only when a check is false or null (what ``must_be_true`` can count), so millions of kept entries are
    counted in their topic's ``counts`` row (``keptRows``), not shipped. Pure."""
    import pyarrow.compute as pc

    every_check_holds = functools.reduce(pc.and_, [pc.fill_null(facts[name], False) for name in KEPT_CHECKS])
    return facts.filter(pc.or_(pc.not_equal(facts["kind"], "kept"), pc.invert(every_check_holds)))


def gate_topic_facts(
    spark,
    run: RunDir,
    files: LedgerFiles,
    inputs: list[TopicInput],
    facts: DataFrame,
    as_of_ms: int,
    retain_null_key: bool,
) -> DataFrame:
    """:data:`TOPIC_FACTS` of every topic the gate reads and of every topic the plan keeps or drops entries of
    (one the gate does not read, or a null topic, is checked against no input and no params, and fails),
    materialized once. Each topic's task reads the plan's kept and dropped rows of the topic from the plan's part
    files itself (:class:`~spark_apps.shared.task_files.TopicRows`), so they are not shuffled to it."""
    params = facts.select(
        "topic", "compactedRetentionTimeMs", "compactedRetentionSizeBytes", "tombstoneGraceMs"
    )
    read = topic_sources(spark, files, inputs)
    unread = [(topic, *[None] * (len(read.columns) - 1)) for topic in _unread_plan_topics(spark, run, read)]
    sources = read.unionByName(spark.createDataFrame(unread, TOPIC_SOURCES)) if unread else read
    plan_rows = {
        kind: (str(run.plan_table(written)), _plan_schema(written, schema.names))
        for kind, written, schema in (
            ("kept", COMPACTION_KEPT, KEPT_ROW),
            ("dropped", COMPACTION_DROPPED_KEYS, DROPPED_ROW),
        )
    }

    def per_topic(work: TopicWork) -> pa.Table:
        rows = {kind: table.rename_columns(_AS_KEY) for kind, table in work.rows.items()}
        facts = topic_facts(work.source | rows, work.entries, as_of_ms, retain_null_key)
        return failing_kept_only(facts)

    return materialize(
        map_topic_inputs(
            sources.join(params, "topic", "left"),
            len(inputs) + len(unread),
            files.tier,
            DECISION_COLUMNS.fieldNames(),
            per_topic,
            TOPIC_FACTS.ddl(),
            rows=plan_rows,
        )
    )


# The plan names a key by its SHA-256 (keyDigest); the gate's rows call it ``key``.
_AS_KEY = {"keyDigest": "key"}


def _plan_schema(written: Table, names: Iterable[str]) -> pa.Schema:
    """The Arrow schema of ``names`` (the gate's own names: ``key`` for the plan's ``keyDigest``) in the plan
    table ``written``, as the plan names them."""
    import pyarrow as pa

    file_names = {v: k for k, v in _AS_KEY.items()}
    schema = written.arrow_schema()
    return pa.schema([schema.field(file_names.get(name, name)) for name in names])


def _unread_plan_topics(spark, run: RunDir, read: DataFrame) -> list[str | None]:
    """Topics the plan keeps or drops entries of that the gate reads no input of (a null topic among them)."""
    planned = (
        read_table(spark, run, COMPACTION_KEPT)
        .select("topic")
        .unionByName(read_table(spark, run, COMPACTION_DROPPED_KEYS).select("topic"))
        .distinct()
    )
    return sorted(
        (r["topic"] for r in planned.join(read.select("topic"), "topic", "left_anti").collect()),
        key=lambda topic: (topic is not None, topic or ""),
    )


def topic_checks(
    actions: DataFrame, counted: DataFrame, facts: DataFrame, retain_null_key: bool
) -> DataFrame:
    """``counted``: per topic the entries its input holds (``read``), the keyless ones (``keyless``), its keys
    (``keys``), how many must survive (``expectedRows``), how many kept positions are not among those
    (``unexpectedRows``), and the plan's kept rows, their bytes and keys and its dropped keys (``keptRows``,
    ``keptBytes``, ``keptKeys``, ``droppedKeys``)."""
    zero = F.lit(0)
    frame = actions.join(counted, "topic", "left").join(
        facts.select("topic", "compactedRetentionSizeBytes"), "topic", "left"
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


@dataclass(frozen=True)
class GateFrames:
    """What the compaction gate reads, once: the plan's tables, the snapshot's facts, and what it derives itself
    from the input entries it reads again (``gate_topic_facts``; keys as their SHA-256 throughout, as the plan
    names them)."""

    actions: DataFrame
    facts: DataFrame
    kept_checked: DataFrame  # per kept entry a check fails for: KEPT_CHECKS
    kept_rows: int  # the plan's kept entries checked (the rows kept_checked stands for)
    dropped_checked: DataFrame  # per dropped key: DROPPED_CHECKS
    counted: DataFrame  # per topic: its input's counts and the plan's (topic_checks)
    retain_null_key: bool


def read_frames(spark, run_dir: str | Path) -> GateFrames:
    run = RunDir(run_dir)
    info = read_run_info(run)
    as_of_ms = int(info.as_of_ms)
    retain_null_key = bool(info.broker["topicCompactionRetainNullKey"])
    snapshot = read_snapshot(spark, run)
    actions = materialize(read_table(spark, run, ACTIONS))
    facts = materialize(snapshot_facts(snapshot, list(info.option("compactTopics", []))))
    topics = [r["topic"] for r in actions.select("topic").distinct().collect()]
    inputs = gate_inputs(facts, snapshot["ledgers"], topics)
    derived = gate_topic_facts(spark, run, LedgerFiles.of(info), inputs, facts, as_of_ms, retain_null_key)
    return GateFrames(
        actions=actions,
        facts=facts,
        kept_checked=derived.where(F.col("kind") == "kept").select(
            "topic", "ledgerId", "entryId", *KEPT_CHECKS
        ),
        kept_rows=int(derived.where(F.col("kind") == "counts").agg(F.sum("keptRows")).first()[0] or 0),
        dropped_checked=derived.where(F.col("kind") == "dropped").select("topic", "key", *DROPPED_CHECKS),
        counted=derived.where(F.col("kind") == "counts").select(
            "topic",
            F.col("entriesRead").alias("read"),
            "keyless",
            "keys",
            "expectedRows",
            "unexpectedRows",
            "keptRows",
            "keptBytes",
            "keptKeys",
            "droppedKeys",
        ),
        retain_null_key=retain_null_key,
    )


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    f = read_frames(spark, run_dir)
    return [
        CheckFrame(
            "actions",
            action_checks(f.actions, f.facts, spec.action_names),
            [
                expect("ExpectColumnValuesToBeUnique", column="topic"),
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
        # The kept entries a check fails for (the tasks count the rest, millions in a large compaction): Great
        # Expectations' counts are restated for every kept entry.
        CheckFrame(
            "kept_entries",
            f.kept_checked,
            must_be_true(*KEPT_CHECKS),
            rows=f.kept_rows,
        ),
        CheckFrame(
            "topics",
            topic_checks(f.actions, f.counted, f.facts, f.retain_null_key),
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
            f.dropped_checked,
            [
                expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "key"]),
                *must_be_true(*DROPPED_CHECKS),
            ],
        ),
    ]
