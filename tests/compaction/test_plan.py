"""Compaction rules on the Spark transforms (plan_compaction.entry_decisions / compaction_candidates), with
Pulsar's CompactionTest cases and the compacted-retention (#19665) boundaries."""

from __future__ import annotations

import random
from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import functions as F

from housekeeping.engine.contract import COMPACTED_LEDGERS, CURSORS, LEDGERS, TOPICS
from spark_apps.compaction import plan
from spark_apps.compaction.plan import (
    RULE_PARAMS,
    arrow_topic_counts,
    arrow_topic_decisions,
    compaction_candidates,
    decision_counts,
    dropped_keys,
    entry_decisions,
    kept_entries,
)
from tests.conftest import contract_frame

pytestmark = pytest.mark.spark

T = "persistent://t/ns/table"
AS_OF = 100_000_000
ENTRY_COLUMNS = "topic string, ledgerId long, entryId long, key string, size int, entryTs long"
PARAMS = (
    "topic string, compactedRetentionTimeMs long, compactedRetentionSizeBytes long, tombstoneGraceMs long"
)


def _counts(frame) -> dict:
    return {r.topic: r.asDict() for r in frame.collect()}


def arrow_decisions(rows, params_rows, retain_null_key) -> pa.Table:
    """The plan's decisions of rows (topic, ledgerId, entryId, key, size, entryTs): each topic decided in Arrow as
    the task reading it does, a part per ledger, the parts and their rows given in reverse order (the rule orders
    them itself)."""
    params = {row[0]: dict(zip(("topic", *RULE_PARAMS), row, strict=True)) for row in params_rows}
    by_topic = defaultdict(lambda: defaultdict(list))
    for topic, *entry in reversed(rows):
        by_topic[topic][entry[0]].append(entry)
    names = ["ledgerId", "entryId", "key", "size", "entryTs"]
    types = [pa.int64(), pa.int64(), pa.string(), pa.int32(), pa.int64()]

    def part(entries):
        columns = {
            n: pa.array([e[i] for e in entries], t) for i, (n, t) in enumerate(zip(names, types, strict=True))
        }
        return pa.table({**columns, "source": pa.array(["raw"] * len(entries))})

    decisions = pa.concat_tables(
        arrow_topic_decisions(
            params[topic], [part(e) for _, e in sorted(ledgers.items(), reverse=True)], AS_OF, retain_null_key
        )
        for topic, ledgers in by_topic.items()
    )
    # One chunk: PySpark 4.2's createDataFrame of an Arrow table drops every chunk after an empty one (a topic's
    # shared rows are an empty chunk when nothing is folded); mapInArrow, as the plan runs it, takes empty batches.
    return decisions.combine_chunks()


def decide_both_ways(spark, rows, params_rows, retain_null_key):
    """rows: (topic, ledgerId, entryId, key, size, entryTs). Decides them per entry (``entry_decisions``, the
    reference in Spark) and as the plan does (``arrow_topic_decisions``: each topic in Arrow, the entries that
    cannot stay counted), checks that both agree entry by entry and in every count, and returns the per-entry
    decisions."""
    frame = spark.createDataFrame(rows, ENTRY_COLUMNS).withColumn("source", F.lit("raw"))
    params = spark.createDataFrame(params_rows, PARAMS)
    reference = entry_decisions(frame, params, AS_OF, retain_null_key)
    by_entry = {(r.topic, r.ledgerId, r.entryId): r.decision for r in reference.collect()}
    decisions = arrow_decisions(rows, params_rows, retain_null_key)
    planned = {
        (t, ledger, entry): d
        for t, ledger, entry, d in zip(
            *(decisions[n].to_pylist() for n in ("topic", "ledgerId", "entryId", "decision")), strict=True
        )
        if ledger is not None
    }
    # What the plan leaves out of its decisions it counts as superseded or keyless-dropped.
    expanded = {
        (t, ledger, entry): planned.get(
            (t, ledger, entry), "superseded" if key is not None else "keyless_dropped"
        )
        for t, ledger, entry, key, _, _ in rows
    }
    assert expanded == by_entry
    per_topic = [decisions.filter(pc.equal(decisions["topic"], t)) for t in sorted({r[0] for r in rows})]
    counts = pa.concat_tables(arrow_topic_counts(d) for d in per_topic).to_pylist()
    assert {r["topic"]: r for r in counts} == _counts(decision_counts(reference))
    # What the plan's tasks write: each topic's kept entries in position order and its dropped keys by digest.
    digested = reference.withColumn("keyDigest", F.sha2("key", 256))
    kept_rows = pa.concat_tables(kept_entries(d) for d in per_topic).to_pylist()
    assert [(r["topic"], r["ledgerId"], r["entryId"], r["keyDigest"]) for r in kept_rows] == sorted(
        (r.topic, r.ledgerId, r.entryId, r.keyDigest) for r in digested.where("decision = 'kept'").collect()
    )
    dropped_rows = pa.concat_tables(dropped_keys(d) for d in per_topic).to_pylist()
    leaving = digested.where(F.col("latestForKey") & F.col("decision").isin(*plan.DROPPING))
    assert sorted(
        (r["topic"], r["keyDigest"], r["ledgerId"], r["entryId"], r["reason"]) for r in dropped_rows
    ) == (sorted((r.topic, r.keyDigest, r.ledgerId, r.entryId, r.decision) for r in leaving.collect()))
    for rows_of_topic in (kept_entries(d) for d in per_topic):
        order = list(
            zip(rows_of_topic["ledgerId"].to_pylist(), rows_of_topic["entryId"].to_pylist(), strict=True)
        )
        assert order == sorted(order)
    for rows_of_topic in (dropped_keys(d) for d in per_topic):
        assert rows_of_topic["keyDigest"].to_pylist() == sorted(rows_of_topic["keyDigest"].to_pylist())
    return by_entry


def decide(spark, entries, *, time_ms=-1, size_bytes=-1, grace_ms=0, retain_null_key=False):
    """entries: (ledgerId, entryId, key, size, entryTs) -> {(ledgerId, entryId): decision}, the same both ways."""
    decided = decide_both_ways(
        spark, [(T, *e) for e in entries], [(T, time_ms, size_bytes, grace_ms)], retain_null_key
    )
    return {(ledger, entry): d for (_, ledger, entry), d in decided.items()}


def kept(decisions):
    return sorted(p for p, d in decisions.items() if d == "kept")


def test_latest_entry_per_key_wins_in_publish_order(spark):
    # CompactionTest#testCompaction: several values per key; the compacted view holds the last of each.
    entries = [(1, 0, "a", 5, AS_OF), (1, 1, "b", 5, AS_OF), (1, 2, "a", 6, AS_OF), (2, 0, "b", 7, AS_OF)]
    decisions = decide(spark, entries)
    assert kept(decisions) == [(1, 2), (2, 0)]
    assert decisions[(1, 0)] == decisions[(1, 1)] == "superseded"


def test_an_empty_payload_deletes_its_key_and_a_later_value_brings_it_back(spark):
    # CompactionTest#testEmptyPayloadDeletes / #testEmptyPayloadDeletesWhenCompressed
    entries = [(1, 0, "a", 5, AS_OF), (1, 1, "a", 0, AS_OF), (1, 2, "b", 5, AS_OF), (1, 3, "b", 0, AS_OF)]
    entries += [(1, 4, "b", 9, AS_OF)]
    decisions = decide(spark, entries)
    assert decisions[(1, 1)] == "tombstoned" and decisions[(1, 0)] == "superseded"
    assert kept(decisions) == [(1, 4)]


def test_keyless_entries_are_dropped_by_default_and_kept_when_retained(spark):
    # PIP-318 (topicCompactionRetainNullKey, default false since 3.2); CompactionTest#testKeyLessMessagesPassThrough
    entries = [(1, 0, None, 5, AS_OF), (1, 1, "a", 5, AS_OF), (1, 2, None, 4, AS_OF)]
    assert kept(decide(spark, entries)) == [(1, 1)]
    assert decide(spark, entries)[(1, 0)] == "keyless_dropped"
    assert kept(decide(spark, entries, retain_null_key=True)) == [(1, 0), (1, 1), (1, 2)]


@pytest.mark.parametrize("retain_null_key", [False, True])
def test_a_topic_of_keyless_entries_only(spark, retain_null_key):
    entries = [(1, 0, None, 5, AS_OF), (2, 0, None, 0, AS_OF)]
    decisions = decide(spark, entries, retain_null_key=retain_null_key)
    assert kept(decisions) == ([(1, 0), (2, 0)] if retain_null_key else [])


def test_compacted_retention_time_is_strict_like_pulsars(spark):
    limit = 60_000
    entries = [(1, 0, "old", 5, AS_OF - limit - 1), (1, 1, "edge", 5, AS_OF - limit), (1, 2, "new", 5, AS_OF)]
    decisions = decide(spark, entries, time_ms=limit)
    assert decisions[(1, 0)] == "expired_time" and kept(decisions) == [(1, 1), (1, 2)]
    # -1 keeps everything (also what an unset compacted_retention means)
    assert len(kept(decide(spark, entries, time_ms=-1))) == 3


def test_compacted_retention_size_keeps_the_newest_entries_that_fit(spark):
    entries = [(1, 0, "a", 10, AS_OF), (1, 1, "b", 10, AS_OF), (1, 2, "c", 10, AS_OF), (2, 0, "d", 10, AS_OF)]
    assert kept(decide(spark, entries, size_bytes=30)) == [(1, 1), (1, 2), (2, 0)]  # exactly at the limit
    decisions = decide(spark, entries, size_bytes=29)
    assert kept(decisions) == [(1, 2), (2, 0)] and decisions[(1, 1)] == "expired_size"
    assert kept(decide(spark, entries, size_bytes=0)) == []
    # the size window counts survivors only: superseded values take no room
    entries = [(1, 0, "a", 10, AS_OF), (1, 1, "b", 10, AS_OF), (1, 2, "b", 10, AS_OF)]
    assert kept(decide(spark, entries, size_bytes=20)) == [(1, 0), (1, 2)]


def test_tombstones_stay_for_their_grace_then_go(spark):
    grace = 3_600_000
    entries = [
        (1, 0, "a", 0, AS_OF - grace - 1),  # past its grace
        (1, 1, "b", 0, AS_OF - grace),  # exactly at the grace: still visible
        (1, 2, "c", 0, AS_OF),
    ]
    decisions = decide(spark, entries, grace_ms=grace)
    assert decisions[(1, 0)] == "tombstoned" and kept(decisions) == [(1, 1), (1, 2)]
    # grace 0 is Pulsar's behaviour: a tombstone never reaches the compacted ledger, however young
    assert kept(decide(spark, entries, grace_ms=0)) == []
    # a retained tombstone is still subject to the compacted retention time
    assert decide(spark, [(1, 0, "a", 0, AS_OF - 10)], grace_ms=grace, time_ms=5)[(1, 0)] == "expired_time"


def test_counts_reconcile(spark):
    entries = [(1, 0, "a", 5, AS_OF), (1, 1, "a", 0, AS_OF), (1, 2, None, 5, AS_OF), (1, 3, "b", 5, 0)]
    frame = spark.createDataFrame([(T, *e) for e in entries], ENTRY_COLUMNS)
    params = spark.createDataFrame([(T, 1000, -1, 0)], PARAMS)
    row = decision_counts(entry_decisions(frame, params, AS_OF, False)).first()
    assert (row.entriesRead, row.entriesKept, row.entriesSuperseded, row.entriesTombstoned) == (4, 0, 1, 1)
    assert (row.entriesKeylessDropped, row.entriesExpiredTime, row.entriesExpired) == (1, 1, 1)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("retain_null_key", [False, True])
@pytest.mark.parametrize("fold_rows", [1, plan._FOLD_ROWS], ids=["folded_per_part", "folded_once"])
def test_the_plans_winners_decide_what_every_entry_decided_on_random_topics(
    spark, seed, retain_null_key, fold_rows, monkeypatch
):
    """Many topics, keys repeated across ledgers, tombstones, keyless entries and all three retention limits; a
    topic's parts folded into its key groups as each arrives, or all at once."""
    monkeypatch.setattr(plan, "_FOLD_ROWS", fold_rows)
    rng = random.Random(seed)
    rows, params = [], []
    for t in range(4):
        topic = f"persistent://t/ns/random-{t}"
        params.append(
            (topic, rng.choice([-1, 50_000, 500_000]), rng.choice([-1, 0, 40, 400]), rng.choice([0, 60_000]))
        )
        for ledger in range(1, rng.randint(2, 5)):
            for entry in range(rng.randint(1, 40)):
                key = None if rng.random() < 0.1 else f"k{rng.randint(0, 12)}"
                size = 0 if rng.random() < 0.1 else rng.randint(1, 30)
                rows.append((topic, ledger, entry, key, size, AS_OF - rng.randint(0, 1_000_000)))
    decided = decide_both_ways(spark, rows, params, retain_null_key)
    assert {"kept", "superseded"} <= set(decided.values())


def test_positions_of_any_size_are_ordered_exactly(spark):
    """Ids past what a position packed into one long would hold (entry 2^24, ledger 2^40): a key's latest entry is
    still the last in position order."""
    big, ledger = 1 << 24, 1 << 40
    entries = [
        (1, big, "a", 5, AS_OF),
        (1, big - 1, "a", 6, AS_OF),
        (ledger, 0, "b", 5, AS_OF),
        (1, big + 1, "b", 7, AS_OF),
    ]
    decisions = decide(spark, entries)
    assert kept(decisions) == [(1, big), (ledger, 0)] and decisions[(1, big + 1)] == "superseded"


def _topic(name, threshold, **extra):
    row = dict(
        topic=f"persistent://t/ns/{name}",
        namespace="t/ns",
        tenant="t",
        isSystemTopic=False,
        version=1,
        producers=0,
        consumers=0,
        retentionTimeMs=-1,
        retentionSizeBytes=-1,
        retentionSource="test",
        retentionDescription="",
        messageTtlSeconds=0,
        messageTtlSource="",
        sizeQuotaLimitBytes=-1,
        sizeQuotaPolicy="",
        timeQuotaLimitSeconds=-1,
        timeQuotaPolicy="",
        policies="{}",
        compactionThresholdBytes=threshold,
        compactedRetentionTimeMs=-1,
        compactedRetentionSizeBytes=-1,
        compactedRetentionDescription="",
        tombstoneGraceMs=0,
    )
    row.update(extra)
    return row


def test_which_topics_are_compacted(spark):
    topics = contract_frame(
        spark,
        TOPICS,
        [
            _topic("over", 1000),
            _topic("equal", 1000),
            _topic("off", 0),
            _topic("named", 0),
            _topic("caught-up", 10),
            _topic("due", 0, compactedRetentionTimeMs=1000),
        ],
    )

    def ledger(name: str, size: int, min_ts: int) -> dict:
        return {
            "topic": f"persistent://t/ns/{name}",
            "ledgerId": 1,
            "entries": 10,
            "size": size,
            "minEntryTsMs": min_ts,
            "maxEntryTsMs": AS_OF,
            "entriesStored": True,
        }

    ledgers = contract_frame(
        spark,
        LEDGERS,
        [
            ledger(n, size, AS_OF - 5000)
            for n, size in [("over", 1001), ("equal", 1000), ("off", 5000), ("named", 10), ("caught-up", 100)]
        ]
        + [ledger("due", 100, AS_OF)],
    )
    cursors = contract_frame(
        spark,
        CURSORS,
        [
            {
                "topic": f"persistent://t/ns/{n}",
                "name": "__compaction",
                "durable": True,
                "markDeleteLedger": 1,
            }
            | {"markDeleteEntry": 9, "consumers": 0}
            for n in ("caught-up", "due")
        ],
    )

    def compacted_ledger(name: str, min_ts: int, compacted_at: int) -> dict:
        return {
            "topic": f"persistent://t/ns/{name}",
            "ledgerId": 5,
            "horizonLedger": 1,
            "horizonEntry": 9,
            "entries": 3,
            "size": 30,
            "minEntryTsMs": min_ts,
            "maxEntryTsMs": AS_OF,
            "tombstones": 0,
            "compactedAsOfMs": compacted_at,
        }

    compacted = contract_frame(
        spark,
        COMPACTED_LEDGERS,
        [compacted_ledger("caught-up", AS_OF, AS_OF), compacted_ledger("due", AS_OF - 2000, AS_OF - 10)],
    )
    rows = {
        r.topic.rsplit("/", 1)[1]: r
        for r in compaction_candidates(
            topics, ledgers, cursors, compacted, ["persistent://t/ns/named"], AS_OF
        ).collect()
    }
    assert {n: (r.decision, r.kind) for n, r in rows.items()} == {
        "over": ("compact", "threshold_exceeded"),  # backlog > threshold, strictly
        "equal": ("skip", "under_threshold"),
        "off": ("skip", "threshold_off"),
        "named": ("compact", "requested"),
        "caught-up": ("skip", "nothing_new"),
        "due": ("compact", "compacted_retention_due"),
    }
    assert rows["due"].readFromLedger == 1 and rows["due"].readFromEntry == 9
    assert (rows["over"].horizonLedger, rows["over"].horizonEntry) == (1, 9)


def test_the_summary_adds_up_its_groups():
    counts = {name: 0 for name in plan._SUMMED}
    groups = [
        {"namespace": "t/a", "kind": "requested", "decision": "compact", "topics": 2, "warnings": 1}
        | counts
        | {"entriesRead": 10, "entriesKept": 4, "keptBytes": 40},
        {"namespace": "t/b", "kind": "threshold_exceeded", "decision": "compact", "topics": 1, "warnings": 0}
        | counts
        | {"entriesRead": 5, "entriesKept": 5, "keptBytes": None},
        # Skipped topics have no counts (the left join leaves them null) but count by kind and warning.
        {"namespace": "t/a", "kind": "under_threshold", "decision": "skip", "topics": 3, "warnings": 2}
        | dict.fromkeys(plan._SUMMED),
    ]
    figures = plan.summary_figures(groups)
    assert figures["topicsToCompact"] == 3
    assert figures["topicsByKind"] == {"requested": 2, "threshold_exceeded": 1, "under_threshold": 3}
    assert figures["warnings"] == 3
    assert (figures["entriesRead"], figures["entriesKept"], figures["keptBytes"]) == (15, 9, 40)
    assert figures["perNamespace"] == {
        "t/a": {"topics": 2, "keptBytes": 40},
        "t/b": {"topics": 1, "keptBytes": 0},
    }
