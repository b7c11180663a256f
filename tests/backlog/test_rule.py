"""Backlog quota's rows of one topic (``spark_apps.backlog.rule``), called alone with entries of the test's own:
no Spark. The rules themselves are tests/backlog/test_plan.py; here what the planner's one pass writes of them: the
subscription rows and actions of an eviction, the quota-state flag, a held topic, and precise mode's entry reads
and TTL search. The pass writing these rows is checked by the plan fingerprints and the scenarios."""

from __future__ import annotations

import pytest

from housekeeping.engine.documents import RunInfo
from spark_apps.backlog.rule import plan_topic
from tests.conftest import topic_row
from tests.expiry.test_rule import Entries, cursor, ledger

pytestmark = pytest.mark.unit

MIN = 60_000
AS_OF = 1_000 * MIN
T = "persistent://t/ns/x"


def info(precise: bool = False, enabled: bool = True) -> RunInfo:
    return RunInfo(
        run_id="r",
        mechanism="backlog",
        as_of_ms=AS_OF,
        broker={"preciseTimeBasedBacklogQuotaCheck": precise, "backlogQuotaCheckEnabled": enabled},
    )


def ledgers() -> tuple[list[dict], Entries]:
    """Ledgers 1..4 of 10 entries (100 B) closed a minute apart 20 minutes before as-of, 5 open."""
    stamps = {i: [AS_OF - (30 - i) * MIN + e for e in range(10)] for i in range(1, 5)} | {5: [AS_OF - MIN]}
    rows = [ledger(i, ts, AS_OF - (20 - i) * MIN if i < 5 else None) for i, ts in stamps.items()]
    return rows, Entries(stamps)


def quota_topic(**columns) -> dict:
    defaults = {
        "sizeQuotaLimitBytes": -1,
        "sizeQuotaPolicy": "producer_request_hold",
        "timeQuotaLimitSeconds": -1,
        "timeQuotaPolicy": "producer_request_hold",
    }
    return topic_row(T, **(defaults | columns))


def test_a_size_eviction_moves_the_slowest_cursor_and_says_how_many_steps():
    rows, entries = ledgers()
    plan = plan_topic(
        quota_topic(sizeQuotaLimitBytes=200, sizeQuotaPolicy="consumer_backlog_eviction"),
        rows,
        [cursor("slow", "1:-1"), cursor("__compaction", "4:9")],
        [],
        info(),
        entries,
    )
    subs = {s["subscription"]: s for s in plan.subscriptions}
    assert subs["slow"]["decision"] == "move" and subs["slow"]["kind"] == "evicted_destination_storage"
    assert (
        subs["slow"]["reason"]
        == f"destination_storage eviction: {len(plan.steps)} loop step(s), see plan/eviction_steps"
    )
    assert subs["slow"]["to"] == f"{plan.steps[-1]['toLedger']}:{plan.steps[-1]['toEntry']}"
    assert subs["__compaction"]["kind"] == "compaction_subscription"
    assert [s["step"] for s in plan.steps] == list(range(1, len(plan.steps) + 1))
    (move,) = [a for a in plan.actions if a["action"] == "move_cursor"]
    assert (move["quotaType"], move["policy"], move["bytes"]) == (
        "destination_storage",
        "consumer_backlog_eviction",
        subs["slow"]["bytesEvicted"],
    )
    assert plan.quota["handled"] == "destination_storage" and plan.quota["sizeExceeded"] is True
    assert entries.read == []


def test_a_producer_policy_flags_the_quota_state_and_moves_nothing():
    rows, entries = ledgers()
    plan = plan_topic(quota_topic(sizeQuotaLimitBytes=200), rows, [cursor("s", "1:-1")], [], info(), entries)
    (flag,) = plan.actions
    assert (flag["action"], flag["from"], flag["to"], flag["exceededSinceMs"]) == (
        "flag_backlog_quota",
        "clear",
        "exceeded",
        AS_OF,
    )
    assert flag["reason"] == (
        f"destination_storage quota exceeded: measured {plan.quota['backlogBytes']} >= limit 200 "
        "(producer_request_hold); producers are refused while exceeded"
    )
    assert plan.subscriptions[0]["kind"] == "not_evicted"


def test_a_held_topic_keeps_its_cursors_and_leaves_out_its_steps_but_flags_its_quota():
    rows, entries = ledgers()
    plan = plan_topic(
        quota_topic(sizeQuotaLimitBytes=200, sizeQuotaPolicy="consumer_backlog_eviction", heldBy="hold h"),
        rows,
        [cursor("s", "1:-1")],
        [],
        info(),
        entries,
    )
    (s,) = plan.subscriptions
    assert (s["decision"], s["kind"], s["entriesEvicted"]) == ("keep", "held", 0)
    assert plan.steps == [] and plan.actions == []


def test_precise_mode_reads_the_slowest_first_unacknowledged_entry_and_runs_the_ttl_search():
    """Time limit 15 min: the oldest unacknowledged entry (1:0, 29 min old) exceeds it; each cursor moves past
    the entries older than 0.9 x 15 min."""
    rows, entries = ledgers()
    plan = plan_topic(
        quota_topic(timeQuotaLimitSeconds=900, timeQuotaPolicy="consumer_backlog_eviction"),
        rows,
        [cursor("a", "1:-1"), cursor("b", "2:4")],
        [],
        info(precise=True),
        entries,
    )
    assert plan.quota["oldestBacklogTsMs"] == AS_OF - 29 * MIN and plan.quota["timeExceeded"] is True
    subs = {s["subscription"]: s for s in plan.subscriptions}
    # Ledgers 1..4 closed 19..16 min ago, before the cutoff (13.5 min): wholly expired, no read needed.
    assert subs["a"]["to"] == subs["b"]["to"] == "4:9"
    assert subs["a"]["reason"].startswith(
        "precise message_age eviction (TTL search with ttl = 0.9 x limit): "
    )
    assert entries.read == [1]  # only the slowest cursor's first unacknowledged entry


def test_precise_time_eviction_moves_durable_subscriptions_and_never_a_reader():
    """A deliberate difference (docs/semantics.md §11): Pulsar's precise eviction expires every subscription, readers
    included; here a reader keeps its position (it is never counted in the backlog either)."""
    rows, entries = ledgers()
    plan = plan_topic(
        quota_topic(timeQuotaLimitSeconds=900, timeQuotaPolicy="consumer_backlog_eviction"),
        rows,
        [cursor("a", "1:-1"), cursor("reader-1", "1:-1", durable=False)],
        [],
        info(precise=True),
        entries,
    )
    moved = {a["subscription"]: a["to"] for a in plan.actions if a["action"] == "move_cursor"}
    assert moved == {"a": "4:9"}
    assert [s["subscription"] for s in plan.subscriptions] == ["a"]


def test_with_the_check_switched_off_the_quota_is_flagged_and_no_cursor_moves():
    rows, entries = ledgers()
    hold = plan_topic(
        quota_topic(sizeQuotaLimitBytes=200), rows, [cursor("s", "1:-1")], [], info(enabled=False), entries
    )
    assert [(a["action"], a["to"]) for a in hold.actions] == [("flag_backlog_quota", "exceeded")]
    evicting = plan_topic(
        quota_topic(sizeQuotaLimitBytes=200, sizeQuotaPolicy="consumer_backlog_eviction"),
        rows,
        [cursor("s", "1:-1")],
        [],
        info(enabled=False),
        entries,
    )
    assert evicting.actions == [] and evicting.steps == [] and evicting.quota["handled"] is None
    assert evicting.subscriptions[0]["kind"] == "not_evicted"
