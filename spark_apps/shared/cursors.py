"""What the cursor mechanisms (message expiry, backlog quota) share in their planners: pure DataFrame transforms
over positions, the TTL search (backlog's precise time eviction is that search with ttl = 0.9 x limit), and the
subscription rows, blockers and summaries both write.

Positions are handled as *ordinals*: a topic's entries are numbered 0..N-1 in ledger order, and a
mark-delete position (L, e) is summarised by ``acked`` = how many of the topic's stored entries are at or
before it (entries of ledgers below L, plus e + 1 of L when L is still in the ledger list). A cursor
moving to ordinal ``k`` acknowledges entries ``acked .. k-1``; the new mark-delete is the entry at
ordinal ``k - 1``. This makes "how many entries does this move acknowledge" a subtraction.

Message expiry rule (docs/semantics.md §4; our deliberately safer variant of the entry search):
an entry is expired when its timestamp (broker timestamp when stored, else publish time) is strictly
before ``cutoff = asOf - ttl``. A ledger is wholly expired without reading it when it was closed before
the cutoff (Pulsar's ledger-closure shortcut) or when its newest entry timestamp is before the cutoff.
The cursor moves to the end of the run of expired entries that starts right after its mark-delete and
never past the first unexpired entry: only the first ledger that is not wholly expired (and, when that
is the partially acknowledged mark-delete ledger, the next one) is read.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_apps.shared.io import EntryReads, LedgerFiles, read_entries
from spark_apps.shared.positions import position_text
from spark_apps.shared.session import materialize

WHOLLY_EXPIRED = ("closed_before_cutoff", "all_entries_before_cutoff")


def ledger_layout(ledgers: DataFrame) -> DataFrame:
    """One row per ledger with its ordinal range [startOrd, endOrd) and the topic's totals."""
    by_id = Window.partitionBy("topic").orderBy("ledgerId")
    before = by_id.rowsBetween(Window.unboundedPreceding, -1)
    whole = Window.partitionBy("topic")
    return ledgers.select(
        "topic",
        "ledgerId",
        "entries",
        "size",
        "closedAtMs",
        "minEntryTsMs",
        "maxEntryTsMs",
        "entriesStored",
        F.coalesce(F.sum("entries").over(before), F.lit(0)).cast("long").alias("startOrd"),
        F.coalesce(F.sum("size").over(before), F.lit(0)).cast("long").alias("sizeBefore"),
        F.lead("ledgerId").over(by_id).alias("nextLedgerId"),
        (F.col("ledgerId") == F.max("ledgerId").over(whole)).alias("isCurrent"),
        F.sum("entries").over(whole).cast("long").alias("topicEntries"),
        F.sum("size").over(whole).cast("long").alias("topicSize"),
    ).withColumn("endOrd", F.col("startOrd") + F.col("entries"))


def consumed_ledger_size(size: Column, entries: Column, entry: Column) -> Column:
    """Pulsar ``ManagedLedgerImpl#consumedLedgerSize``: bytes of a ledger at or before entry ``entry``."""
    return (
        F.when(entries <= 0, F.lit(0))
        .when(entries == entry + 1, size)
        .when(entry >= 0, (entry + 1) * F.floor(size / entries))
        .otherwise(F.lit(0))
        .cast("long")
    )


def position_facts(positions: DataFrame, layout: DataFrame, keys: list[str]) -> DataFrame:
    """For rows with ``posLedger``/``posEntry`` (unique by ``keys``): ``acked`` (entries at or before the
    position), ``backlogEntries`` and ``estimatedBacklogBytes`` (Pulsar ``getEstimatedBacklogSize`` from
    that mark-delete: total size, minus ledgers below it, minus the consumed part of its ledger by average
    entry size), and ``oldestBacklogLedgerTsMs``: the oldest entry timestamp of the ledgers still holding
    unacknowledged entries (per-ledger minimum from the snapshot, no entry read), so the oldest remaining entry
    is at most that old."""
    joined = positions.select(*keys, "posLedger", "posEntry").join(
        layout.select("topic", "ledgerId", "entries", "size", "minEntryTsMs", "topicEntries", "topicSize"),
        "topic",
    )
    below = F.col("ledgerId") < F.col("posLedger")
    same = F.col("ledgerId") == F.col("posLedger")
    holds_backlog = (F.col("ledgerId") > F.col("posLedger")) | (
        same & (F.col("posEntry") + 1 < F.col("entries"))
    )
    facts = joined.groupBy(*keys, "posLedger", "posEntry").agg(
        F.min(F.when(holds_backlog, F.col("minEntryTsMs"))).alias("oldestBacklogLedgerTsMs"),
        F.sum(F.when(below, F.col("entries")).otherwise(0)).cast("long").alias("entriesBelow"),
        F.sum(F.when(below, F.col("size")).otherwise(0)).cast("long").alias("sizeBelow"),
        F.max(F.when(same, F.struct("entries", "size"))).alias("own"),
        F.first("topicEntries").alias("topicEntries"),
        F.first("topicSize").alias("topicSize"),
    )
    own_acked = F.when(
        F.col("own").isNotNull(), F.least(F.col("posEntry") + 1, F.col("own.entries"))
    ).otherwise(F.lit(0))
    consumed_own = F.when(
        F.col("own").isNotNull(),
        consumed_ledger_size(F.col("own.size"), F.col("own.entries"), F.col("posEntry")),
    ).otherwise(F.lit(0))
    return facts.select(
        *keys,
        "posLedger",
        "posEntry",
        F.col("own").isNotNull().alias("posLedgerExists"),
        (F.col("entriesBelow") + own_acked).cast("long").alias("acked"),
        (F.col("topicEntries") - F.col("entriesBelow") - own_acked).cast("long").alias("backlogEntries"),
        (F.col("topicSize") - F.col("sizeBelow") - consumed_own).cast("long").alias("estimatedBacklogBytes"),
        "oldestBacklogLedgerTsMs",
        "topicEntries",
        "topicSize",
    )


def ordinal_positions(frame: DataFrame, layout: DataFrame, keys: list[str], ordinal: str) -> DataFrame:
    """The position (``toLedger``, ``toEntry``) of the entry at ordinal ``ordinal - 1`` (the mark-delete that
    acknowledges ``ordinal`` entries), for rows with ``ordinal`` >= 1."""
    spans = layout.where(F.col("entries") > 0).select(
        "topic", F.col("ledgerId").alias("toLedger"), "startOrd", "endOrd"
    )
    return (
        frame.select(*keys, ordinal)
        .join(spans, "topic")
        .where((F.col("startOrd") < F.col(ordinal)) & (F.col(ordinal) <= F.col("endOrd")))
        .select(*keys, "toLedger", (F.col(ordinal) - 1 - F.col("startOrd")).alias("toEntry"))
    )


def expiry_scan(subscriptions: DataFrame, layout: DataFrame) -> DataFrame:
    """Per subscription (``topic``, ``name``, ``acked``, ``cutoffMs``) and backlog ledger: how the ledger
    compares with the cutoff, from metadata only (``ledgerClass``)."""
    backlog = subscriptions.select("topic", "name", "acked", "cutoffMs").join(layout, "topic")
    backlog = backlog.where((F.col("endOrd") > F.col("acked")) & (F.col("entries") > 0))
    cutoff = F.col("cutoffMs")
    return backlog.withColumn(
        "ledgerClass",
        F.when(
            F.col("closedAtMs").isNotNull() & (F.col("closedAtMs") < cutoff), F.lit("closed_before_cutoff")
        )
        .when(
            F.col("maxEntryTsMs").isNotNull() & (F.col("maxEntryTsMs") < cutoff),
            F.lit("all_entries_before_cutoff"),
        )
        .when(
            F.col("minEntryTsMs").isNotNull() & (F.col("minEntryTsMs") >= cutoff),
            F.lit("no_entry_before_cutoff"),
        )
        .when(F.col("entriesStored"), F.lit("straddles_cutoff"))
        .otherwise(F.lit("timestamps_unknown")),
    )


def expiry_stops(scan: DataFrame) -> DataFrame:
    """Per subscription: the first ledger that is not wholly expired (``s``), and the next one after it
    (``s2``, needed only when ``s`` is the partially acknowledged mark-delete ledger and turns out to be
    expired from the mark-delete on). Subscriptions whose whole backlog is expired have ``s`` null."""
    blocking = scan.where(~F.col("ledgerClass").isin(*WHOLLY_EXPIRED))
    stop_fields = ["ledgerId", "startOrd", "endOrd", "ledgerClass", "size", "minEntryTsMs"]
    first = blocking.groupBy("topic", "name").agg(F.min(F.struct(*stop_fields)).alias("s"))
    second = (
        blocking.join(first, ["topic", "name"])
        .where(F.col("ledgerId") > F.col("s.ledgerId"))
        .groupBy("topic", "name")
        .agg(F.min(F.struct(*stop_fields)).alias("s2"))
    )
    return first.join(second, ["topic", "name"], "left")


def expiry_read_keys(subscriptions: DataFrame, stops: DataFrame) -> DataFrame:
    """The ledgers the entry-level search must read: the straddling stop ledger, and the one after it when
    the stop is the mark-delete ledger itself (its acknowledged part may be what straddles)."""
    frame = subscriptions.select("topic", "name", "acked").join(stops, ["topic", "name"])
    first = frame.where(F.col("s.ledgerClass") == "straddles_cutoff").select(
        "topic", F.col("s.ledgerId").alias("ledgerId"), F.col("s.size").alias("size")
    )
    second = frame.where(
        (F.col("s.ledgerClass") == "straddles_cutoff")
        & (F.col("s.startOrd") < F.col("acked"))
        & (F.col("s2.ledgerClass") == "straddles_cutoff")
    ).select("topic", F.col("s2.ledgerId").alias("ledgerId"), F.col("s2.size").alias("size"))
    return first.unionByName(second).distinct()


def first_unexpired(frame: DataFrame, entries: DataFrame, stop: str, from_entry: Column) -> DataFrame:
    """Per subscription: the smallest entry id >= ``from_entry`` of its ``stop`` ledger whose timestamp is
    not before the cutoff, and that entry's timestamp."""
    wanted = frame.where(F.col(stop).isNotNull()).select(
        "topic",
        "name",
        "cutoffMs",
        F.col(f"{stop}.ledgerId").alias("stopLedger"),
        from_entry.alias("fromEntry"),
    )
    read = entries.select(
        F.col("topic").alias("eTopic"), F.col("ledgerId").alias("eLedger"), "entryId", "entryTs"
    )
    return (
        wanted.join(read, (F.col("topic") == F.col("eTopic")) & (F.col("stopLedger") == F.col("eLedger")))
        .where((F.col("entryId") >= F.col("fromEntry")) & (F.col("entryTs") >= F.col("cutoffMs")))
        .groupBy("topic", "name")
        .agg(F.min(F.struct("entryId", "entryTs")).alias("hit"))
        .select(
            "topic",
            "name",
            F.col("hit.entryId").alias(f"{stop}FirstUnexpired"),
            F.col("hit.entryTs").alias(f"{stop}FirstUnexpiredTs"),
        )
    )


def stop_at(prefix: str, first_col: str) -> tuple[Column, Column, Column, Column]:
    """Where the run of expired entries stops in the ledger ``prefix`` (``s``: the ledger holding the mark-delete,
    ``s2``: the next one), given its first unexpired entry ``first_col``: (target ordinal, stop kind, detail for a
    person, timestamp of the oldest entry left)."""
    cls = F.col(f"{prefix}.ledgerClass")
    target = F.when(cls == "straddles_cutoff", F.col(f"{prefix}.startOrd") + F.col(first_col)).otherwise(
        F.col(f"{prefix}.startOrd")
    )
    kind = (
        F.when(cls == "straddles_cutoff", F.lit("unexpired_entry"))
        .when(cls == "no_entry_before_cutoff", F.lit("ledger_not_expired"))
        .otherwise(F.lit("timestamps_unknown"))
    )
    detail = (
        F.when(
            cls == "straddles_cutoff",
            F.format_string(
                "entry %s has timestamp %d >= cutoff %d (not expired)",
                position_text(F.col(f"{prefix}.ledgerId"), F.col(first_col)),
                F.col(f"{first_col}Ts"),
                F.col("cutoffMs"),
            ),
        )
        .when(
            cls == "no_entry_before_cutoff",
            F.format_string(
                "ledger %d: oldest entry timestamp %d >= cutoff %d",
                F.col(f"{prefix}.ledgerId"),
                F.col(f"{prefix}.minEntryTsMs"),
                F.col("cutoffMs"),
            ),
        )
        .otherwise(
            F.format_string(
                "ledger %d: entry timestamps unknown (entries not stored) and not closed before the cutoff",
                F.col(f"{prefix}.ledgerId"),
            )
        )
    )
    oldest = F.when(cls == "straddles_cutoff", F.col(f"{first_col}Ts")).otherwise(
        F.col(f"{prefix}.minEntryTsMs")
    )
    return target, kind, detail, oldest


def expiry_targets(subscriptions: DataFrame, stops: DataFrame, entries: DataFrame) -> DataFrame:
    """Per subscription: ``targetAcked`` (ordinal the cursor may move to; equal to ``acked`` = no move),
    ``stopKind`` and ``stopDetail`` saying what ended the run of expired entries, and the timestamp of the
    oldest entry left in the backlog when it is known (``oldestRemainingTsMs``)."""
    frame = subscriptions.join(stops, ["topic", "name"], "left")
    s_from = F.greatest(F.col("acked") - F.col("s.startOrd"), F.lit(0))
    frame = frame.join(first_unexpired(frame, entries, "s", s_from), ["topic", "name"], "left")
    frame = frame.join(first_unexpired(frame, entries, "s2", F.lit(0)), ["topic", "name"], "left")

    s_partial_all_expired = (F.col("s.ledgerClass") == "straddles_cutoff") & F.col("sFirstUnexpired").isNull()

    t1, k1, d1, o1 = stop_at("s", "sFirstUnexpired")
    t2, k2, d2, o2 = stop_at("s2", "s2FirstUnexpired")
    # A straddling s2 always holds an unexpired entry (its newest timestamp is >= cutoff); should its entries
    # disagree with its recorded timestamps, stop at its end rather than search further.
    t2 = F.when(
        (F.col("s2.ledgerClass") == "straddles_cutoff") & F.col("s2FirstUnexpired").isNull(),
        F.col("s2.endOrd"),
    ).otherwise(t2)
    everything = F.lit("whole_backlog_expired")
    target = (
        F.when(F.col("s").isNull(), F.col("topicEntries"))
        .when(s_partial_all_expired & F.col("s2").isNull(), F.col("topicEntries"))
        .when(s_partial_all_expired, t2)
        .otherwise(t1)
    )
    kind = (
        F.when(F.col("s").isNull(), everything)
        .when(s_partial_all_expired & F.col("s2").isNull(), everything)
        .when(s_partial_all_expired, k2)
        .otherwise(k1)
    )
    detail = (
        F.when(kind == "whole_backlog_expired", F.lit("every entry after the mark-delete is expired"))
        .when(s_partial_all_expired, d2)
        .otherwise(d1)
    )
    oldest = (
        F.when(kind == "whole_backlog_expired", F.lit(None).cast("long"))
        .when(s_partial_all_expired, o2)
        .otherwise(o1)
    )
    return frame.select(
        subscriptions.columns
        + [
            F.greatest(target, F.col("acked")).cast("long").alias("targetAcked"),
            kind.alias("stopKind"),
            detail.alias("stopDetail"),
            oldest.alias("oldestRemainingTsMs"),
        ]
    )


def entry_at_ordinal(frame: DataFrame, layout: DataFrame, keys: list[str], ordinal: str) -> DataFrame:
    """The ledger holding the entry at ``ordinal`` (0-based) and that entry's id: ``atLedger``/``atEntry``,
    plus the ledger's stored flag and payload size (to read it)."""
    spans = layout.where(F.col("entries") > 0).select(
        "topic", F.col("ledgerId").alias("atLedger"), "startOrd", "endOrd", "entriesStored", "size"
    )
    return (
        frame.select(*keys, ordinal)
        .join(spans, "topic")
        .where((F.col("startOrd") <= F.col(ordinal)) & (F.col(ordinal) < F.col("endOrd")))
        .select(
            *keys,
            "atLedger",
            (F.col(ordinal) - F.col("startOrd")).alias("atEntry"),
            F.col("entriesStored").alias("atStored"),
            F.col("size").alias("atSize"),
        )
    )


def durable_subscriptions(topics: DataFrame, cursors: DataFrame, layout: DataFrame) -> DataFrame:
    """Durable cursors with their topic's facts and backlog (``acked``, ``backlogEntries``, bytes)."""
    durable = cursors.where(F.col("durable")).select(
        "topic",
        "name",
        "consumers",
        F.col("markDeleteLedger").alias("posLedger"),
        F.col("markDeleteEntry").alias("posEntry"),
    )
    facts = position_facts(durable, layout, ["topic", "name"])
    return (
        durable.join(facts.drop("posLedger", "posEntry"), ["topic", "name"])
        .join(
            topics.select(
                "topic",
                "namespace",
                "isSystemTopic",
                "messageTtlSeconds",
                "messageTtlSource",
                "sizeQuotaLimitBytes",
                "sizeQuotaPolicy",
                "timeQuotaLimitSeconds",
                "timeQuotaPolicy",
            ),
            "topic",
        )
        .withColumn("markDelete", position_text(F.col("posLedger"), F.col("posEntry")))
    )


def entry_read_requests(*frames: DataFrame) -> list[tuple[str, int, int]]:
    keys: set[tuple[str, int, int]] = set()
    for frame in frames:
        keys.update((r["topic"], int(r["ledgerId"]), int(r["size"])) for r in frame.collect())
    return sorted(keys)


def expire(
    spark, files: LedgerFiles, subs: DataFrame, layout: DataFrame, reads: EntryReads, extra_keys: list
) -> tuple[DataFrame, DataFrame]:
    """The TTL search for subscriptions with a ``cutoffMs``; returns (targets, entries read). Reads only the
    stop ledgers (and ``extra_keys``) in one pass."""
    scan = expiry_scan(subs, layout)
    stops = materialize(expiry_stops(scan))
    keys = entry_read_requests(expiry_read_keys(subs, stops)) + list(extra_keys)
    entries = materialize(read_entries(spark, files, keys, reads))
    return expiry_targets(subs, stops, entries), entries


def expiry_moves(targets: DataFrame, layout: DataFrame) -> DataFrame:
    """Targets that move the cursor: the new mark-delete and the bytes of the newly acknowledged entries
    (Pulsar's estimated backlog before minus after)."""
    moving = targets.where(F.col("targetAcked") > F.col("acked"))
    positions = ordinal_positions(moving, layout, ["topic", "name"], "targetAcked")
    after = position_facts(
        positions.select(
            "topic", "name", F.col("toLedger").alias("posLedger"), F.col("toEntry").alias("posEntry")
        ),
        layout,
        ["topic", "name"],
    ).select(
        "topic",
        "name",
        F.col("estimatedBacklogBytes").alias("backlogBytesAfter"),
        F.col("oldestBacklogLedgerTsMs").alias("oldestLedgerTsAfter"),
    )
    return moving.join(positions, ["topic", "name"]).join(after, ["topic", "name"])


def oldest_remaining_ledger_ts(moved: Column, after_col: str) -> Column:
    """For every subscription, read or not: the oldest entry timestamp of the ledgers still holding its backlog
    after the decision (per-ledger minimum, an "at most this old" bound for the oldest remaining entry)."""
    return (
        F.when(moved, F.col(after_col))
        .otherwise(F.col("oldestBacklogLedgerTsMs"))
        .alias("oldestRemainingLedgerTsMs")
    )


def cursor_blockers(subscriptions: DataFrame) -> DataFrame:
    return subscriptions.where((F.col("decision") == "keep") & (F.col("backlogEntries") > 0)).select(
        "topic",
        "subscription",
        "kind",
        F.col("reason").alias("detail"),
        F.col("backlogBytesAfter").alias("bytes"),
        F.col("backlogEntries").alias("entries"),
    )


def cursor_summary(subscriptions: DataFrame, entries_col: str, bytes_col: str) -> dict:
    rows = (
        subscriptions.where(F.col("decision") == "move")
        .groupBy("namespace")
        .agg(
            F.count("*").alias("cursors"),
            F.sum(entries_col).alias("entries"),
            F.sum(bytes_col).alias("bytes"),
        )
        .collect()
    )
    per_namespace = {
        r["namespace"]: {"cursors": int(r["cursors"]), "entries": int(r["entries"]), "bytes": int(r["bytes"])}
        for r in rows
    }
    return {
        "cursorsToMove": sum(v["cursors"] for v in per_namespace.values()),
        "entriesToAcknowledge": sum(v["entries"] for v in per_namespace.values()),
        "bytesToAcknowledge": sum(v["bytes"] for v in per_namespace.values()),
        "perNamespace": per_namespace,
    }


def read_cost(reads: EntryReads, ledgers: DataFrame) -> dict:
    stored = (
        ledgers.where(F.col("entriesStored")).agg(F.sum("size").alias("b"), F.count("*").alias("n")).first()
    )
    store_bytes = int(stored["b"] or 0)
    return {
        "ledgersRead": reads.ledgers,
        "ledgersStored": int(stored["n"] or 0),
        "entryBytesRead": reads.entry_bytes,
        "fileBytesRead": reads.file_bytes,
        "storedEntryBytes": store_bytes,
        "readShare": (reads.entry_bytes / store_bytes) if store_bytes else 0.0,
    }
