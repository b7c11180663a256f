"""The expiry rule's edges (docs/semantics.md §4) on the per-topic rule the planner runs topic by topic
(``spark_apps.expiry.rule``), called alone with entries of the test's own: no Spark. Which ledgers the search reads
is part of the rule (only the stop ledgers), so the reader records them. The planner's one pass writing these rows
is checked by the plan fingerprints and tests/expiry/test_plan.py."""

from __future__ import annotations

import pytest

from housekeeping.engine.contract import CURSORS, LEDGERS
from housekeeping.engine.documents import RunInfo
from spark_apps.expiry.rule import plan_topic
from spark_apps.shared.rows import java_fixed, utc_millis
from tests.conftest import NEVER_OFFLOADED, topic_row

pytestmark = pytest.mark.unit

T = "persistent://t/ns/x"
AS_OF = 10_000_000_000
TTL = 3600
CUTOFF = AS_OF - TTL * 1000
INFO = RunInfo(
    run_id="r",
    mechanism="expiry",
    as_of_ms=AS_OF,
    broker={"housekeepingExpiryGuardMinimumBacklog": 1000, "housekeepingExpiryGuardAgeFactor": 1.5},
)


class Entries:
    """A reader over each ledger's entry timestamps that records what it read."""

    def __init__(self, ledgers: dict[int, list[int]]) -> None:
        self.ledgers, self.read = ledgers, []

    def __call__(self, ledger_id: int, payload_bytes: int) -> list[dict]:
        self.read.append(ledger_id)
        return [
            {"entryId": i, "publishTime": ts, "entryTs": ts} for i, ts in enumerate(self.ledgers[ledger_id])
        ]


def ledger(lid: int, stamps: list[int], closed: int | None, stored: bool = True) -> dict:
    return LEDGERS.row(
        {
            **NEVER_OFFLOADED["ledgers"],
            "topic": T,
            "ledgerId": lid,
            "entries": len(stamps),
            "size": 10 * len(stamps),
            "closedAtMs": closed,
            "minEntryTsMs": min(stamps, default=None),
            "maxEntryTsMs": max(stamps, default=None),
            "entriesStored": stored,
        }
    )


def cursor(name: str, mark_delete: str, consumers: int = 0, durable: bool = True) -> dict:
    ledger_id, entry_id = (int(p) for p in mark_delete.split(":"))
    return CURSORS.row(
        {
            "topic": T,
            "name": name,
            "durable": durable,
            "markDeleteLedger": ledger_id,
            "markDeleteEntry": entry_id,
            "consumers": consumers,
        }
    )


def decide(stamps: dict[int, tuple[list[int], int | None]], cursors: list[dict], **topic_columns):
    """stamps: ledger id -> (entry timestamps, closedAtMs|None). The subscriptions by name, and the reader."""
    entries = Entries({lid: ts for lid, (ts, _) in stamps.items()})
    ledgers = [ledger(lid, ts, closed) for lid, (ts, closed) in stamps.items()]
    topic = topic_row(T, **({"messageTtlSeconds": TTL, "messageTtlSource": "namespace"} | topic_columns))
    plan = plan_topic(topic, ledgers, cursors, INFO, entries)
    return {s["subscription"]: s for s in plan.subscriptions}, plan, entries


def test_an_entry_at_the_cutoff_is_not_expired_and_stops_the_cursor():
    """Strict: ``ts < cutoff`` (MessageImpl#isEntryExpired); the entry after the stop is not looked at."""
    subs, plan, entries = decide(
        {1: ([CUTOFF - 2, CUTOFF - 1, CUTOFF, CUTOFF - 5], None)}, [cursor("s", "1:-1")]
    )
    s = subs["s"]
    assert (s["decision"], s["kind"], s["to"], s["entriesExpired"]) == ("move", "expired", "1:1", 2)
    assert s["bytesExpired"] == 20 and s["backlogBytesAfter"] == 20
    assert s["oldestRemainingTsMs"] == CUTOFF
    assert f"entry 1:2 has timestamp {CUTOFF} >= cutoff {CUTOFF} (not expired)" in s["reason"]
    assert s["reason"].startswith(
        f"TTL {TTL} s (namespace), cutoff {utc_millis(CUTOFF)}: 2 entries after mark-delete"
    )
    assert entries.read == [1]
    assert plan.actions == [
        {
            "topic": T,
            "action": "move_cursor",
            "subscription": "s",
            "from": "1:-1",
            "to": "1:1",
            "bytes": 20,
            "reason": s["reason"],
        }
    ]


def test_ledgers_closed_before_the_cutoff_expire_whole_without_a_read():
    subs, _, entries = decide(
        {1: ([CUTOFF - 9] * 3, CUTOFF - 5), 2: ([CUTOFF - 4] * 2, CUTOFF - 1), 3: ([AS_OF - 10], None)},
        [cursor("s", "1:0")],
    )
    s = subs["s"]
    assert (s["to"], s["entriesExpired"]) == ("2:1", 4)
    assert f"ledger 3: oldest entry timestamp {AS_OF - 10} >= cutoff {CUTOFF}" in s["reason"]
    assert entries.read == []


def test_the_whole_backlog_expires_to_the_last_entry():
    subs, _, entries = decide(
        {1: ([CUTOFF - 9] * 3, CUTOFF - 5), 2: ([CUTOFF - 4] * 2, None)}, [cursor("s", "1:-1")]
    )
    assert (subs["s"]["to"], subs["s"]["backlogBytesAfter"]) == ("2:1", 0)
    assert "every entry after the mark-delete is expired" in subs["s"]["reason"]
    assert subs["s"]["oldestRemainingTsMs"] is None and entries.read == []


def test_an_expired_rest_of_the_mark_delete_ledger_reads_the_next_straddling_ledger():
    """The mark-delete ledger straddles the cutoff but its unacknowledged part is expired: the search goes on into
    the next ledger, read too, and stops at its first unexpired entry."""
    subs, _, entries = decide(
        {1: ([CUTOFF - 9, CUTOFF + 9, CUTOFF - 8], CUTOFF + 10), 2: ([CUTOFF - 7, CUTOFF + 1], None)},
        [cursor("s", "1:1")],
    )
    assert (subs["s"]["to"], subs["s"]["entriesExpired"]) == ("2:0", 2)
    assert entries.read == [1, 2]


def test_unknown_timestamps_stop_the_search_and_say_why():
    stamps = {1: ([CUTOFF - 9] * 2, None)}
    entries = Entries({1: stamps[1][0]})
    unstored = [ledger(1, stamps[1][0], None, stored=False) | {"minEntryTsMs": None, "maxEntryTsMs": None}]
    topic = topic_row(T, messageTtlSeconds=TTL, messageTtlSource="namespace")
    (s,) = plan_topic(topic, unstored, [cursor("s", "1:-1")], INFO, entries).subscriptions
    assert (s["decision"], s["kind"]) == ("keep", "nothing_expired")
    assert (
        "ledger 1: entry timestamps unknown (entries not stored) and not closed before the cutoff"
        in s["reason"]
    )
    assert entries.read == []


def test_the_connected_consumer_guard_reads_the_oldest_unacknowledged_entry():
    """Pulsar's isOldestMessageExpired: a small backlog with consumers expires only when the oldest unacknowledged
    entry is older than 1.5 x TTL; the factor is written as Java's %.1f writes it."""
    young = CUTOFF - 10  # expired, but not older than 1.5 x TTL
    subs, plan, entries = decide({1: ([young, young], None)}, [cursor("s", "1:-1", consumers=2)])
    s = subs["s"]
    assert (s["decision"], s["kind"], s["entriesExpired"]) == ("keep", "guard_consumers_connected", 0)
    assert s["reason"] == (
        f"2 consumer(s) connected, backlog 2 < 1000 entries and the oldest unacknowledged entry (publish time {young}) "
        "is not older than 1.5 x TTL"
    )
    assert plan.blockers[0]["kind"] == "guard_consumers_connected" and entries.read == [1]
    old = AS_OF - int(1.5 * TTL * 1000) - 1
    subs, _, _ = decide({1: ([old, young], None)}, [cursor("s", "1:-1", consumers=2)])
    assert subs["s"]["kind"] == "expired" and subs["s"]["to"] == "1:1"


def test_protected_subscriptions_and_topics_are_kept_with_their_kind():
    stamps = {1: ([CUTOFF - 9] * 2, CUTOFF - 5), 2: ([AS_OF], None)}
    subs, plan, _ = decide(
        stamps,
        [cursor("__compaction", "1:-1"), cursor("caught-up", "2:0"), cursor("reader", "1:-1", durable=False)],
    )
    assert subs["__compaction"]["kind"] == "compaction_subscription"
    assert subs["caught-up"]["kind"] == "no_backlog" and "reader" not in subs
    assert [b["subscription"] for b in plan.blockers] == ["__compaction"]
    off, _, _ = decide(stamps, [cursor("s", "1:-1")], messageTtlSeconds=0)
    assert off["s"]["kind"] == "ttl_disabled" and off["s"]["reason"] == "TTL is 0 (off) (namespace)"
    system, _, _ = decide(stamps, [cursor("s", "1:-1")], isSystemTopic=True)
    assert system["s"]["kind"] == "system_topic"


def test_a_held_topic_keeps_its_cursors_and_the_reason_names_the_hold():
    subs, plan, _ = decide(
        {1: ([CUTOFF - 9] * 2, CUTOFF - 5), 2: ([AS_OF], None)}, [cursor("s", "1:-1")], heldBy="hold x"
    )
    s = subs["s"]
    assert (s["decision"], s["kind"], s["to"], s["entriesExpired"], s["bytesExpired"]) == (
        "keep",
        "held",
        None,
        0,
        0,
    )
    assert s["backlogBytesAfter"] == s["backlogBytes"] and s["reason"].startswith(
        "hold x; without the hold: move: "
    )
    assert plan.actions == []


def test_a_topic_without_ledgers_has_no_subscription_row():
    topic = topic_row(T, messageTtlSeconds=TTL, messageTtlSource="namespace")
    assert plan_topic(topic, [], [cursor("s", "1:-1")], INFO, Entries({})).subscriptions == []


def test_java_formats():
    assert [java_fixed(v, 1) for v in (1.5, 0.25, 2.0, 0.05)] == ["1.5", "0.3", "2.0", "0.1"]
    assert utc_millis(1_793_577_600_123) == "2026-11-02T00:00:00.123Z"
