"""Quality-gate checks for the cursor mechanisms (message expiry, backlog quota).

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

from pathlib import Path

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_apps.backlog_rules import COMPACTION_SUBSCRIPTION as COMPACTION
from spark_apps.common import EntryReads, materialize, read_entries
from spark_apps.topic_names import topic_name_facts


def position_part(col: str, index: int) -> Column:
    """Ledger (0) or entry (1) id of an ``L:E`` position column."""
    return F.split(F.col(col), ":").getItem(index).cast("long")


def position_key(ledger: Column, entry: Column) -> Column:
    """A comparable position: structs compare field by field."""
    return F.struct(ledger.alias("l"), entry.alias("e"))


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
    moves = actions.where(F.col("action") == "move_cursor").select(
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
    spark, store_root: str, moves: DataFrame, ledgers: DataFrame, reads: EntryReads
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
    entries = read_entries(spark, store_root, keys, reads).select(
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


def expiry_move_checks(spark, info: dict, actions: DataFrame, snapshot: dict, reads: EntryReads) -> DataFrame:
    as_of = int(info["asOfMs"])
    broker = info["broker"]
    ledgers = snapshot["ledgers"]
    names = topic_name_facts(spark, [actions]).select("topic", "isSystemTopic")
    frame = move_frame(
        actions,
        snapshot["topics"].select("topic", "messageTtlSeconds").join(names, "topic", "left"),
        ledgers,
        snapshot["cursors"],
    ).withColumn("cutoffMs", F.lit(as_of) - F.col("messageTtlSeconds") * 1000)
    frame = materialize(frame)
    expired = acknowledged_entries_expired(spark, info["store"], frame, ledgers, reads)
    # Guard: re-read the oldest unacknowledged entry of guarded subscriptions.
    backlog = ordinal(ledgers, frame, ["topic", "name"], "fromL", "fromE", "ackedBefore").join(
        ledgers.groupBy("topic").agg(F.sum("entries").alias("topicEntries")), "topic"
    )
    guarded = (
        frame.join(backlog, ["topic", "name"])
        .where(
            (F.col("consumers") > 0)
            & (
                F.col("topicEntries") - F.col("ackedBefore")
                < F.lit(int(broker["housekeepingExpiryGuardMinimumBacklog"]))
            )
        )
        .transform(materialize)
    )
    first = materialize(entry_holding(ledgers, guarded, ["topic", "name"], "ackedBefore"))
    keys = stored_read_keys(first)
    oldest = read_entries(spark, info["store"], keys, reads).select(
        "topic", "ledgerId", "entryId", "publishTime"
    )
    factor = float(broker["housekeepingExpiryGuardAgeFactor"])
    guard = (
        guarded.select("topic", "name", "messageTtlSeconds")
        .join(first.select("topic", "name", "ledgerId", "entryId"), ["topic", "name"], "left")
        .join(oldest, ["topic", "ledgerId", "entryId"], "left")
        .select(
            "topic",
            "name",
            F.coalesce(
                F.lit(as_of)
                > F.col("publishTime")
                + F.floor(F.col("messageTtlSeconds") * F.lit(factor)).cast("long") * 1000,
                F.lit(False),
            ).alias("guardOk"),
        )
    )
    return (
        frame.join(expired, ["topic", "name"], "left")
        .join(guard, ["topic", "name"], "left")
        .select(
            "topic",
            "name",
            "from",
            "to",
            *common_move_checks(frame, allow_ledger_start=False),
            F.coalesce(F.col("messageTtlSeconds") > 0, F.lit(False)).alias("ttl_enabled"),
            F.coalesce(F.col("acknowledged_entries_expired"), F.lit(False)).alias(
                "acknowledged_entries_expired"
            ),
            F.coalesce(F.col("guardOk"), F.lit(True)).alias("consumer_guard_allows"),
        )
    )


def slowest_positions(ledgers: DataFrame, cursors: DataFrame) -> DataFrame:
    return (
        cursors.where(F.col("durable"))
        .groupBy("topic")
        .agg(F.min(F.struct("markDeleteLedger", "markDeleteEntry")).alias("s"))
        .select("topic", F.col("s.markDeleteLedger").alias("sL"), F.col("s.markDeleteEntry").alias("sE"))
    )


def rederived_quota_state(spark, info: dict, snapshot: dict, reads: EntryReads) -> DataFrame:
    """Per topic: sizeExceeded and timeExceeded as Pulsar measures them on the slowest durable cursor."""
    as_of = int(info["asOfMs"])
    ledgers, topics = snapshot["ledgers"], snapshot["topics"]
    slow = slowest_positions(ledgers, snapshot["cursors"])
    est = estimated_backlog(ledgers, slow, ["topic"], "sL", "sE", "backlogBytes")
    acked = ordinal(ledgers, slow, ["topic"], "sL", "sE", "acked")
    holding = materialize(entry_holding(ledgers, acked, ["topic"], "acked"))
    if info["broker"]["preciseTimeBasedBacklogQuotaCheck"]:
        keys = stored_read_keys(holding)
        ts = holding.join(
            read_entries(spark, info["store"], keys, reads).select("topic", "ledgerId", "entryId", "entryTs"),
            ["topic", "ledgerId", "entryId"],
            "left",
        ).select("topic", F.col("entryTs").alias("ageTs"))
    else:
        ts = holding.select("topic", F.col("closedAtMs").alias("ageTs"))
    enabled = bool(info["broker"]["backlogQuotaCheckEnabled"])
    names = topic_name_facts(spark, [topics]).select("topic", "isSystemTopic")
    return (
        topics.select(
            "topic",
            "sizeQuotaLimitBytes",
            "sizeQuotaPolicy",
            "timeQuotaLimitSeconds",
            "timeQuotaPolicy",
        )
        .join(names, "topic", "left")
        .join(est, "topic", "left")
        .join(ts, "topic", "left")
        .join(slow, "topic", "left")
        .select(
            "*",
            (
                F.lit(enabled)
                & F.coalesce(~F.col("isSystemTopic"), F.lit(False))
                & F.col("sL").isNotNull()
                & (F.col("sizeQuotaLimitBytes") >= 0)
                & (F.coalesce(F.col("backlogBytes"), F.lit(0)) >= F.col("sizeQuotaLimitBytes"))
            ).alias("sizeExceeded"),
            F.coalesce(
                F.lit(enabled)
                & ~F.col("isSystemTopic")
                & (F.col("timeQuotaLimitSeconds") > 0)
                & (F.lit(as_of) > F.col("ageTs") + F.col("timeQuotaLimitSeconds") * 1000),
                F.lit(False),
            ).alias("timeExceeded"),
        )
    )


def backlog_move_checks(
    spark, info: dict, actions: DataFrame, steps: DataFrame, snapshot: dict, reads: EntryReads
) -> tuple[DataFrame, DataFrame, DataFrame]:
    as_of = int(info["asOfMs"])
    precise = bool(info["broker"]["preciseTimeBasedBacklogQuotaCheck"])
    ledgers, cursors = snapshot["ledgers"], snapshot["cursors"]
    quota = materialize(rederived_quota_state(spark, info, snapshot, reads))
    frame = move_frame(
        actions,
        quota.select(
            "topic",
            "isSystemTopic",
            "sizeQuotaLimitBytes",
            "sizeQuotaPolicy",
            "timeQuotaLimitSeconds",
            "timeQuotaPolicy",
            "sizeExceeded",
            "timeExceeded",
        ),
        ledgers,
        cursors,
    ).transform(materialize)
    acted_on = (
        F.when(
            F.col("quotaType") == "destination_storage",
            F.col("sizeExceeded") & (F.col("sizeQuotaPolicy") == "consumer_backlog_eviction"),
        )
        .when(
            F.col("quotaType") == "message_age",
            ~F.col("sizeExceeded")
            & F.col("timeExceeded")
            & (F.col("timeQuotaPolicy") == "consumer_backlog_eviction"),
        )
        .otherwise(F.lit(False))
    )
    last_step = steps.groupBy("topic", F.col("cursor").alias("name")).agg(
        F.max(F.struct("step", "toLedger", "toEntry")).alias("ls"),
        F.min(F.struct("step", "fromLedger", "fromEntry")).alias("fs"),
    )
    if precise:
        precise_moves = frame.where(F.col("quotaType") == "message_age").withColumn(
            "cutoffMs", F.lit(as_of) - (F.col("timeQuotaLimitSeconds") * F.lit(0.9)).cast("long") * 1000
        )
        expired = acknowledged_entries_expired(spark, info["store"], precise_moves, ledgers, reads)
    else:
        expired = frame.limit(0).select("topic", "name", F.lit(True).alias("acknowledged_entries_expired"))
    replayed = frame.join(last_step, ["topic", "name"], "left").join(expired, ["topic", "name"], "left")
    by_steps = (
        F.col("ls").isNotNull()
        & (F.col("ls.toLedger") == F.col("toL"))
        & (F.col("ls.toEntry") == F.col("toE"))
        & (F.col("fs.fromLedger") == F.col("fromL"))
        & (F.col("fs.fromEntry") == F.col("fromE"))
    )
    justified = F.when(
        (F.col("quotaType") == "message_age") & F.lit(precise), F.col("acknowledged_entries_expired")
    ).otherwise(by_steps)
    moves = replayed.select(
        "topic",
        "name",
        "from",
        "to",
        "quotaType",
        *common_move_checks(frame, allow_ledger_start=True),
        F.coalesce(acted_on, F.lit(False)).alias("quota_exceeded_with_eviction_policy"),
        F.coalesce(justified, F.lit(False)).alias("move_is_justified"),
    )
    step_checks = eviction_step_checks(steps, quota, ledgers, cursors, as_of)
    return moves, step_checks, quota


def eviction_step_checks(
    steps: DataFrame, quota: DataFrame, ledgers: DataFrame, cursors: DataFrame, as_of: int
) -> DataFrame:
    durable = cursors.where(F.col("durable")).select(
        "topic", F.col("name").alias("c"), "markDeleteLedger", "markDeleteEntry"
    )
    # Position of every durable cursor just before step i: its latest earlier step's target, else the snapshot.
    earlier = steps.select(
        F.col("topic").alias("jTopic"),
        F.col("step").alias("j"),
        F.col("cursor").alias("jCursor"),
        F.col("toLedger").alias("jL"),
        F.col("toEntry").alias("jE"),
    )
    before = (
        steps.select("topic", "step")
        .join(durable, "topic")
        .join(
            earlier,
            (F.col("jTopic") == F.col("topic"))
            & (F.col("jCursor") == F.col("c"))
            & (F.col("j") < F.col("step")),
            "left",
        )
        .groupBy("topic", "step", "c", "markDeleteLedger", "markDeleteEntry")
        .agg(F.max(F.when(F.col("j").isNotNull(), F.struct("j", "jL", "jE"))).alias("latest"))
        .select(
            "topic",
            "step",
            "c",
            F.coalesce(F.col("latest.jL"), F.col("markDeleteLedger")).alias("pL"),
            F.coalesce(F.col("latest.jE"), F.col("markDeleteEntry")).alias("pE"),
        )
    )
    slowest_before = before.groupBy("topic", "step").agg(F.min(F.struct("pL", "pE")).alias("minP"))
    own_before = before.select(
        "topic", "step", F.col("c").alias("cursor"), F.col("pL").alias("ownL"), F.col("pE").alias("ownE")
    )
    previous_cursor = steps.select(
        "topic", (F.col("step") + 1).alias("step"), F.col("cursor").alias("prevCursor")
    )
    from_facts = (
        estimated_backlog(ledgers, steps, ["topic", "step"], "fromLedger", "fromEntry", "B")
        .join(
            ordinal(ledgers, steps, ["topic", "step"], "fromLedger", "fromEntry", "ackedFrom"),
            ["topic", "step"],
        )
        .join(ordinal(ledgers, steps, ["topic", "step"], "toLedger", "toEntry", "ackedTo"), ["topic", "step"])
    )
    totals = ledgers.groupBy("topic").agg(F.sum("entries").alias("topicEntries"))
    ledger_info = ledgers.select(
        "topic", F.col("ledgerId").alias("fromLedger"), F.col("closedAtMs").alias("fromClosedAtMs")
    )
    next_ledger = (
        steps.select("topic", "step", "fromLedger")
        .join(ledgers.select("topic", F.col("ledgerId").alias("n")), "topic")
        .where(F.col("n") > F.col("fromLedger"))
        .groupBy("topic", "step")
        .agg(F.min("n").alias("nextLedger"))
    )
    frame = (
        steps.join(own_before, ["topic", "step", "cursor"], "left")
        .join(slowest_before, ["topic", "step"], "left")
        .join(previous_cursor, ["topic", "step"], "left")
        .join(from_facts, ["topic", "step"], "left")
        .join(totals, "topic", "left")
        .join(ledger_info, ["topic", "fromLedger"], "left")
        .join(next_ledger, ["topic", "step"], "left")
        .join(quota.select("topic", "sizeQuotaLimitBytes", "timeQuotaLimitSeconds"), "topic", "left")
    )
    target = F.col("sizeQuotaLimitBytes") * F.lit(0.9)
    n_backlog = F.col("topicEntries") - F.col("ackedFrom")
    expected_skip = ((F.col("B") - target) / F.col("B") * n_backlog).cast("long")
    is_size = F.col("quotaType") == "destination_storage"
    size_ok = (
        (F.col("B") > target)
        & (expected_skip > 0)
        & (F.col("ackedTo") - F.col("ackedFrom") == expected_skip)
        & ((F.col("step") > 1) | (F.col("B") >= F.col("sizeQuotaLimitBytes")))
    )
    # A listed but open mark-delete ledger is never skipped; an unlisted one (trimmed) always is.
    listed = ledgers.select("topic", F.col("ledgerId").alias("fromLedger"), F.lit(True).alias("listed"))
    frame = frame.join(listed, ["topic", "fromLedger"], "left")
    time_ok = (
        (F.col("toEntry") == -1)
        & (F.col("toLedger") == F.col("nextLedger"))
        & (
            F.col("listed").isNull()
            | (
                F.col("fromClosedAtMs").isNotNull()
                & (F.lit(as_of) - F.col("fromClosedAtMs") > F.col("timeQuotaLimitSeconds") * 1000)
            )
        )
    )
    return frame.select(
        "topic",
        "step",
        "cursor",
        (F.col("cursor") != COMPACTION).alias("not_compaction_subscription"),
        F.coalesce(
            (F.col("ownL") == F.col("fromLedger")) & (F.col("ownE") == F.col("fromEntry")), F.lit(False)
        ).alias("step_starts_where_cursor_is"),
        F.coalesce(
            F.when(
                is_size,
                position_key(F.col("fromLedger"), F.col("fromEntry"))
                <= position_key(F.col("minP.pL"), F.col("minP.pE")),
            ).otherwise(True),
            F.lit(False),
        ).alias("size_step_moves_the_slowest_cursor"),
        F.coalesce(
            F.when(
                is_size, F.col("prevCursor").isNull() | (F.col("prevCursor") != F.col("cursor"))
            ).otherwise(True),
            F.lit(False),
        ).alias("not_same_cursor_twice_in_a_row"),
        F.coalesce(F.when(is_size, size_ok).otherwise(time_ok), F.lit(False)).alias(
            "step_follows_the_quota_rule"
        ),
    )


def quota_flag_checks(actions: DataFrame, quota: DataFrame) -> DataFrame:
    flags = actions.where(F.col("action") == "flag_backlog_quota").select(
        "topic", "quotaType", "policy", F.col("exceeded").alias("flagExceeded")
    )
    frame = flags.join(quota, "topic", "left")
    rederived = F.when(F.col("quotaType") == "destination_storage", F.col("sizeExceeded")).otherwise(
        F.col("timeExceeded")
    )
    producer_policy = F.col("policy").isin("producer_request_hold", "producer_exception")
    return frame.select(
        "topic",
        "quotaType",
        F.col("sizeExceeded").isNotNull().alias("topic_in_snapshot"),
        F.coalesce(~F.col("flagExceeded") | producer_policy, F.lit(False)).alias(
            "exceeded_flag_only_for_producer_policies"
        ),
        F.coalesce(F.col("flagExceeded") == rederived, F.lit(False)).alias(
            "flag_matches_rederived_quota_state"
        ),
    )


def read_steps(spark, run_dir: str | Path) -> DataFrame:
    schema = (
        "topic string, step long, quotaType string, cursor string, fromLedger long, fromEntry long, "
        "toLedger long, toEntry long, backlogBytesBefore long, entriesSkipped long, why string"
    )
    return spark.read.schema(schema).json(str(Path(run_dir) / "plan" / "eviction_steps"))
