"""Quality-gate checks for key erasure, re-derived from the snapshot and the files apart from the planner.

- **Which entries**: the gate finds on its own every entry of a live file (the stored raw ledgers and the
  compacted ledger in force the snapshot names) whose key's SHA-256 is the digest of a request in effect at the
  as-of that covers the entry's topic (by its name: the topic, its partitioned topic, its namespace) while no
  hold covers it, and compares with the planned entries both ways: no requested entry is left out (a requested
  key left in a ledger), no other entry is planned (another key's entry changed).
- **The staged files, entry by entry** (the bytes apply installs): the same entries as the ledger's files in
  force, by position; every entry not planned is identical in every column (key, payload, size, properties,
  publish and broker time); every planned one has no key, no payload, size 0 and only the redaction marker; no
  staged entry's key is a covering request's; the staged files' SHA-256 is the one the plan binds.
- **Each rewritten ledger**: its source, files generation, entries and size are the snapshot's; the new
  generation is the next one; the size after is the size before less the planned entries' payload bytes; one
  redact action per rewritten ledger with its counts.
- **Each brought-forward purge**: a pending file of the snapshot no erasure covered yet, holding an entry of a
  covering request's key (read here), of a topic no hold covers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from housekeeping.engine.documents import read_run_info
from housekeeping.engine.gate import CheckFrame, expect, must_be_true
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.erasure.actions import EXPEDITE_PURGE, REDACT_LEDGER, REDACTIONS
from housekeeping.mechanisms.erasure.tables import ERASURE_ENTRIES, ERASURE_LEDGERS
from housekeeping.store.entries import ERASED_PROPERTY, files_sha256
from spark_apps.shared.io import (
    LedgerFiles,
    entry_columns,
    key_digests,
    read_actions,
    read_dirs_of_digests,
    read_snapshot,
    read_table,
)
from spark_apps.shared.session import materialize
from spark_apps.shared.task_files import TopicRows, topic_tasks
from spark_apps.shared.topic_names import topic_name_facts

# What the gate reads of the files in force to find the requested entries.
KEY_COLUMNS = entry_columns("ledgerId", "entryId", "key")


def covering_digests(snapshot: dict, names: DataFrame, as_of_ms: int) -> DataFrame:
    """(topic, keyDigest) for every request in effect and every topic of ``names`` it covers, when no hold of the
    snapshot's raw holds covers the topic."""
    requests = snapshot["erasure_requests"].where(F.col("requestedAtMs") <= F.lit(as_of_ms))
    targets = names.select(
        "topic",
        F.explode(
            F.array(
                F.struct(F.lit("topic").alias("scope"), F.col("topic").alias("target")),
                F.struct(F.lit("topic").alias("scope"), F.col("partitionedTopic").alias("target")),
                F.struct(F.lit("namespace").alias("scope"), F.col("namespace").alias("target")),
            )
        ).alias("t"),
    ).select("topic", "t.scope", "t.target")
    held = (
        names.select("topic", F.explode(F.array("topic", "namespace", "partitionedTopic")).alias("target"))
        .join(snapshot["holds"].select("target"), "target")
        .select("topic")
        .distinct()
    )
    return (
        targets.join(requests, ["scope", "target"])
        .join(held, "topic", "left_anti")
        .select("topic", "keyDigest")
        .distinct()
    )


def _live_files(spark: SparkSession, snapshot: dict, files: LedgerFiles) -> list[tuple[str, int, str, str]]:
    """(topic, ledgerId, source, directory) of every live file of the snapshot that can hold an entry."""
    out = []
    for r in snapshot["ledgers"].where(F.col("entriesStored") & (F.col("entries") > 0)).collect():
        out.append((r["topic"], r["ledgerId"], "raw", str(files.dir(r["topic"], r["ledgerId"]))))
    for r in snapshot["compacted_ledgers"].where(F.col("entries") > 0).collect():
        out.append((r["topic"], r["ledgerId"], "compacted", str(files.dir(r["topic"], r["ledgerId"]))))
    return out


def _read_by_file(
    spark: SparkSession,
    files: list[tuple[str, int, str, str]],
    digests: DataFrame,
    ledger_files: LedgerFiles | None = None,
) -> DataFrame:
    """Entries of the given files whose key's SHA-256 is a digest of ``digests`` (any topic's), each with its
    ``keyDigest``, tagged with its file's topic, ledger and source (``ledgerId`` of the entry itself is its
    position's ledger); with ``ledger_files``, a ledger whose local copy is deleted from the tier."""
    tags = spark.createDataFrame(
        [(f[3], f[0], f[1], f[2]) for f in files],
        "dir string, fileTopic string, fileLedger long, source string",
    )
    dirs = [f[3] for f in files]
    entries = (
        ledger_files.read_dirs_of_digests(spark, dirs, KEY_COLUMNS, digests)
        if ledger_files
        else read_dirs_of_digests(spark, dirs, KEY_COLUMNS, digests)
    )
    return entries.join(F.broadcast(tags), "dir")


def entry_set_checks(expected: DataFrame, planned: DataFrame) -> DataFrame:
    """Both ways: every entry of a requested key is planned, every planned entry has a requested key."""
    key = ["topic", "ledgerId", "source", "entryLedgerId", "entryId"]
    return (
        expected.select(*key, F.lit(True).alias("requested"))
        .join(planned.select(*key).distinct().withColumn("planned", F.lit(True)), key, "full")
        .select(
            *key,
            F.coalesce(F.col("planned"), F.lit(False)).alias("requested_entry_is_planned"),
            F.coalesce(F.col("requested"), F.lit(False)).alias("planned_entry_has_a_requested_key"),
        )
    )


def _snapshot_ledgers(snapshot: dict) -> DataFrame:
    """Every raw and compacted ledger of the snapshot with its entries and size."""
    return (
        snapshot["ledgers"]
        .select("topic", "ledgerId", F.lit("raw").alias("source"), "entries", "size")
        .unionByName(
            snapshot["compacted_ledgers"].select(
                "topic", "ledgerId", F.lit("compacted").alias("source"), "entries", "size"
            )
        )
        .withColumnRenamed("entries", "snapEntries")
        .withColumnRenamed("size", "snapSize")
    )


def _redact_actions(actions: DataFrame) -> DataFrame:
    return actions.where(F.col("action").isin(*REDACTIONS)).select(
        "topic",
        "ledgerId",
        F.when(F.col("action") == REDACT_LEDGER.name, F.lit("raw"))
        .otherwise(F.lit("compacted"))
        .alias("source"),
        F.col("fromGeneration").alias("aFrom"),
        F.col("entriesRedacted").alias("aEntries"),
        F.col("bytes").alias("aBytes"),
        F.lit(True).alias("hasAction"),
    )


def ledger_facts(
    spark: SparkSession,
    run: RunDir,
    snapshot: dict,
    files: LedgerFiles,
    ledgers: DataFrame,
    entry_checks: DataFrame,
    actions: DataFrame,
) -> DataFrame:
    """Per rewritten ledger of the plan: its snapshot facts, its files generation at the snapshot, the SHA-256 of
    its staged files as they are now, its entry checks, and its redact action."""
    generations = spark.createDataFrame(
        [(t, int(lid), int(g)) for (t, lid), g in files.generations.items()] or [("", -1, 0)],
        "topic string, ledgerId long, snapGeneration long",
    )
    hashes = spark.createDataFrame(
        [
            (r["topic"], r["ledgerId"], r["source"], files_sha256(run.staged_ledger(r["staged"])))
            for r in ledgers.select("topic", "ledgerId", "source", "staged").collect()
        ]
        or [("", -1, "", "")],
        "topic string, ledgerId long, source string, actualSha256 string",
    )
    key = ["topic", "ledgerId", "source"]
    return (
        ledgers.join(_snapshot_ledgers(snapshot), key, "left")
        .join(generations, ["topic", "ledgerId"], "left")
        .join(hashes, key, "left")
        .join(entry_checks, key, "left")
        .join(_redact_actions(actions), key, "full")
    )


def ledger_checks(joined: DataFrame) -> DataFrame:
    """Per rewritten ledger, each invariant as a boolean column, from its facts (``ledger_facts``)."""
    generation = F.coalesce(F.col("snapGeneration"), F.lit(0))

    def holds(condition: Column, name: str) -> Column:
        return F.coalesce(condition, F.lit(False)).alias(name)

    return joined.select(
        "topic",
        "ledgerId",
        "source",
        holds(F.col("snapEntries").isNotNull(), "ledger_in_snapshot"),
        holds(F.col("fromGeneration") == generation, "from_generation_is_snapshot's"),
        holds(F.col("toGeneration") == generation + 1, "to_generation_is_next"),
        holds(F.col("entries") == F.col("snapEntries"), "entries_match_snapshot"),
        holds(F.col("sizeBefore") == F.col("snapSize"), "size_matches_snapshot"),
        holds(F.col("stagedEntries") == F.col("snapEntries"), "staged_entry_count_same"),
        *[
            holds(F.col(name), name)
            for name in (
                "same_positions",
                "times_unchanged",
                "other_entries_identical_planned_ones_redacted",
                "no_requested_key_in_new_files",
            )
        ],
        holds(F.col("bytesRedacted") == F.col("redactedBytes"), "bytes_redacted_match"),
        holds(
            F.col("sizeAfter") == F.greatest(F.col("sizeBefore") - F.col("redactedBytes"), F.lit(0)),
            "size_after_is_before_less_redacted",
        ),
        holds(F.col("stagedSha256") == F.col("actualSha256"), "staged_bytes_bound"),
        holds(
            F.col("hasAction")
            & (F.col("aFrom") == F.col("fromGeneration"))
            & (F.col("aEntries") == F.col("entriesRedacted"))
            & (F.col("aBytes") == F.col("bytesRedacted")),
            "one_action_with_its_counts",
        ),
    )


def expedite_checks(
    spark: SparkSession, snapshot: dict, files: LedgerFiles, actions: DataFrame, as_of_ms: int
) -> DataFrame:
    expedite = actions.where(F.col("action") == EXPEDITE_PURGE.name).select("topic", "ledgerId", "pendingId")
    pending = snapshot["pending_files"]
    rows = expedite.join(
        pending.select(
            "pendingId",
            "path",
            "erasedBy",
            F.col("topic").alias("pTopic"),
            F.col("ledgerId").alias("pLedger"),
        ),
        "pendingId",
        "left",
    ).collect()
    readable = [
        (r["pTopic"], r["pLedger"], "pending", str(files.root / r["path"]))
        for r in rows
        if r["path"] is not None and (files.root / r["path"]).is_dir()
    ]
    names = topic_name_facts(spark, [expedite])
    digests = covering_digests(snapshot, names, as_of_ms)
    holding = (
        _read_by_file(spark, readable, digests)
        .select("dir", F.col("fileTopic").alias("topic"), "keyDigest")
        .join(digests, ["topic", "keyDigest"])
        .select("dir")
        .distinct()
        .withColumn("holdsRequestedKey", F.lit(True))
    )
    dirs = spark.createDataFrame(
        [(r["pendingId"], str(files.root / r["path"])) for r in rows if r["path"] is not None] or [(-1, "")],
        "pendingId long, dir string",
    )
    return (
        expedite.join(
            pending.select(
                "pendingId", F.col("topic").alias("pTopic"), F.col("ledgerId").alias("pLedger"), "erasedBy"
            ),
            "pendingId",
            "left",
        )
        .join(dirs, "pendingId", "left")
        .join(holding, "dir", "left")
        .select(
            "topic",
            "pendingId",
            F.coalesce(F.col("pTopic").isNotNull(), F.lit(False)).alias("pending_in_snapshot"),
            F.coalesce(
                (F.col("pTopic") == F.col("topic")) & (F.col("pLedger") == F.col("ledgerId")), F.lit(False)
            ).alias("names_its_file"),
            F.col("erasedBy").isNull().alias("no_erasure_covered_it_yet"),
            F.coalesce(F.col("holdsRequestedKey"), F.lit(False)).alias("holds_a_requested_key"),
        )
    )


def requested_entries(found: DataFrame, digests: DataFrame) -> DataFrame:
    """Every entry of the files in force whose key a request in effect covers: what the plan must redact.
    ``found``: the files' entries of a requested key (:func:`_read_by_file`), of any topic's request."""
    return (
        found.join(digests.withColumnRenamed("topic", "fileTopic"), ["fileTopic", "keyDigest"])
        .select(
            F.col("fileTopic").alias("topic"),
            F.col("fileLedger").alias("ledgerId"),
            "source",
            F.col("ledgerId").alias("entryLedgerId"),
            "entryId",
        )
        .distinct()
    )


# Per rewritten ledger, what its task finds comparing the staged files with the files in force position by position.
STAGED_CHECKS = (
    "topic string, ledgerId bigint, source string, same_positions boolean, times_unchanged boolean, "
    "other_entries_identical_planned_ones_redacted boolean, no_requested_key_in_new_files boolean, "
    "redactedBytes bigint, stagedEntries bigint"
)


# The plan's redacted positions a ledger's task reads, and the row it returns.
_PLANNED_POSITIONS = pa.schema(
    [ERASURE_ENTRIES.arrow_schema().field(n) for n in ("ledgerId", "source", "entryLedgerId", "entryId")]
)
_STAGED_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("ledgerId", pa.int64()),
        ("source", pa.string()),
        *[
            (name, pa.bool_())
            for name in (
                "same_positions",
                "times_unchanged",
                "other_entries_identical_planned_ones_redacted",
                "no_requested_key_in_new_files",
            )
        ],
        ("redactedBytes", pa.int64()),
        ("stagedEntries", pa.int64()),
    ]
)


def _same(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    """Null-safe equality (SQL's ``<=>``): equal values, or both null."""
    return pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))


def _redacted(keys: list, values: pa.ChunkedArray, sizes: pa.ChunkedArray, properties: list) -> pa.Array:
    """Per staged entry: redacted as planned (no key, no payload, size 0, only the erasure marker)."""
    marked = pa.array(
        [
            p is not None and len(p) == 1 and p[0][0] == ERASED_PROPERTY and p[0][1] is not None
            for p in properties
        ]
    )
    no_key = pa.array([k is None for k in keys])
    return pc.and_(
        pc.and_(no_key, pc.is_null(values)), pc.and_(pc.fill_null(pc.equal(sizes, 0), False), marked)
    )


def compare_staged(
    original: pa.Table, staged: pa.Table, redact: set[tuple[int, int]], requested: frozenset[str]
) -> dict | None:
    """One rewritten ledger's staged entries against its files in force, paired by position (ledgerId, entryId) as
    a full outer join pairs them: every position in both, its topic and times unchanged, every entry the plan
    redacts (``redact``: positions) redacted as planned and every other one identical in key, payload, size and
    properties, no staged key a requested one (``requested``: SHA-256 digests), the planned entries' bytes before,
    and how many staged entries. None when neither side has an entry. Pure."""

    def indexed(table: pa.Table, name: str) -> pa.Table:
        rows = pa.array(range(table.num_rows), pa.int64())
        return pa.table({"ledgerId": table["ledgerId"], "entryId": table["entryId"], name: rows})

    pairs = indexed(original, "o").join(
        indexed(staged, "s"), keys=["ledgerId", "entryId"], join_type="full outer", use_threads=False
    )
    if not pairs.num_rows:
        return None

    def o(column: str) -> pa.ChunkedArray:
        return original[column].take(pairs["o"])

    def s(column: str) -> pa.ChunkedArray:
        return staged[column].take(pairs["s"])

    positions = zip(pairs["ledgerId"].to_pylist(), pairs["entryId"].to_pylist(), strict=True)
    planned = pa.array([position in redact for position in positions])
    s_keys, s_properties = s("key").to_pylist(), s("properties").to_pylist()
    same_properties = pa.array(
        [a == b for a, b in zip(o("properties").to_pylist(), s_properties, strict=True)]
    )
    untouched = functools.reduce(
        pc.and_, [_same(o(c), s(c)) for c in ("key", "value", "size")] + [same_properties]
    )
    as_planned = pc.if_else(planned, _redacted(s_keys, s("value"), s("size"), s_properties), untouched)
    unchanged = functools.reduce(
        pc.and_, [_same(o(c), s(c)) for c in ("topic", "publishTime", "brokerTimestamp")]
    )
    redacted_sizes = pc.if_else(planned, pc.fill_null(o("size").cast(pa.int64()), 0), 0)
    return {
        "same_positions": pc.all(pc.and_(pc.is_valid(pairs["o"]), pc.is_valid(pairs["s"]))).as_py(),
        "times_unchanged": pc.all(unchanged).as_py(),
        "other_entries_identical_planned_ones_redacted": pc.all(as_planned).as_py(),
        "no_requested_key_in_new_files": not pc.any(
            pc.is_in(key_digests(s("key")), value_set=pa.array(sorted(requested), pa.string()))
        ).as_py(),
        "redactedBytes": pc.sum(redacted_sizes).as_py() or 0,
        "stagedEntries": pc.sum(pc.is_valid(pairs["s"]).cast(pa.int64())).as_py() or 0,
    }


def _compare_ledgers(
    planned_dir: str, requested: dict[str, frozenset[str]], url: str | None, endpoint_url: str | None
) -> Callable[[Iterator], Iterator]:
    """In a Spark task: each rewritten ledger of its rows (topic, ledgerId, source, its files in force or tier
    object, its staged directory) read whole on both sides and compared (:func:`compare_staged`), the plan's
    entries of the topic read from the plan's part files (:class:`TopicRows`)."""

    def compare(batches: Iterator) -> Iterator:
        from housekeeping.store.entries import ENTRY_SCHEMA, read_ledger
        from housekeeping.store.tier import ObjectTier

        planned = TopicRows(planned_dir, _PLANNED_POSITIONS)
        tier, schema = None, pa.schema([f.with_nullable(True) for f in ENTRY_SCHEMA])
        marks_of: dict[str, pa.Table] = {}  # the task's ledgers come by topic: the current topic's only
        for batch in batches:
            for row in batch.to_pylist():
                if row["topic"] not in marks_of:
                    marks_of = {row["topic"]: planned.of(row["topic"])}
                marks = marks_of[row["topic"]]
                if row["tierObject"] is not None:
                    tier = tier or ObjectTier.of(str(url), endpoint_url)
                    original = tier.read_ledger(row["tierObject"], columns=ENTRY_SCHEMA.names)
                elif row["dir"] is not None:
                    original = read_ledger(Path(row["dir"]))
                else:
                    original = ENTRY_SCHEMA.empty_table()
                mine = marks.filter(
                    pc.and_(
                        pc.equal(marks["ledgerId"], row["ledgerId"]), pc.equal(marks["source"], row["source"])
                    )
                )
                redact = set(zip(mine["entryLedgerId"].to_pylist(), mine["entryId"].to_pylist(), strict=True))
                found = compare_staged(
                    original.cast(schema),
                    read_ledger(Path(row["staged"])).cast(schema),
                    redact,
                    requested.get(row["topic"], frozenset()),
                )
                if found is not None:
                    yield pa.RecordBatch.from_pylist(
                        [
                            {
                                "topic": row["topic"],
                                "ledgerId": row["ledgerId"],
                                "source": row["source"],
                                **found,
                            }
                        ],
                        _STAGED_SCHEMA,
                    )

    return compare


def rewritten_entry_checks(
    spark, run: RunDir, files: LedgerFiles, live: list, ledgers: DataFrame, digests: DataFrame
) -> DataFrame:
    """The staged files of every rewritten ledger read back and compared with the files in force they replace,
    each ledger in one task that reads both (:func:`compare_staged`): no entry crosses a shuffle. ``live``: the
    files in force of the covered topics (:func:`_live_files`)."""
    rewritten = {(r["topic"], r["ledgerId"], r["source"]): r["staged"] for r in ledgers.collect()}
    in_force = {(t, lid, source): directory for t, lid, source, directory in live}
    by_dir = files.tier_ledgers_by_dir()
    tasks = []
    for (topic, ledger_id, source), slot in sorted(rewritten.items()):
        directory = in_force.get((topic, ledger_id, source))  # none: a ledger the covered topics do not have
        tier_object = files.tier_object(*by_dir[directory]) if directory in by_dir else None
        tasks.append((topic, ledger_id, source, directory, tier_object, str(run.staged_ledger(slot))))
    requested: dict[str, set[str]] = {}
    for r in digests.collect():
        requested.setdefault(r["topic"], set()).add(r["keyDigest"])
    if not tasks:
        return spark.createDataFrame([], STAGED_CHECKS)
    frame = spark.createDataFrame(
        tasks, "topic string, ledgerId long, source string, dir string, tierObject string, staged string"
    )
    compare = _compare_ledgers(
        str(run.plan_table(ERASURE_ENTRIES)),
        {topic: frozenset(found) for topic, found in requested.items()},
        files.tier.get("url"),
        files.tier.get("endpoint_url"),
    )
    by_topic = frame.repartition(topic_tasks(frame, len(tasks))).sortWithinPartitions("topic")
    return materialize(by_topic.mapInArrow(compare, STAGED_CHECKS))


LEDGER_CHECKS = (
    "ledger_in_snapshot",
    "from_generation_is_snapshot's",
    "to_generation_is_next",
    "entries_match_snapshot",
    "size_matches_snapshot",
    "staged_entry_count_same",
    "same_positions",
    "times_unchanged",
    "other_entries_identical_planned_ones_redacted",
    "no_requested_key_in_new_files",
    "bytes_redacted_match",
    "size_after_is_before_less_redacted",
    "staged_bytes_bound",
    "one_action_with_its_counts",
)


def checks(spark, run_dir: str | Path, spec: Mechanism) -> list[CheckFrame]:
    run = RunDir(run_dir)
    info = read_run_info(run)
    as_of_ms = int(info.as_of_ms)
    files = LedgerFiles.of(info)
    snapshot = read_snapshot(spark, run)
    actions = materialize(read_actions(spark, run))
    planned = materialize(read_table(spark, run, ERASURE_ENTRIES))
    ledgers = materialize(read_table(spark, run, ERASURE_LEDGERS))
    names = materialize(topic_name_facts(spark, [snapshot["topics"]]))
    digests = materialize(covering_digests(snapshot, names, as_of_ms))
    # The files of the topics a request in effect covers (by the gate's own reading of the requests and holds).
    covered = {r["topic"] for r in digests.select("topic").distinct().collect()}
    live = [f for f in _live_files(spark, snapshot, files) if f[0] in covered]
    found = _read_by_file(spark, live, digests, files)
    entry_checks = rewritten_entry_checks(spark, run, files, live, ledgers, digests)
    return [
        CheckFrame(
            "actions",
            actions.select("topic", "action", "ledgerId", "pendingId"),
            [
                expect("ExpectColumnValuesToBeInSet", column="action", value_set=list(spec.action_names)),
                expect(
                    "ExpectCompoundColumnsToBeUnique",
                    column_list=["topic", "action", "ledgerId", "pendingId"],
                ),
            ],
        ),
        CheckFrame(
            "requested_entries",
            entry_set_checks(requested_entries(found, digests), planned),
            must_be_true("requested_entry_is_planned", "planned_entry_has_a_requested_key"),
        ),
        CheckFrame(
            "rewritten_ledgers",
            ledger_checks(ledger_facts(spark, run, snapshot, files, ledgers, entry_checks, actions)),
            must_be_true(*LEDGER_CHECKS),
        ),
        CheckFrame(
            "expedited_purges",
            expedite_checks(spark, snapshot, files, actions, as_of_ms),
            must_be_true(
                "pending_in_snapshot", "names_its_file", "no_erasure_covered_it_yet", "holds_a_requested_key"
            ),
        ),
    ]
