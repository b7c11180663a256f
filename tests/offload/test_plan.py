"""The offload rule's edges (docs/semantics.md §9) on the planner's pure transforms, with
Pulsar's own expectations: OffloadPrefixTest#testAutoTriggerOffload and #multipleAutoTriggers (10-entry ledgers of
10-byte entries), the strict size and inclusive time boundaries, completed offloads counted but skipped, an
incomplete attempt retried, empty and unstored ledgers kept, no offloader, and the gate's independent derivation
agreeing with the planner on every case."""

from __future__ import annotations

import pytest

from housekeeping.engine.contract import LEDGERS, TOPICS
from spark_apps.offload.gate import selected_by_rule
from spark_apps.offload.plan import offload_decisions
from tests.conftest import contract_frame, topic_row

pytestmark = pytest.mark.spark

T = "persistent://t/ns/x"
AS_OF = 10_000_000
NONE = -1  # a threshold left unset resolves to -1 (disabled)


def snapshot(spark, ledgers, thresholds, offloader=True):
    """ledgers: (id, entries, size, closedAtMs|None, complete, attempted, stored); thresholds: (bytes, seconds)."""
    topic = topic_row(
        T,
        offloader=offloader,
        offloadThresholdBytes=thresholds[0],
        offloadThresholdSeconds=thresholds[1],
    )
    rows = [
        {
            "topic": T,
            "ledgerId": lid,
            "entries": n,
            "size": size,
            "closedAtMs": closed,
            "entriesStored": stored,
            "offloadComplete": complete,
            "offloadAttempted": attempted or complete,
        }
        for lid, n, size, closed, complete, attempted, stored in ledgers
    ]
    return {"topics": contract_frame(spark, TOPICS, [topic]), "ledgers": contract_frame(spark, LEDGERS, rows)}


def ledgers_of(count: int, current_entries: int = 5) -> list[tuple]:
    """``count`` ledgers: closed 10-entry 100-byte ledgers closed a minute apart, the last one current."""
    closed = [(i, 10, 100, AS_OF - (count - i) * 60_000, False, False, True) for i in range(1, count)]
    return [*closed, (count, current_entries, current_entries * 10, None, False, False, True)]


def offloaded(spark, ledgers, thresholds, **kwargs) -> list[int]:
    decisions = offload_decisions(snapshot(spark, ledgers, thresholds, **kwargs), {"asOfMs": AS_OF})
    planned = sorted(r["ledgerId"] for r in decisions.where("decision = 'offload'").collect())
    frames = snapshot(spark, ledgers, thresholds, **kwargs)
    rule = selected_by_rule(frames["topics"], frames["ledgers"], AS_OF)
    derived = sorted(r["ledgerId"] for r in rule.where("selected").collect())
    assert planned == derived, "the gate's derivation disagrees with the planner"
    return planned


@pytest.mark.parametrize(
    "thresholds, expected",
    [
        ((100, NONE), [1]),
        ((NONE, 0), [1, 2]),
        ((NONE, NONE), []),
        ((1, 1), [1, 2]),
        ((100, 2**62), [1]),
    ],
)
def test_auto_trigger_offload_as_pulsar(spark, thresholds, expected):
    """testAutoTriggerOffload: L1 100 B, L2 100 B, L3 current 50 B (its bytes never counted)."""
    assert offloaded(spark, ledgers_of(3), thresholds) == expected


@pytest.mark.parametrize(
    "thresholds, expected", [((100, NONE), [1, 2, 3]), ((NONE, 0), [1, 2, 3, 4]), ((1, 1), [1, 2, 3, 4])]
)
def test_multiple_auto_triggers_as_pulsar(spark, thresholds, expected):
    """multipleAutoTriggers: five ledgers, L5 current."""
    assert offloaded(spark, ledgers_of(5), thresholds) == expected


def test_the_size_rule_is_strict_and_the_time_rule_inclusive(spark):
    # Closed sizes newest first: L2 100 -> 100, L1 -> 200. Threshold 200: 200 > 200 is false.
    assert offloaded(spark, ledgers_of(3), (200, NONE)) == []
    assert offloaded(spark, ledgers_of(3), (199, NONE)) == [1]
    # L1 closed 120 s before as-of, L2 60 s: a 60 s threshold takes both (>=), 61 s only L1.
    assert offloaded(spark, ledgers_of(3), (NONE, 60)) == [1, 2]
    assert offloaded(spark, ledgers_of(3), (NONE, 61)) == [1]


def test_a_completed_offload_counts_in_the_sum_but_is_not_offloaded_again(spark):
    ledgers = ledgers_of(4)
    ledgers[2] = (3, 10, 100, ledgers[2][3], True, True, True)  # L3 (newest closed) offloaded already
    assert offloaded(spark, ledgers, (150, NONE)) == [1, 2]


def test_an_incomplete_attempt_is_offloaded_again_and_says_so(spark):
    ledgers = ledgers_of(3)
    ledgers[0] = (1, 10, 100, ledgers[0][3], False, True, True)
    decisions = offload_decisions(snapshot(spark, ledgers, (100, NONE)), {"asOfMs": AS_OF})
    (first,) = decisions.where("ledgerId = 1").collect()
    assert first["decision"] == "offload" and "retries an attempt that did not complete" in first["reason"]


def test_empty_and_unstored_ledgers_stay_local_with_their_reason(spark):
    ledgers = ledgers_of(4)
    ledgers[0] = (1, 0, 0, ledgers[0][3], False, False, True)
    ledgers[1] = (2, 10, 100, ledgers[1][3], False, False, False)
    decisions = offload_decisions(snapshot(spark, ledgers, (NONE, 0)), {"asOfMs": AS_OF})
    kinds = {r["ledgerId"]: r["kind"] for r in decisions.collect()}
    assert kinds == {1: "empty_ledger", 2: "entries_not_stored", 3: "time_threshold", 4: "current_ledger"}
    assert offloaded(spark, ledgers, (NONE, 0)) == [3]


def test_without_an_offloader_nothing_is_offloaded_and_the_reason_says_why(spark):
    decisions = offload_decisions(snapshot(spark, ledgers_of(3), (0, 0), offloader=False), {"asOfMs": AS_OF})
    assert {r["kind"] for r in decisions.collect()} == {"no_offloader"}
    assert "HOUSEKEEPING_OFFLOAD_URL" in decisions.first()["reason"]
    assert offloaded(spark, ledgers_of(3), (0, 0), offloader=False) == []
