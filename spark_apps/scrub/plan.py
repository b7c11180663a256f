"""Spark app: plan the store scrub: what the metadata says against what the storage holds, on both tiers.

Reads the scrub's snapshot (``scrub_expected``: every location a metadata row names; ``storage_items``: every item
listed; ``scrub.json``: the wall clock and the minimum age) and writes:

- ``plan/findings``   one row per finding, with its kind, severity, reason and repair:
  - ``orphan``: an item no live row names (a ledger, a compacted ledger, a pending deletion, a restored orphan, the
    tier's marker), older than the minimum age; repaired by ``delete_orphan`` (a directory whose path encodes no
    topic is reported, never repaired);
  - ``not_freed``: an item a purged deletion names: purge said it was deleted and it is still there (a tier delete
    that answered success and kept the object, a directory put back); repaired as an orphan once old enough;
  - ``unrecognised``: an item the layout does not name (a stray file, a directory at the wrong depth), old enough;
  - ``missing``: a location the store serves from (a stored ledger's local copy, a completed offload's object, a
    current compacted ledger) that is not there, with its row unchanged across the listing: data loss, never
    repaired (the metadata is never changed to hide it);
  - ``unreadable`` / ``mismatch``: its files cannot be read, or hold other entries than its row says (count,
    payload bytes, entry ids 0..n-1); an open ledger's writer may be ahead of its row, never behind;
  - ``purge_overdue`` (notice): a pending deletion past its grace period, not held, not purged yet;
- ``plan/actions``    ``delete_orphan`` per repairable finding;
- ``plan/blockers``   empty (a scrub keeps nothing back);
- ``plan/summary.json`` counts and bytes per kind, what the young unreferenced items are, and the purges verified:
  bytes the journal says purges freed against what is still on the storage.

Unreferenced items younger than the minimum age are no finding: a writer's or a run's files in flight.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from housekeeping.engine.contract import ACTIONS, BLOCKERS, HOLDS
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.scrub.actions import DELETE_ORPHAN
from housekeeping.mechanisms.scrub.tables import FINDINGS, SCRUB_EXPECTED, STORAGE_ITEMS
from spark_apps.scrub.files import read_ledger_facts
from spark_apps.shared.io import action_rows, read_snapshot_table, write_table
from spark_apps.shared.plan_app import PlanApp
from spark_apps.shared.session import materialize, run_scoped_cache

# Sources whose locations are live: an item one of them names is no orphan.
LIVE_SOURCES = ("ledger", "compacted", "pending", "restored_orphan", "claim")
REPAIRABLE_KINDS = ("ledger_dir", "staging_dir", "tier_object")


def read_scrub_snapshot(spark, run_dir: str | Path) -> tuple[DataFrame, DataFrame, dict]:
    from housekeeping.mechanisms.scrub.listing import scrub_info_path

    expected = read_snapshot_table(spark, run_dir, SCRUB_EXPECTED)
    items = read_snapshot_table(spark, run_dir, STORAGE_ITEMS)
    return expected, items, json.loads(scrub_info_path(run_dir).read_text(encoding="utf-8"))


def item_references(expected: DataFrame, items: DataFrame, wall_clock_ms: int) -> DataFrame:
    """Per listed item: whether a live row names it, whether a purged deletion does (and which run), its age."""
    refs = expected.groupBy("location", "path").agg(
        F.max(F.col("source").isin(*LIVE_SOURCES).cast("int")).alias("live"),
        F.max((F.col("source") == "purged").cast("int")).alias("purged"),
        F.min(F.when(F.col("source") == "purged", F.col("runId"))).alias("purgedBy"),
    )
    return items.join(refs, ["location", "path"], "left").select(
        items["*"],
        F.coalesce(F.col("live") == 1, F.lit(False)).alias("live"),
        F.coalesce(F.col("purged") == 1, F.lit(False)).alias("purged"),
        "purgedBy",
        (F.lit(wall_clock_ms) - F.col("mtimeMs")).alias("ageMs"),
    )


def unreferenced_findings(referenced: DataFrame, min_age_ms: int) -> DataFrame:
    """Orphans, items purge left behind, and items of no known shape: the unreferenced items old enough."""
    old = referenced.where(~F.col("live") & (F.col("ageMs") >= min_age_ms))
    repairable = F.col("kind").isin(*REPAIRABLE_KINDS) & F.col("topic").isNotNull()
    repair = F.when(repairable, F.lit(DELETE_ORPHAN.name)).otherwise(F.lit("none"))
    age = F.format_number(F.col("ageMs") / 86_400_000, 1)
    kind = (
        F.when(F.col("purged"), F.lit("not_freed"))
        .when(F.col("kind") == "other", F.lit("unrecognised"))
        .otherwise(F.lit("orphan"))
    )
    reason = (
        F.when(
            F.col("purged"),
            F.concat(
                F.lit("purge run "), F.col("purgedBy"), F.lit(" recorded it deleted; it is still there")
            ),
        )
        .when(
            F.col("kind") == "other",
            F.concat(
                F.lit("not a ledger directory or object of the store's layout, "), age, F.lit(" days old")
            ),
        )
        .otherwise(
            F.concat(F.lit("no metadata row, pending deletion or run names it; "), age, F.lit(" days old"))
        )
    )
    reason = F.when(
        ~repairable & (F.col("kind") != "other"),
        F.concat(reason, F.lit("; its path names no topic of this store's encoding, so it is not repaired")),
    ).otherwise(reason)
    return old.select(
        kind.alias("kind"),
        F.lit("error").alias("severity"),
        "location",
        "path",
        "topic",
        "ledgerId",
        "bytes",
        "ageMs",
        repair.alias("repair"),
        reason.alias("reason"),
    )


def keep_held_repairs(spark, findings: DataFrame, holds: DataFrame) -> DataFrame:
    """A hold on the topic (its namespace, or its partitioned topic) an orphan's path names keeps it: still a finding,
    not repaired (a hold forbids every deletion), the hold named."""
    from spark_apps.shared.topic_names import topic_name_facts

    repairs = findings.where(F.col("repair") == DELETE_ORPHAN.name)
    names = topic_name_facts(spark, [repairs])
    targets = F.array(F.col("topic"), F.col("namespace"), F.col("partitionedTopic"))
    held = (
        names.select("topic", F.explode(targets).alias("target"))
        .join(holds.select("target"), "target")
        .groupBy("topic")
        .agg(F.min("target").alias("heldBy"))
    )
    frame = findings.join(held, "topic", "left")
    is_held = F.col("heldBy").isNotNull() & (F.col("repair") == DELETE_ORPHAN.name)
    return frame.select(
        *[c for c in findings.columns if c not in ("repair", "reason")],
        F.when(is_held, F.lit("none")).otherwise(F.col("repair")).alias("repair"),
        F.when(is_held, F.concat(F.col("reason"), F.lit("; a hold on "), F.col("heldBy"), F.lit(" keeps it")))
        .otherwise(F.col("reason"))
        .alias("reason"),
    ).select(*findings.columns)


def missing_findings(expected: DataFrame, items: DataFrame) -> DataFrame:
    present = items.select("location", "path", F.lit(True).alias("present"))
    served = expected.where(F.col("mustExist") & F.col("source").isin("ledger", "compacted"))
    absent = served.join(present, ["location", "path"], "left").where(F.col("present").isNull())
    what = F.when(F.col("source") == "compacted", F.lit("compacted ledger ")).otherwise(F.lit("ledger "))
    where = F.when(F.col("location") == "tier", F.lit("its offloaded object")).otherwise(
        F.lit("its directory")
    )
    return absent.where(F.col("stable")).select(
        *_finding_columns(
            "missing",
            F.concat(
                F.lit("data loss: "),
                what,
                F.col("ledgerId").cast("string"),
                F.lit(" of "),
                F.col("topic"),
                F.lit(" is in the metadata ("),
                F.col("entries").cast("string"),
                F.lit(" entries, "),
                F.col("size").cast("string"),
                F.lit(" bytes) and "),
                where,
                F.lit(" is gone"),
            ),
            F.col("size"),
        )
    )


def _finding_columns(kind: str, reason: Column, bytes_: Column, severity: str = "error") -> list[Column]:
    return [
        F.lit(kind).alias("kind"),
        F.lit(severity).alias("severity"),
        "location",
        "path",
        "topic",
        "ledgerId",
        bytes_.alias("bytes"),
        F.lit(None).cast("bigint").alias("ageMs"),
        F.lit("none").alias("repair"),
        reason.alias("reason"),
    ]


def to_check(expected: DataFrame, items: DataFrame) -> DataFrame:
    """The stored ledgers whose files are listed: the locations whose contents are read."""
    present = items.where(F.col("kind").isin("ledger_dir", "tier_object")).select("location", "path")
    stored = expected.where(F.col("mustExist") & F.col("source").isin("ledger", "compacted"))
    return stored.join(present, ["location", "path"])


def content_findings(checked: DataFrame, facts: DataFrame) -> DataFrame:
    """Unreadable files, and files whose entries differ from their row."""
    frame = checked.join(facts, ["location", "path"])
    ids_ok = ~F.col("checkIds") | (
        (F.col("rows") == 0)
        | (
            (F.col("minEntryId") == 0)
            & (F.col("maxEntryId") == F.col("rows") - 1)
            & (F.col("distinctPositions") == F.col("rows"))
        )
    )
    # Each position once (a compacted ledger's entries come from several ledgers: their ids alone repeat).
    unique_ids = F.col("distinctPositions") == F.col("rows")
    closed_ok = (F.col("rows") == F.col("entries")) & (F.col("payloadBytes") == F.col("size"))
    # A writer appends to the open ledger's file before its row commits: ahead is in flight, behind is lost.
    open_ok = (F.col("rows") >= F.col("entries")) & (F.col("payloadBytes") >= F.col("size"))
    consistent = F.when(F.col("isOpen"), open_ok).otherwise(closed_ok) & ids_ok & unique_ids
    detail = F.concat(
        F.lit("the files hold "),
        F.col("rows").cast("string"),
        F.lit(" entries of "),
        F.col("payloadBytes").cast("string"),
        F.lit(" payload bytes (ids "),
        F.coalesce(F.col("minEntryId").cast("string"), F.lit("-")),
        F.lit(".."),
        F.coalesce(F.col("maxEntryId").cast("string"), F.lit("-")),
        F.lit(", "),
        F.col("distinctPositions").cast("string"),
        F.lit(" distinct); its row says "),
        F.col("entries").cast("string"),
        F.lit(" entries of "),
        F.col("size").cast("string"),
        F.lit(" bytes"),
    )
    name = F.concat(
        F.lit("ledger "), F.col("ledgerId").cast("string"), F.lit(" of "), F.col("topic"), F.lit(": ")
    )
    unreadable = frame.where(F.col("error").isNotNull()).select(
        *_finding_columns("unreadable", F.concat(name, F.col("error")), F.col("size"))
    )
    mismatched = frame.where(F.col("error").isNull() & ~consistent).select(
        *_finding_columns("mismatch", F.concat(name, detail), F.col("size"))
    )
    return unreadable.unionByName(mismatched)


def overdue_findings(expected: DataFrame, as_of_ms: int) -> DataFrame:
    due = expected.where(
        (F.col("source") == "pending") & (F.col("purgeAfterMs") <= as_of_ms) & ~F.col("held")
    )
    reason = F.concat(
        F.lit("pending deletion "),
        F.col("pendingId").cast("string"),
        F.lit(" of run "),
        F.col("runId"),
        F.lit(" was due at "),
        F.date_format(F.timestamp_millis(F.col("purgeAfterMs")), "yyyy-MM-dd'T'HH:mm:ss'Z'"),
        F.lit(" and is not purged yet (the next purge removes it)"),
    )
    return due.select(*_finding_columns("purge_overdue", reason, F.col("size"), severity="notice"))


def freed_summary(expected: DataFrame, items: DataFrame) -> dict:
    """Bytes the purges recorded as freed, against the storage: what is verifiably gone, what is still there."""
    purged = expected.where(F.col("source") == "purged")
    listed = items.select("location", "path", F.col("bytes").alias("stillThere"))
    per_deletion = (
        purged.join(listed, ["location", "path"], "left")
        .groupBy("pendingId")
        .agg(
            F.max("size").alias("size"),
            F.sum(F.coalesce("stillThere", F.lit(0))).alias("stillThere"),
            F.max(F.col("stillThere").isNotNull().cast("int")).alias("notFreed"),
        )
    )
    row = per_deletion.agg(
        F.count("*").alias("deletions"),
        F.coalesce(F.sum("size"), F.lit(0)).alias("claimed"),
        F.coalesce(F.sum(F.when(F.col("notFreed") == 0, F.col("size"))), F.lit(0)).alias("verified"),
        F.coalesce(F.sum("notFreed"), F.lit(0)).alias("notFreed"),
        F.coalesce(F.sum("stillThere"), F.lit(0)).alias("stillThere"),
    ).first()
    return {
        "purgedDeletions": int(row["deletions"]),
        "bytesRecordedFreed": int(row["claimed"]),
        "bytesVerifiedFreed": int(row["verified"]),
        "deletionsNotFreed": int(row["notFreed"]),
        "bytesStillStored": int(row["stillThere"]),
    }


def plan(
    spark, expected: DataFrame, items: DataFrame, info: RunInfo, scrub: dict, root: str, info_dir: Path
) -> tuple[DataFrame, dict]:
    """All findings (materialized once) and the summary's facts."""
    min_age_ms = int(scrub["minAgeSeconds"]) * 1000
    referenced = item_references(expected, items, int(scrub["wallClockMs"]))
    checked = materialize(to_check(expected, items))
    tier = {"url": info.offload_tier, "endpoint_url": info.offload_endpoint}
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions", "8"))
    facts = read_ledger_facts(spark, checked, root, tier, partitions)
    holds = read_snapshot_table(spark, info_dir, HOLDS)
    unreferenced = keep_held_repairs(spark, materialize(unreferenced_findings(referenced, min_age_ms)), holds)
    findings = materialize(
        unreferenced.unionByName(missing_findings(expected, items))
        .unionByName(content_findings(checked, facts))
        .unionByName(overdue_findings(expected, int(info.as_of_ms)))
    )
    young = (
        referenced.where(~F.col("live") & (F.col("ageMs") < min_age_ms))
        .agg(F.count("*").alias("n"), F.coalesce(F.sum("bytes"), F.lit(0)).alias("b"))
        .first()
    )
    facts_summary = {
        "youngUnreferenced": int(young["n"]),
        "youngUnreferencedBytes": int(young["b"]),
        "ledgersChecked": checked.count(),
        "freed": freed_summary(expected, items),
    }
    return findings, facts_summary


def summarize(findings: list[dict], facts: dict, scrub: dict) -> dict:
    per_kind: dict[str, dict[str, int]] = {}
    for row in findings:
        entry = per_kind.setdefault(row["kind"], {"count": 0, "bytes": 0})
        entry["count"] += 1
        entry["bytes"] += int(row.get("bytes") or 0)
    errors = sum(1 for row in findings if row["severity"] == "error")
    return {
        "wallClockMs": scrub["wallClockMs"],
        "minAgeSeconds": scrub["minAgeSeconds"],
        "tier": scrub["tier"],
        "itemsListed": scrub["itemsListed"],
        "locationsExpected": scrub["locationsExpected"],
        "findings": len(findings),
        "errors": errors,
        "clean": errors == 0,
        "perKind": per_kind,
        "orphans": per_kind.get("orphan", {}).get("count", 0),
        "orphanBytes": per_kind.get("orphan", {}).get("bytes", 0),
        "missingLedgers": per_kind.get("missing", {}).get("count", 0),
        "mismatchedLedgers": per_kind.get("mismatch", {}).get("count", 0)
        + per_kind.get("unreadable", {}).get("count", 0),
        "repairs": sum(1 for row in findings if row["repair"] == DELETE_ORPHAN.name),
        "repairBytes": sum(
            int(row.get("bytes") or 0) for row in findings if row["repair"] == DELETE_ORPHAN.name
        ),
        **facts,
    }


def execute(spark, run_: RunDir, info: RunInfo) -> dict[str, Any]:
    """Compare what the store holds with what its metadata expects; write the findings and the repairs; the
    summary's figures."""
    with run_scoped_cache(spark):
        expected, items, scrub = read_scrub_snapshot(spark, run_.path)
        findings, facts = plan(spark, expected, items, info, scrub, str(info.store), run_.path)
        write_table(findings, run_.path, FINDINGS, ["kind", "location", "path"])
        repairs = findings.where(F.col("repair") == DELETE_ORPHAN.name).join(
            items.select("location", "path", "mtimeMs"), ["location", "path"]
        )
        actions = action_rows(
            repairs,
            DELETE_ORPHAN.name,
            topic=F.col("topic"),
            ledgerId=F.col("ledgerId"),
            bytes=F.col("bytes"),
            reason=F.col("reason"),
            location=F.col("location"),
            path=F.col("path"),
            mtimeMs=F.col("mtimeMs"),
        )
        write_table(actions, run_.path, ACTIONS, ["location", "path"])
        write_table(spark.createDataFrame([], BLOCKERS.ddl()), run_.path, BLOCKERS, ["topic"])
        rows = [row.asDict() for row in findings.select("kind", "severity", "bytes", "repair").collect()]
        return summarize(rows, facts, scrub)


APP = PlanApp("scrub", "Plan the store scrub for one run's snapshot.", execute)
parse_args, run, main = APP.parse_args, APP.run, APP.main
