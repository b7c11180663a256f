"""Spark app: plan key erasure (no Pulsar counterpart: apache/pulsar#5059 asks for it; docs/semantics.md §8).

A request ("forget the key whose SHA-256 is D in topic T / namespace NS") counts once its ``requestedAtMs`` is at
or before the run's as-of. It covers a topic when it names the topic, the topic's partitioned topic or its
namespace. For every covered topic that no hold covers, the planner reads the key column of every file the
topic has in the store, each as the metadata names it: its stored raw ledgers, its compacted ledger in force,
and its files waiting for purge (``pending_files``; a deleted topic's too). An entry matches when the SHA-256 of
its key is a covering request's digest: the key itself is nowhere in the run.

Writes:

- ``plan/erasure/entries``  every matching entry of a live ledger (positions, size, request; no key, no payload)
- ``staged/ledger-<n>/``    each live ledger holding a match, written anew: the matching entries redacted (key
                            and payload gone, size 0, properties only the marker ``housekeeping.erased`` = the
                            requests' ids), every other entry and every entry id and timestamp as they were
- ``plan/erasure/ledgers``  per rewritten ledger: the files generation it replaces and the new one, counts and
                            sizes before and after, the staged directory and the SHA-256 of its bytes (apply
                            installs only those bytes)
- ``plan/actions``          ``redact_ledger`` (raw) and ``redact_compacted`` per rewritten ledger;
                            ``expedite_purge`` per file waiting for purge that holds a match (its purge comes
                            forward to the erasure grace period and it can no longer be restored)
- ``plan/decisions``        per request and covered topic: erase, held (with the hold), nothing found; per request
                            not yet in effect or covering no topic of the run: wait
- ``plan/summary.json``
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from housekeeping.engine.contract import ACTIONS, BLOCKERS
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.erasure.actions import EXPEDITE_PURGE, REDACT_COMPACTED, REDACT_LEDGER
from housekeeping.mechanisms.erasure.tables import ERASURE_DECISIONS, ERASURE_ENTRIES, ERASURE_LEDGERS
from housekeeping.store.entries import ENTRY_SCHEMA, ERASED_PROPERTY, files_sha256
from housekeeping.store.fs import remove_tree
from spark_apps.shared.io import (
    LedgerFiles,
    action_rows,
    entry_columns,
    read_snapshot,
    schema,
    write_table,
)
from spark_apps.shared.plan_app import PlanApp
from spark_apps.shared.session import materialize, run_scoped_cache
from spark_apps.shared.topic_names import topic_name_facts

KEY_COLUMNS = entry_columns("ledgerId", "entryId", "key", "size")
FILES_SCHEMA = (
    "dir string, topic string, ledgerId long, source string, generation long, ledgerEntries long, "
    "ledgerSize long, pendingId long"
)


def covering(requests: DataFrame, names: DataFrame) -> DataFrame:
    """(request, topic) for every topic of ``names`` (topic, namespace, partitionedTopic) a request covers: it
    names the topic, its partitioned topic, or its namespace."""
    by_topic = (F.col("scope") == "topic") & (
        (F.col("target") == F.col("topic")) | (F.col("target") == F.col("partitionedTopic"))
    )
    by_namespace = (F.col("scope") == "namespace") & (F.col("target") == F.col("namespace"))
    return requests.join(names, by_topic | by_namespace)


def effective(requests: DataFrame, as_of_ms: int) -> DataFrame:
    return requests.where(F.col("requestedAtMs") <= F.lit(as_of_ms))


def held_by(spark: SparkSession, holds: DataFrame, names: DataFrame) -> DataFrame:
    """(topic, heldBy) for every topic of ``names``; heldBy names the hold covering the topic (the topic, its
    partitioned topic or its namespace), null when none does."""
    from housekeeping.store.holds import Hold, describe

    described = spark.createDataFrame(
        [
            (
                r["target"],
                describe(Hold(r["target"], r["scope"], r["reason"], r["createdBy"], r["createdAtMs"])),
            )
            for r in holds.collect()
        ],
        "target string, heldBy string",
    )
    targets = F.array(F.col("topic"), F.col("namespace"), F.col("partitionedTopic"))
    covered = (
        names.select("topic", F.explode(targets).alias("target"))
        .join(described, "target")
        .groupBy("topic")
        .agg(F.min("heldBy").alias("heldBy"))
    )
    return names.select("topic").join(covered, "topic", "left")


def candidate_files(spark: SparkSession, snapshot: dict, files: LedgerFiles) -> DataFrame:
    """Every file of the snapshot's topics that can hold an entry: stored raw ledgers with entries, the compacted
    ledger in force, files waiting for purge that no erasure has covered yet (directories resolved on the driver:
    one short row per ledger)."""
    rows = []
    for r in snapshot["ledgers"].where(F.col("entriesStored") & (F.col("entries") > 0)).collect():
        rows.append(
            (
                str(files.dir(r["topic"], r["ledgerId"])),
                r["topic"],
                r["ledgerId"],
                "raw",
                files.generation(r["topic"], r["ledgerId"]),
                r["entries"],
                r["size"],
                None,
            )
        )
    for r in snapshot["compacted_ledgers"].where(F.col("entries") > 0).collect():
        rows.append(
            (
                str(files.dir(r["topic"], r["ledgerId"])),
                r["topic"],
                r["ledgerId"],
                "compacted",
                files.generation(r["topic"], r["ledgerId"]),
                r["entries"],
                r["size"],
                None,
            )
        )
    for r in snapshot["pending_files"].where(F.col("erasedBy").isNull()).collect():
        directory = files.root / r["path"]
        if directory.is_dir() and any(directory.glob("*.parquet")):
            rows.append(
                (str(directory), r["topic"], r["ledgerId"], "pending", None, None, r["size"], r["pendingId"])
            )
    return spark.createDataFrame(rows, FILES_SCHEMA)


def read_files(
    spark: SparkSession, candidates: DataFrame, columns: T.StructType, files: LedgerFiles, requests: DataFrame
) -> DataFrame:
    """The entries of the candidate files (``columns``) whose key's SHA-256 is the digest of one of ``requests``
    (any topic's), each with its ``keyDigest`` and its file's facts (joined on its directory): ``ledgerId`` is the
    file's ledger, ``entryLedgerId``:``entryId`` the entry's position (in a compacted ledger, the raw ledger it was
    written to). A ledger whose local copy is deleted is read from the object tier."""
    dirs = [r["dir"] for r in candidates.select("dir").collect()]
    entries = files.read_dirs_of_digests(spark, dirs, columns, requests)
    entries = entries.withColumnRenamed("ledgerId", "entryLedgerId")
    if "topic" in entries.columns:
        entries = entries.drop("topic")  # the file's topic: the candidate's
    return entries.join(F.broadcast(candidates), "dir")


def matches(keys: DataFrame, requests: DataFrame) -> DataFrame:
    """Entries (with ``keyDigest``) whose key's SHA-256 is the digest of a request covering their topic."""
    return keys.join(requests.select("topic", "keyDigest", "requestId"), ["topic", "keyDigest"]).select(
        "topic", "ledgerId", "source", "pendingId", "entryLedgerId", "entryId", "requestId", "size"
    )


def request_marks(redacted: DataFrame) -> DataFrame:
    """Per rewritten ledger (topic, ledgerId, source): its redacted positions, each with the marker value naming the
    requests it answers ("3" or "3,7", the ids sorted as text): the same requests give the same bytes, whichever run
    writes them."""
    position = ["topic", "ledgerId", "source", "entryLedgerId", "entryId"]
    return (
        redacted.groupBy(*position)
        .agg(
            F.array_join(F.array_sort(F.collect_set(F.col("requestId").cast("string"))), ",").alias(
                "requests"
            )
        )
        .groupBy("topic", "ledgerId", "source")
        .agg(F.collect_list(F.struct("entryLedgerId", "entryId", "requests")).alias("marks"))
    )


def redact_entries(entries: pa.Table, topic: str, marks: list[dict]) -> pa.Table:
    """A ledger's entries (``ENTRY_SCHEMA``) with the marked positions (``request_marks``) redacted: no key, no
    payload, size 0, the marker as the only property; every other entry untouched in every column; sorted by
    position (``ledgerId`` of each entry, then ``entryId``). ``topic``: the ledger's, as the metadata names it."""
    import pyarrow.compute as pc

    requests = pa.nulls(entries.num_rows, pa.string())
    by_ledger: dict[int, list[dict]] = {}
    for mark in marks:
        by_ledger.setdefault(int(mark["entryLedgerId"]), []).append(mark)
    for ledger_id, ledger_marks in by_ledger.items():
        # Exact for any ids: positions matched by ledger, then by entry id within it.
        at = pc.index_in(
            entries["entryId"], value_set=pa.array([int(m["entryId"]) for m in ledger_marks], pa.int64())
        )
        found = pc.take(pa.array([m["requests"] for m in ledger_marks], pa.string()), at)
        requests = pc.if_else(pc.equal(entries["ledgerId"], ledger_id), found, requests)
    if isinstance(requests, pa.ChunkedArray):  # as the entries' columns are once matched
        requests = requests.combine_chunks()
    gone = pc.is_valid(requests)
    rows = entries.num_rows
    marker = pa.MapArray.from_arrays(
        pa.array(range(rows + 1), pa.int32()), pa.array([ERASED_PROPERTY] * rows, pa.string()), requests
    )
    columns = {
        "topic": pa.array([topic] * rows, pa.string()),
        "ledgerId": entries["ledgerId"],
        "entryId": entries["entryId"],
        "publishTime": entries["publishTime"],
        "brokerTimestamp": entries["brokerTimestamp"],
        "key": pc.if_else(gone, pa.scalar(None, pa.string()), entries["key"]),
        "value": pc.if_else(gone, pa.scalar(None, pa.binary()), entries["value"]),
        "size": pc.if_else(gone, pa.scalar(0, pa.int32()), entries["size"]),
        "properties": pc.if_else(gone, marker, entries["properties"]),
    }
    table = pa.table(columns).cast(ENTRY_SCHEMA)
    return table.sort_by([("ledgerId", "ascending"), ("entryId", "ascending")])


STAGED_LEDGERS = "slot int, entries long"


def _stage_ledgers(url: str | None, endpoint_url: str | None) -> Callable[[Iterator], Iterator]:
    """In a Spark task: each ledger of its rows read from its files in force (or its tier object), redacted
    (``redact_entries``) and written as its staged directory (``write_ledger``: one Parquet file, whole or not at
    all)."""

    def stage(batches: Iterator) -> Iterator:
        from housekeeping.store.entries import read_ledger, write_ledger
        from housekeeping.store.tier import ObjectTier

        tier = None
        for batch in batches:
            for row in batch.to_pylist():
                if row["tierObject"] is not None:
                    tier = tier or ObjectTier.of(str(url), endpoint_url)
                    entries = tier.read_ledger(row["tierObject"], columns=ENTRY_SCHEMA.names)
                else:
                    entries = read_ledger(Path(row["dir"]))
                staged = redact_entries(entries, row["topic"], row["marks"] or [])
                write_ledger(Path(row["staged"]), staged)
                yield pa.RecordBatch.from_pydict(
                    {"slot": [row["slot"]], "entries": [staged.num_rows]},
                    pa.schema([("slot", pa.int32()), ("entries", pa.int64())]),
                )

    return stage


def staged_name(slot: int) -> str:
    return f"ledger-{slot}"


def _write_staged(spark, run: RunDir, live: DataFrame, ledgers: list, files: LedgerFiles) -> None:
    """Write each rewritten ledger into ``staged/ledger-<slot>`` in the Spark task that reads it: its entries never
    cross a shuffle (a ledger is read, redacted and written by one task; only the marks travel). A task holds one
    ledger at a time, its entries and their redacted copy, as offload and the tier reads hold one ledger."""
    staged = run.staged_ledgers_dir
    if staged.exists():
        remove_tree(staged, within=run.path)  # a re-plan writes its own
    if not ledgers:
        return
    staged.mkdir(parents=True)
    by_dir = files.tier_ledgers_by_dir()
    tasks = spark.createDataFrame(
        [
            (
                r["topic"],
                r["ledgerId"],
                r["source"],
                r["slot"],
                r["dir"],
                files.tier_object(*by_dir[r["dir"]]) if r["dir"] in by_dir else None,
                str(run.staged_ledger(staged_name(r["slot"]))),
            )
            for r in ledgers
        ],
        "topic string, ledgerId long, source string, slot int, dir string, tierObject string, staged string",
    ).join(request_marks(live), ["topic", "ledgerId", "source"], "left")
    written = (
        tasks.repartition(max(1, min(len(ledgers), 64)))
        .mapInArrow(_stage_ledgers(files.tier.get("url"), files.tier.get("endpoint_url")), STAGED_LEDGERS)
        .collect()
    )
    missing = {r["slot"] for r in ledgers} - {r["slot"] for r in written}
    if missing:
        raise RuntimeError(f"erasure plan: staged ledgers {sorted(missing)} were not written")


@dataclass(frozen=True)
class Found:
    """What a run finds: the candidate files, the requests in effect over their topics (with any hold), and the
    entries of the acting requests' keys in those files."""

    candidates: DataFrame
    covered: DataFrame
    found: DataFrame


def find_requested_entries(spark, snapshot: dict[str, DataFrame], files: LedgerFiles, as_of_ms: int) -> Found:
    in_effect = materialize(effective(snapshot["erasure_requests"], as_of_ms))
    candidates = materialize(candidate_files(spark, snapshot, files))
    names = materialize(topic_name_facts(spark, [candidates, snapshot["topics"]]))
    holds = materialize(held_by(spark, snapshot["holds"], names))
    covered = materialize(covering(in_effect, names).join(holds, "topic", "left"))
    acting = covered.where(F.col("heldBy").isNull())
    # Only the files of topics a request in effect covers are read (none on a day without requests).
    to_read = candidates.join(acting.select("topic").distinct(), "topic", "left_semi")
    keys = read_files(spark, to_read, KEY_COLUMNS, files, acting)
    return Found(candidates, covered, materialize(matches(keys, acting)))


def ledger_rewrites(live: DataFrame, candidates: DataFrame) -> list[dict]:
    """Per ledger in force holding a requested key: its entries and bytes redacted, its tombstones redacted (a
    redacted tombstone, payload size 0 with a key, is one no more: compacted ledgers count them), the requests,
    its file facts, and the slot its staged files are written to."""
    ledger_key = ["topic", "ledgerId", "source"]
    per_ledger = (
        live.select("topic", "ledgerId", "source", "entryLedgerId", "entryId", "size")
        .distinct()
        .groupBy(*ledger_key)
        .agg(
            F.count("*").alias("entriesRedacted"),
            F.sum("size").cast("long").alias("bytesRedacted"),
            F.sum((F.col("size") == 0).cast("long")).alias("tombstonesRedacted"),
        )
        .join(
            live.groupBy(*ledger_key).agg(F.array_sort(F.collect_set("requestId")).alias("requestIds")),
            ledger_key,
        )
        .join(candidates.where(F.col("source") != "pending"), ledger_key)
    )
    rows = sorted(per_ledger.collect(), key=lambda r: (r["topic"], r["ledgerId"], r["source"]))
    return [dict(r.asDict(), slot=index) for index, r in enumerate(rows)]


def ledger_table_rows(run: RunDir, ledgers: list[dict]) -> list[dict]:
    """The erasure/ledgers rows: each rewrite's generations, counts and the SHA-256 of its staged files."""
    return [
        {
            "topic": r["topic"],
            "ledgerId": r["ledgerId"],
            "source": r["source"],
            "fromGeneration": r["generation"],
            "toGeneration": r["generation"] + 1,
            "entries": r["ledgerEntries"],
            "sizeBefore": r["ledgerSize"],
            "sizeAfter": max(0, r["ledgerSize"] - r["bytesRedacted"]),
            "entriesRedacted": r["entriesRedacted"],
            "bytesRedacted": r["bytesRedacted"],
            "tombstonesRedacted": r["tombstonesRedacted"],
            "requestIds": list(r["requestIds"]),
            "staged": staged_name(r["slot"]),
            "stagedSha256": files_sha256(run.staged_ledger(staged_name(r["slot"]))),
        }
        for r in ledgers
    ]


def pending_redactions(found: DataFrame) -> DataFrame:
    """Files waiting for purge that hold a requested key: their purge is brought forward."""
    return (
        found.where(F.col("source") == "pending")
        .groupBy("topic", "ledgerId", "pendingId")
        .agg(
            F.countDistinct("entryLedgerId", "entryId").alias("entriesRedacted"),
            F.array_sort(F.collect_set("requestId")).alias("requestIds"),
        )
    )


def execute(spark, run_: RunDir, info: RunInfo) -> dict[str, Any]:
    """Find every requested key's entries; stage the rewritten ledgers; write the plan tables; the summary's
    figures."""
    as_of_ms = int(info.as_of_ms)
    with run_scoped_cache(spark):
        snapshot = read_snapshot(spark, run_)
        files = LedgerFiles.of(info)
        found = find_requested_entries(spark, snapshot, files, as_of_ms)
        live = found.found.where(F.col("source") != "pending")
        position = ["topic", "ledgerId", "source", "entryLedgerId", "entryId"]
        write_table(
            live.select(*position, "requestId", "size"), run_, ERASURE_ENTRIES, [*position, "requestId"]
        )
        ledgers = ledger_rewrites(live, found.candidates)
        _write_staged(spark, run_, live, ledgers, files)
        ledger_table = ledger_table_rows(run_, ledgers)
        ledger_frame = spark.createDataFrame(ledger_table, schema(ERASURE_LEDGERS))
        write_table(ledger_frame, run_, ERASURE_LEDGERS, ["topic", "ledgerId"])
        pending = pending_redactions(found.found)
        write_table(
            _actions(ledger_frame, pending), run_, ACTIONS, ["topic", "action", "ledgerId", "pendingId"]
        )
        decisions = materialize(
            _decisions(snapshot["erasure_requests"], found.covered, found.found, as_of_ms)
        )
        write_table(decisions, run_, ERASURE_DECISIONS, ["requestId", "topic"])
        write_table(_blockers(decisions), run_, BLOCKERS, ["topic", "kind"])
        return _summary(ledger_table, pending.collect(), decisions.collect())


def _ledger_reason() -> Column:
    return F.concat(
        F.col("entriesRedacted").cast("string"),
        F.lit(" entries of requested keys (requests "),
        F.array_join(F.col("requestIds").cast("array<string>"), ", "),
        F.lit(") in ledger "),
        F.col("ledgerId").cast("string"),
        F.lit(": rewritten as files generation "),
        F.col("toGeneration").cast("string"),
        F.lit(" with them redacted"),
    )


def _actions(ledger_frame: DataFrame, pending: DataFrame) -> DataFrame:
    rewrite = {
        "topic": F.col("topic"),
        "ledgerId": F.col("ledgerId"),
        "fromGeneration": F.col("fromGeneration"),
        "entriesRedacted": F.col("entriesRedacted"),
        "bytes": F.col("bytesRedacted"),
        "reason": _ledger_reason(),
    }
    raw = action_rows(ledger_frame.where(F.col("source") == "raw"), REDACT_LEDGER.name, **rewrite)
    compacted = action_rows(
        ledger_frame.where(F.col("source") == "compacted"), REDACT_COMPACTED.name, **rewrite
    )
    expedite = action_rows(
        pending,
        EXPEDITE_PURGE.name,
        topic=F.col("topic"),
        ledgerId=F.col("ledgerId"),
        pendingId=F.col("pendingId"),
        entriesRedacted=F.col("entriesRedacted"),
        reason=F.concat(
            F.col("entriesRedacted").cast("string"),
            F.lit(" entries of requested keys (requests "),
            F.array_join(F.col("requestIds").cast("array<string>"), ", "),
            F.lit(") in files waiting for purge: purged after the erasure grace period, never restored"),
        ),
    )
    return raw.unionByName(compacted).unionByName(expedite)


def _found_counts(covered: DataFrame, found: DataFrame) -> DataFrame:
    """Per request and covered topic: ledgers, entries and payload bytes to redact, files waiting for purge."""
    live = found.where(F.col("source") != "pending")
    key = ["requestId", "topic"]
    return (
        covered.select(*key)
        .join(
            live.groupBy(*key).agg(
                F.countDistinct("source", "ledgerId").alias("ledgers"),
                F.countDistinct("source", "ledgerId", "entryLedgerId", "entryId").alias("entries"),
            ),
            key,
            "left",
        )
        .join(
            live.select(*key, "source", "ledgerId", "entryLedgerId", "entryId", "size")
            .distinct()
            .groupBy(*key)
            .agg(F.sum("size").cast("long").alias("bytes")),
            key,
            "left",
        )
        .join(
            found.where(F.col("source") == "pending")
            .groupBy(*key)
            .agg(F.countDistinct("pendingId").alias("pendingFiles")),
            key,
            "left",
        )
    )


def _topic_decisions(covered: DataFrame, found: DataFrame) -> DataFrame:
    """Per request and covered topic: erase (something found), none (nothing found) or keep (held)."""
    zero = F.lit(0).cast("long")
    per_topic = covered.join(_found_counts(covered, found), ["requestId", "topic"], "left").select(
        "requestId",
        "keyDigest",
        "scope",
        "target",
        "topic",
        "namespace",
        *[F.coalesce(name, zero).alias(name) for name in ("ledgers", "entries", "bytes", "pendingFiles")],
        "heldBy",
    )
    held = F.col("heldBy").isNotNull()
    found_any = (F.col("entries") > 0) | (F.col("pendingFiles") > 0)
    return per_topic.select(
        "*",
        F.when(held, F.lit("keep"))
        .when(found_any, F.lit("erase"))
        .otherwise(F.lit("none"))
        .alias("decision"),
        F.when(held, F.lit("held"))
        .when(found_any, F.lit("erase"))
        .otherwise(F.lit("nothing_found"))
        .alias("kind"),
        F.when(held, F.col("heldBy"))
        .when(
            found_any,
            F.concat(
                F.col("entries").cast("string"),
                F.lit(" entries in "),
                F.col("ledgers").cast("string"),
                F.lit(" ledgers redacted; "),
                F.col("pendingFiles").cast("string"),
                F.lit(" files waiting for purge brought forward"),
            ),
        )
        .otherwise(F.lit("no entry of the key in the topic's files"))
        .alias("reason"),
    ).drop("heldBy")


def _waiting_requests(requests: DataFrame, covered: DataFrame, as_of_ms: int) -> DataFrame:
    """Requests that cover no topic of the run: not yet in effect, or none of their topics is in scope."""
    zero = F.lit(0).cast("long")
    later = F.col("requestedAtMs") > F.lit(as_of_ms)
    return requests.join(covered.select("requestId").distinct(), "requestId", "left_anti").select(
        "requestId",
        "keyDigest",
        "scope",
        "target",
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("string").alias("namespace"),
        *[zero.alias(name) for name in ("ledgers", "entries", "bytes", "pendingFiles")],
        F.lit("wait").alias("decision"),
        F.when(later, F.lit("not_yet_in_effect")).otherwise(F.lit("no_topic_in_scope")).alias("kind"),
        F.when(
            later,
            F.concat(
                F.lit("requested for "), F.col("requestedAtMs").cast("string"), F.lit(" ms, after the as-of")
            ),
        )
        .otherwise(F.lit("no topic of this run's scope is covered by the request"))
        .alias("reason"),
    )


def _decisions(requests: DataFrame, covered: DataFrame, found: DataFrame, as_of_ms: int) -> DataFrame:
    return _topic_decisions(covered, found).unionByName(_waiting_requests(requests, covered, as_of_ms))


def _blockers(decisions: DataFrame) -> DataFrame:
    held = decisions.where(F.col("kind") == "held")
    return held.select(
        "topic",
        F.lit("held").alias("kind"),
        F.concat(
            F.lit("erasure request "), F.col("requestId").cast("string"), F.lit(": "), F.col("reason")
        ).alias("detail"),
    )


def _summary(ledger_table: list[dict], pending: list, decisions: list) -> dict:
    per_namespace: dict[str, dict[str, int]] = {}
    for row in ledger_table:
        namespace = row["topic"].split("://", 1)[1].rsplit("/", 1)[0]
        ns = per_namespace.setdefault(namespace, {"ledgers": 0, "entries": 0, "bytes": 0})
        ns["ledgers"] += 1
        ns["entries"] += row["entriesRedacted"]
        ns["bytes"] += row["bytesRedacted"]
    kinds: dict[str, int] = {}
    for row in decisions:
        kinds[row["kind"]] = kinds.get(row["kind"], 0) + 1
    return {
        "requests": len({row["requestId"] for row in decisions}),
        "decisionKinds": kinds,
        "ledgersToRewrite": len(ledger_table),
        "compactedLedgersToRewrite": sum(1 for r in ledger_table if r["source"] == "compacted"),
        "entriesToRedact": sum(r["entriesRedacted"] for r in ledger_table),
        "bytesToRedact": sum(r["bytesRedacted"] for r in ledger_table),
        "pendingFilesToExpedite": len(pending),
        "perNamespace": per_namespace,
    }


APP = PlanApp("erasure", "Plan key erasure for one run's snapshot.", execute)
parse_args, run, main = APP.parse_args, APP.run, APP.main
