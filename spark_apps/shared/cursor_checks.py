"""Quality-gate checks every cursor move of the cursor mechanisms (message expiry, backlog quota) must pass, and the
re-derivations both use; ``expiry/gate.py`` and ``backlog/gate.py`` add each mechanism's own.

Written apart from the planners on purpose: each invariant is re-derived here from the snapshot (and,
where timestamps decide, from the entries themselves) with its own arithmetic, so a planner bug cannot
certify itself. Every check is a boolean column expected to be all true.

Common to every ``move_cursor``: the cursor exists and is durable, is not the compaction subscription, its
topic is not a system topic (read from the name here, ``topic_names``), ``from`` is its mark-delete in the snapshot, ``to`` is strictly after ``from``,
is a real entry and not past the topic's last entry.

Expiry: TTL is on; every newly acknowledged entry is expired (its ledger closed before the cutoff, or its
timestamp is before the cutoff: read from the entries unless the ledger's newest timestamp already is);
Pulsar's connected-consumer guard holds.

Backlog: the quota acted on is exceeded in the snapshot and its policy is consumer_backlog_eviction;
size steps replay Pulsar's loop (the cursor was the slowest, the skip count is exactly
(int)((B - 0.9 L) / B x entriesInBacklog), B > 0.9 L, never the same cursor twice in a row); time steps skip
exactly one whole ledger closed longer ago than the limit (or no longer listed); precise time moves only
acknowledge entries older than 0.9 x limit; each move ends where its last step ends. Quota-state flags
agree with the re-derived exceeded flag.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from housekeeping.core.names import COMPACTION_SUBSCRIPTION as COMPACTION
from housekeeping.mechanisms.shared.cursors import MOVE_CURSOR
from spark_apps.shared.io import EntryReads, LedgerFiles, read_entries
from spark_apps.shared.positions import position_key, position_part
from spark_apps.shared.session import materialize

# The checks every cursor move of expiry and backlog must pass (common_move_checks' columns).
MOVE_COMMON_CHECKS = (
    "cursor_in_snapshot",
    "cursor_is_durable",
    "not_compaction_subscription",
    "not_system_topic",
    "from_is_current_mark_delete",
    "moves_forward",
    "to_is_an_entry_of_a_listed_ledger",
    "not_past_last_entry",
)


def summary_checks(spark: SparkSession, moves: DataFrame, summary: dict) -> DataFrame:
    """The planner's cursorsToMove equals the moves the gate checked."""
    planned = int(summary.get("cursorsToMove", 0))
    counted = moves.count()
    return spark.createDataFrame(
        [(planned, counted, planned == counted)], "planned long, counted long, summary_reconciles boolean"
    )


def entry_holding(ledgers: DataFrame, frame: DataFrame, keys: list[str], ordinal_col: str) -> DataFrame:
    """The ledger holding the entry at 0-based ``ordinal_col`` and that entry's id (``entryId``), with the
    ledger's close time, payload size and stored flag."""
    start = ledgers.withColumn(
        "startOrd",
        F.coalesce(
            F.sum("entries").over(
                Window.partitionBy("topic").orderBy("ledgerId").rowsBetween(Window.unboundedPreceding, -1)
            ),
            F.lit(0),
        ),
    )
    return (
        frame.select(*keys, ordinal_col)
        .join(start, "topic")
        .where(
            (F.col("startOrd") <= F.col(ordinal_col))
            & (F.col(ordinal_col) < F.col("startOrd") + F.col("entries"))
        )
        .select(
            *keys,
            "ledgerId",
            "closedAtMs",
            "size",
            "entriesStored",
            (F.col(ordinal_col) - F.col("startOrd")).alias("entryId"),
        )
    )


def stored_read_keys(frame: DataFrame) -> list[tuple[str, int, int]]:
    return sorted(
        {
            (r["topic"], int(r["ledgerId"]), int(r["size"]))
            for r in frame.where(F.col("entriesStored")).collect()
        }
    )


def ordinal(
    ledgers: DataFrame, frame: DataFrame, keys: list[str], ledger_col: str, entry_col: str, out: str
) -> DataFrame:
    """Entries of the topic at or before (ledger_col, entry_col)."""
    return (
        frame.select(*keys, ledger_col, entry_col)
        .join(ledgers.select("topic", F.col("ledgerId").alias("_l"), F.col("entries").alias("_n")), "topic")
        .groupBy(*keys, ledger_col, entry_col)
        .agg(
            F.sum(
                F.when(F.col("_l") < F.col(ledger_col), F.col("_n"))
                .when(F.col("_l") == F.col(ledger_col), F.least(F.col(entry_col) + 1, F.col("_n")))
                .otherwise(0)
            )
            .cast("long")
            .alias(out)
        )
        .select(*keys, out)
    )


def estimated_backlog(
    ledgers: DataFrame, frame: DataFrame, keys: list[str], ledger_col: str, entry_col: str, out: str
) -> DataFrame:
    """Pulsar's estimated backlog bytes from a mark-delete (see ManagedLedgerImpl#getEstimatedBacklogSize)."""
    joined = frame.select(*keys, ledger_col, entry_col).join(
        ledgers.select(
            "topic", F.col("ledgerId").alias("_l"), F.col("entries").alias("_n"), F.col("size").alias("_s")
        ),
        "topic",
    )
    own_n, own_s, e = F.col("_n"), F.col("_s"), F.col(entry_col)
    consumed = (
        F.when(own_n <= 0, 0)
        .when(own_n == e + 1, own_s)
        .when(e >= 0, (e + 1) * F.floor(own_s / own_n))
        .otherwise(0)
    )
    return (
        joined.groupBy(*keys, ledger_col, entry_col)
        .agg(
            F.sum(
                F.when(F.col("_l") > F.col(ledger_col), F.col("_s"))
                .when(F.col("_l") == F.col(ledger_col), own_s - consumed)
                .otherwise(0)
            )
            .cast("long")
            .alias(out)
        )
        .select(*keys, out)
    )


def move_frame(actions: DataFrame, topics: DataFrame, ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    moves = actions.where(F.col("action") == MOVE_CURSOR.name).select(
        "topic",
        F.col("subscription").alias("name"),
        "from",
        "to",
        "quotaType",
        position_part("from", 0).alias("fromL"),
        position_part("from", 1).alias("fromE"),
        position_part("to", 0).alias("toL"),
        position_part("to", 1).alias("toE"),
    )
    last = (
        ledgers.where(F.col("entries") > 0)
        .groupBy("topic")
        .agg(F.max(F.struct("ledgerId", "entries")).alias("last"))
        .select("topic", F.col("last.ledgerId").alias("lastL"), (F.col("last.entries") - 1).alias("lastE"))
    )
    to_ledger = ledgers.select(
        "topic", F.col("ledgerId").alias("toL"), F.col("entries").alias("toLedgerEntries")
    )
    return (
        moves.join(
            cursors.select("topic", "name", "durable", "markDeleteLedger", "markDeleteEntry", "consumers"),
            ["topic", "name"],
            "left",
        )
        .join(topics, "topic", "left")
        .join(last, "topic", "left")
        .join(to_ledger, ["topic", "toL"], "left")
    )


def common_move_checks(frame: DataFrame, allow_ledger_start: bool) -> list[Column]:
    """``allow_ledger_start``: a ``(L, -1)`` target is legal (the time eviction's mark-delete)."""
    to_key, from_key = position_key(F.col("toL"), F.col("toE")), position_key(F.col("fromL"), F.col("fromE"))
    valid_entry = (F.col("toE") >= 0) & (F.col("toE") < F.col("toLedgerEntries"))
    # (L, -1) acknowledges only entries of ledgers before L, all written, so it is never past the end while L is
    # one of the topic's ledgers, even an empty current ledger after a roll (the last entry is then in an older
    # ledger, and a position comparison alone would refuse it).
    before_a_listed_ledger = F.lit(False)
    if allow_ledger_start:
        before_a_listed_ledger = (F.col("toE") == -1) & F.col("toLedgerEntries").isNotNull()
        valid_entry = valid_entry | before_a_listed_ledger
    return [
        F.col("durable").isNotNull().alias("cursor_in_snapshot"),
        F.coalesce(F.col("durable"), F.lit(False)).alias("cursor_is_durable"),
        (F.col("name") != COMPACTION).alias("not_compaction_subscription"),
        F.coalesce(~F.col("isSystemTopic"), F.lit(False)).alias("not_system_topic"),
        F.coalesce(
            (F.col("fromL") == F.col("markDeleteLedger")) & (F.col("fromE") == F.col("markDeleteEntry")),
            F.lit(False),
        ).alias("from_is_current_mark_delete"),
        F.coalesce(to_key > from_key, F.lit(False)).alias("moves_forward"),
        F.coalesce(valid_entry, F.lit(False)).alias("to_is_an_entry_of_a_listed_ledger"),
        F.coalesce(
            (to_key <= position_key(F.col("lastL"), F.col("lastE"))) | before_a_listed_ledger,
            before_a_listed_ledger,
        ).alias("not_past_last_entry"),
    ]


def acknowledged_entries_expired(
    spark, files: LedgerFiles, moves: DataFrame, ledgers: DataFrame, reads: EntryReads
) -> DataFrame:
    """Per move with a ``cutoffMs``: is every entry in (from, to] expired? Ledgers closed before the cutoff or
    whose newest entry is before it pass as a whole; any other ledger in the range is read."""
    span = (
        moves.select("topic", "name", "fromL", "fromE", "toL", "toE", "cutoffMs")
        .join(ledgers, "topic")
        .where(
            (F.col("ledgerId") >= F.col("fromL"))
            & (F.col("ledgerId") <= F.col("toL"))
            & (F.col("entries") > 0)
        )
        .withColumn("lo", F.when(F.col("ledgerId") == F.col("fromL"), F.col("fromE") + 1).otherwise(0))
        .withColumn(
            "hi", F.when(F.col("ledgerId") == F.col("toL"), F.col("toE")).otherwise(F.col("entries") - 1)
        )
        .where(F.col("lo") <= F.col("hi"))
        .withColumn(
            "wholeLedgerExpired",
            (F.col("closedAtMs").isNotNull() & (F.col("closedAtMs") < F.col("cutoffMs")))
            | (F.col("maxEntryTsMs").isNotNull() & (F.col("maxEntryTsMs") < F.col("cutoffMs"))),
        )
        .transform(materialize)
    )
    to_read = span.where(~F.col("wholeLedgerExpired"))
    keys = stored_read_keys(to_read.select("topic", "ledgerId", "size", "entriesStored"))
    entries = read_entries(spark, files, keys, reads).select(
        F.col("topic").alias("eTopic"), F.col("ledgerId").alias("eLedger"), "entryId", "entryTs"
    )
    checked = (
        to_read.join(
            entries,
            (F.col("topic") == F.col("eTopic"))
            & (F.col("ledgerId") == F.col("eLedger"))
            & (F.col("entryId") >= F.col("lo"))
            & (F.col("entryId") <= F.col("hi")),
            "left",
        )
        .groupBy("topic", "name", "ledgerId", "lo", "hi", "cutoffMs")
        .agg(
            F.count("entryId").alias("seen"),
            F.sum(F.when(F.col("entryTs") >= F.col("cutoffMs"), 1).otherwise(0)).alias("young"),
        )
        .select(
            "topic",
            "name",
            ((F.col("seen") == F.col("hi") - F.col("lo") + 1) & (F.col("young") == 0)).alias("ledgerOk"),
        )
    )
    whole = span.where(F.col("wholeLedgerExpired")).select("topic", "name", F.lit(True).alias("ledgerOk"))
    return (
        whole.unionByName(checked)
        .groupBy("topic", "name")
        .agg(F.min(F.col("ledgerOk").cast("int")).alias("ok"))
        .select("topic", "name", (F.col("ok") == 1).alias("acknowledged_entries_expired"))
    )
