"""The offload rule's edges (docs/semantics.md §9) on the per-topic rule the planner runs topic by topic
(``spark_apps.offload.rule``), called alone: no Spark. With Pulsar's own expectations:
OffloadPrefixTest#testAutoTriggerOffload and #multipleAutoTriggers (10-entry ledgers of 10-byte entries), the strict
size and inclusive time boundaries, completed offloads counted but skipped, an incomplete attempt retried, empty and
unstored ledgers kept, no offloader, the thresholds saturating as Java's millisecond conversion does, and the gate's
independent derivation (``spark_apps.offload.checks``) agreeing with the planner on every case."""

from __future__ import annotations

import pytest

from housekeeping.engine.contract import LEDGERS
from spark_apps.offload.checks import check_topic, threshold_selection
from spark_apps.offload.rule import local_bytes_left, plan_topic
from tests.conftest import topic_row

pytestmark = pytest.mark.unit

T = "persistent://t/ns/x"
AS_OF = 10_000_000
NONE = -1  # a threshold left unset resolves to -1 (disabled)


def topic(thresholds, offloader=True, **columns) -> dict:
    return topic_row(
        T,
        offloader=offloader,
        offloadThresholdBytes=thresholds[0],
        offloadThresholdSeconds=thresholds[1],
        **columns,
    )


def ledger_rows(ledgers) -> list[dict]:
    """ledgers: (id, entries, size, closedAtMs|None, complete, attempted, stored)."""
    return [
        LEDGERS.row(
            {
                "topic": T,
                "ledgerId": lid,
                "entries": n,
                "size": size,
                "closedAtMs": closed,
                "entriesStored": stored,
                "offloadComplete": complete,
                "offloadAttempted": attempted or complete,
                "localDeleted": False,
            }
        )
        for lid, n, size, closed, complete, attempted, stored in ledgers
    ]


def ledgers_of(count: int, current_entries: int = 5) -> list[tuple]:
    """``count`` ledgers: closed 10-entry 100-byte ledgers closed a minute apart, the last one current."""
    closed = [(i, 10, 100, AS_OF - (count - i) * 60_000, False, False, True) for i in range(1, count)]
    return [*closed, (count, current_entries, current_entries * 10, None, False, False, True)]


def offloaded(ledgers, thresholds, **kwargs) -> list[int]:
    """The ledgers the planner offloads, after checking the gate's derivation selects the same and passes them."""
    plan = plan_topic(topic(thresholds, **kwargs), ledger_rows(ledgers), AS_OF)
    planned = [d["ledgerId"] for d in plan.decisions if d["decision"] == "offload"]
    assert [a["ledgerId"] for a in plan.actions] == planned
    derived = threshold_selection(topic(thresholds, **kwargs), ledger_rows(ledgers), AS_OF)
    assert planned == sorted(i for i, r in derived.items() if r["selected"]), (
        "the gate's derivation disagrees"
    )
    checked = check_topic(topic(thresholds, **kwargs), ledger_rows(ledgers), plan.actions, AS_OF)
    assert all(all(v for k, v in r.items() if k not in ("topic", "ledgerId")) for r in checked["offloads"])
    assert all(r["planned"] for r in checked["selection"])
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
def test_auto_trigger_offload_as_pulsar(thresholds, expected):
    """testAutoTriggerOffload: L1 100 B, L2 100 B, L3 current 50 B (its bytes never counted)."""
    assert offloaded(ledgers_of(3), thresholds) == expected


@pytest.mark.parametrize(
    "thresholds, expected", [((100, NONE), [1, 2, 3]), ((NONE, 0), [1, 2, 3, 4]), ((1, 1), [1, 2, 3, 4])]
)
def test_multiple_auto_triggers_as_pulsar(thresholds, expected):
    """multipleAutoTriggers: five ledgers, L5 current."""
    assert offloaded(ledgers_of(5), thresholds) == expected


def test_the_size_rule_is_strict_and_the_time_rule_inclusive():
    # Closed sizes newest first: L2 100 -> 100, L1 -> 200. Threshold 200: 200 > 200 is false.
    assert offloaded(ledgers_of(3), (200, NONE)) == []
    assert offloaded(ledgers_of(3), (199, NONE)) == [1]
    # L1 closed 120 s before as-of, L2 60 s: a 60 s threshold takes both (>=), 61 s only L1.
    assert offloaded(ledgers_of(3), (NONE, 60)) == [1, 2]
    assert offloaded(ledgers_of(3), (NONE, 61)) == [1]


def test_a_time_threshold_beyond_a_long_of_milliseconds_never_selects():
    """Java's TimeUnit.SECONDS.toMillis saturates at Long.MAX_VALUE: no ledger is that old."""
    assert offloaded(ledgers_of(3), (NONE, 2**62)) == []


def test_a_completed_offload_counts_in_the_sum_but_is_not_offloaded_again():
    ledgers = ledgers_of(4)
    ledgers[2] = (3, 10, 100, ledgers[2][3], True, True, True)  # L3 (newest closed) offloaded already
    assert offloaded(ledgers, (150, NONE)) == [1, 2]
    decisions = plan_topic(topic((150, NONE)), ledger_rows(ledgers), AS_OF).decisions
    assert [d["sizeSummed"] for d in decisions] == [300, 200, 100, None]
    assert decisions[2]["kind"] == "already_offloaded"


def test_an_incomplete_attempt_is_offloaded_again_and_says_so():
    ledgers = ledgers_of(3)
    ledgers[0] = (1, 10, 100, ledgers[0][3], False, True, True)
    plan = plan_topic(topic((100, NONE)), ledger_rows(ledgers), AS_OF)
    first = plan.decisions[0]
    assert first["decision"] == "offload" and "retries an attempt that did not complete" in first["reason"]
    assert first["reason"].startswith(
        "the newest closed ledgers down to this one hold 200 bytes > offload threshold"
    )


def test_empty_and_unstored_ledgers_stay_local_with_their_reason_and_a_blocker():
    ledgers = ledgers_of(4)
    ledgers[0] = (1, 0, 0, ledgers[0][3], False, False, True)
    ledgers[1] = (2, 10, 100, ledgers[1][3], False, False, False)
    plan = plan_topic(topic((NONE, 0)), ledger_rows(ledgers), AS_OF)
    kinds = {d["ledgerId"]: d["kind"] for d in plan.decisions}
    assert kinds == {1: "empty_ledger", 2: "entries_not_stored", 3: "time_threshold", 4: "current_ledger"}
    assert [(b["kind"], b["ledgers"], b["bytes"]) for b in plan.blockers] == [
        ("empty_ledger", 1, 0),
        ("entries_not_stored", 1, 100),
    ]
    assert offloaded(ledgers, (NONE, 0)) == [3]


def test_without_an_offloader_nothing_is_offloaded_and_the_reason_says_why():
    plan = plan_topic(topic((0, 0), offloader=False), ledger_rows(ledgers_of(3)), AS_OF)
    assert {d["kind"] for d in plan.decisions} == {"no_offloader"}
    assert "HOUSEKEEPING_OFFLOAD_URL" in plan.decisions[0]["reason"]
    assert [(b["kind"], b["ledgers"], b["detail"]) for b in plan.blockers] == [
        ("no_offloader", 3, plan.decisions[0]["reason"])
    ]
    assert offloaded(ledgers_of(3), (0, 0), offloader=False) == []


def test_the_gate_fails_an_offload_the_rule_does_not_select():
    """A planned offload of the current ledger, of a ledger under the thresholds, and of one with the wrong size."""
    rows = ledger_rows(ledgers_of(3))
    actions = [
        {"topic": T, "action": "offload_ledger", "ledgerId": 3, "bytes": 50},
        {"topic": T, "action": "offload_ledger", "ledgerId": 2, "bytes": 100},
        {"topic": T, "action": "offload_ledger", "ledgerId": 1, "bytes": 99},
    ]
    checked = {r["ledgerId"]: r for r in check_topic(topic((100, NONE)), rows, actions, AS_OF)["offloads"]}
    assert not checked[3]["closed_and_not_current"] and not checked[3]["threshold_selects_it"]
    assert checked[2]["closed_and_not_current"] and not checked[2]["threshold_selects_it"]
    assert not checked[1]["bytes_match_snapshot"] and checked[1]["threshold_selects_it"]


def test_the_gate_finds_a_selected_ledger_the_plan_left_out():
    selection = check_topic(topic((NONE, 0)), ledger_rows(ledgers_of(3)), [], AS_OF)["selection"]
    assert [(r["ledgerId"], r["planned"]) for r in selection] == [(1, False), (2, False)]


def test_the_local_bytes_left_count_copies_the_lag_lets_go():
    """Offloaded after this plan (L1 already, L2 now): their local copies go once the lag passes; never with a lag
    of -1."""
    ledgers = ledgers_of(4)
    ledgers[0] = (1, 10, 100, ledgers[0][3], True, True, True)
    rows = ledger_rows(ledgers)
    with_lag = topic((NONE, 90), offloadDeletionLagMs=0)
    assert (
        local_bytes_left(with_lag, rows, plan_topic(with_lag, rows, AS_OF)) == 100 + 50
    )  # L3 and the current ledger
    never = topic((NONE, 90), offloadDeletionLagMs=-1)
    assert local_bytes_left(never, rows, plan_topic(never, rows, AS_OF)) == 3 * 100 + 50
