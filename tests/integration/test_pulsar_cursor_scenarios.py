"""Pulsar's own message-expiry and backlog-quota test scenarios through the command-line contract:
load -> `housekeeping plan expiry|backlog --format json` -> `apply` -> `inspect`.

Sources (apache/pulsar, pulsar-broker/src/test/java/org/apache/pulsar/broker/service/):
PersistentMessageFinderTest (testPersistentMessageFinder, testMessageExpiryWithTimestampNonRecoverableException)
and BacklogQuotaManagerTest (testConsumerBacklogEvictionTimeQuota, ...TimeQuotaPrecise, ...SizeQuota,
...WithAckSizeQuota, ...WithAckTimeQuota, testBacklogQuotaWithReader, testProducerExceptionAndThenUnblockSizeQuota).
The Pulsar tests sleep in wall-clock time; here the same timeline is written into the entries and ledger close
times and "now" is the run's --as-of. MAX_ENTRIES_PER_LEDGER = 5 and 1024-byte payloads as there. Each scenario
is a topic (in its own namespace where its policy differs) of one store, shifted in time so that one run at one
as-of decides them all, as the DAG does for a whole store.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import iso, ledger_topic, run_cli, write_manifest

pytestmark = pytest.mark.spark

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
KIB = 1024
AS_OF = T0 + 3_600_000


def load(capsys, tmp_path, namespaces: dict, topics: dict, broker: dict | None = None) -> str:
    document = {"broker": broker or {}, "namespaces": namespaces, "topics": topics}
    store = str(tmp_path / "store")
    code, _, err = run_cli(
        capsys, "load", "--store", store, "--manifest", str(write_manifest(tmp_path, document))
    )
    assert code == 0, err
    return store


def plan(capsys, mechanism: str, store: str, as_of_ms: int) -> dict:
    code, out, err = run_cli(
        capsys, "plan", mechanism, "--store", store, "--as-of", iso(as_of_ms), "--format", "json"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["gate"]["success"], document["gate"]
    return document


def apply(capsys, mechanism: str, store: str, as_of_ms: int) -> None:
    code, _, err = run_cli(capsys, "apply", mechanism, "--store", store, "--as-of", iso(as_of_ms))
    assert code == 0, err


def moves(document: dict, topic: str) -> dict[str, str]:
    """subscription -> planned mark-delete position for one topic."""
    return {
        a["subscription"]: a["to"]
        for a in document["actions"]
        if a["action"] == "move_cursor" and a["topic"] == topic
    }


def backlog_after(ledger_sizes: list[tuple[int, int]], position: str) -> int:
    """Entries after a mark-delete position (ledger_sizes: (ledgerId, entries) oldest first)."""
    ledger_id, entry_id = (int(p) for p in position.split(":"))
    return sum(
        n if lid > ledger_id else (n - 1 - entry_id if lid == ledger_id else 0) for lid, n in ledger_sizes
    )


def producer_timeline(count: int, start_ms: int, per_ledger: int = 5, eager_rollover: bool = False):
    """`count` messages published 1 ms apart from `start_ms` into ledgers 1, 2, ... of `per_ledger` entries, each
    closed at its last entry's time; the last ledger is the current (open) one, an empty one when
    `eager_rollover` (Pulsar creates the next ledger as soon as one is full)."""
    stamps = [start_ms + i for i in range(count)]
    chunks = [stamps[i : i + per_ledger] for i in range(0, count, per_ledger)]
    ledgers = [(1 + i, chunk, chunk[-1]) for i, chunk in enumerate(chunks)]
    if eager_rollover:
        ledgers.append((1 + len(chunks), [], None))
    else:
        last_id, last_chunk, _ = ledgers[-1]
        ledgers[-1] = (last_id, last_chunk, None)
    return ledgers


def sizes(ledgers) -> list[tuple[int, int]]:
    return [(lid, len(stamps)) for lid, stamps, _ in ledgers]


def cursors(**positions: str) -> dict:
    """Durable subscriptions with no consumer connected (Pulsar's finder and monitor tests call the search
    directly, without the subscription's small-backlog guard)."""
    return {name: {"markDeletePosition": position} for name, position in positions.items()}


# ---------------------------------------------------------------- PersistentMessageFinderTest (TTL, section 2)

TTL_SECONDS = 1
CUTOFF = AS_OF - TTL_SECONDS * 1000

# testPersistentMessageFinder: 2 entries per ledger; "retained1..3" 100 ms apart, `timestamp` taken 100 ms after
# retained3, then "afterresetposition" and "not-read"; the cursor has mark-deleted the third entry (2:0).
# findMessages(t) is the TTL search with cutoff t: each case shifts the timeline so that t falls on CUTOFF.
FINDER_OFFSETS = [0, 100, 200, 310, 311]
FINDER_CASES = {
    # findMessages(beginTimestamp) -> nothing older than the cutoff
    "begin": (0, None),
    # findMessages(timestamp) -> newPosition (2:0), which is the mark-delete already: no change
    "timestamp": (300, None),
    # strict `ts < cutoff`: the entry published exactly at the cutoff is not expired ...
    "at-afterresetposition": (310, None),
    # ... one millisecond later it is (and ledger 2, closed at that entry, by the closure shortcut)
    "after-afterresetposition": (311, "2:1"),
    # findMessages(endTimestamp) -> lastPosition (3:0), in the open current ledger
    "end": (312, "3:0"),
}


def finder_topic(cutoff_offset: int) -> dict:
    start = CUTOFF - cutoff_offset
    stamps = [start + o for o in FINDER_OFFSETS]
    ledgers = [(1, stamps[0:2], stamps[1]), (2, stamps[2:4], stamps[3]), (3, stamps[4:], None)]
    return ledger_topic(ledgers, cursors(testPersistentMessageFinder="2:0"))


def test_message_expiry_scenarios(capsys, tmp_path):
    """PersistentMessageFinderTest through `plan expiry` / `apply expiry`, all cases in one run."""
    topics = {
        f"persistent://prop/ttl/finder-{name}": finder_topic(at) for name, (at, _) in FINDER_CASES.items()
    }
    # testMessageExpiryWithTimestampNonRecoverableException: 10 entries, 2 per ledger, 5 ledgers (the last is the
    # current one), TTL 1 s, all expired -> mark-delete at (last ledger, its entries - 1)
    all_expired = producer_timeline(10, CUTOFF - 10, per_ledger=2)
    topics["persistent://prop/ttl/nonrecoverable"] = ledger_topic(all_expired, cursors(c1="1:-1"))
    store = load(capsys, tmp_path, {"prop/ttl": {"message_ttl_in_seconds": TTL_SECONDS}}, topics)

    planned = plan(capsys, "expiry", store, AS_OF)
    for name, (_, expected) in FINDER_CASES.items():
        got = moves(planned, f"persistent://prop/ttl/finder-{name}").get("testPersistentMessageFinder")
        assert got == expected, name
    assert moves(planned, "persistent://prop/ttl/nonrecoverable") == {"c1": "5:1"}

    apply(capsys, "expiry", store, AS_OF)
    assert plan(capsys, "expiry", store, AS_OF)["actions"] == [], "a second run at the same as-of is a no-op"


# ---------------------------------------------------------------- BacklogQuotaManagerTest (section 3)

LIMIT_SECONDS = 3  # TIME_TO_CHECK_BACKLOG_QUOTA


def quota(kind: str, policy: str, *, size: int = -1, seconds: int = -1) -> dict:
    return {"backlog_quota_map": {kind: {"limitSize": size, "limitTime": seconds, "policy": policy}}}


BACKLOG_NAMESPACES = {
    "prop/time-quota": quota("message_age", "consumer_backlog_eviction", seconds=LIMIT_SECONDS),
    "prop/ack-time-quota": quota("message_age", "consumer_backlog_eviction", seconds=2 * LIMIT_SECONDS),
    "prop/size-quota": quota("destination_storage", "consumer_backlog_eviction", size=10 * KIB),
    "prop/reader": {
        "backlog_quota_map": {
            "destination_storage": {"limitSize": 10 * KIB, "limitTime": -1, "policy": "producer_exception"},
            "message_age": {"limitSize": -1, "limitTime": LIMIT_SECONDS, "policy": "producer_exception"},
        }
    },
    "prop/hold": quota("destination_storage", "producer_exception", size=10 * KIB),
}
# testConsumerBacklogEvictionTimeQuota: 14 messages, both subscriptions checked 2 x limit later
TIME_QUOTA = producer_timeline(14, AS_OF - 2 * LIMIT_SECONDS * 1000)
# the same topic when the first ledger (closed at its 5th entry) is exactly `limit` old: not exceeded yet
TIME_QUOTA_YOUNG = producer_timeline(14, AS_OF - 4 - LIMIT_SECONDS * 1000)
# every closed ledger older than the limit and the current ledger (4) empty after a roll
ROLLED = producer_timeline(15, AS_OF - 2 * LIMIT_SECONDS * 1000, eager_rollover=True)
# testConsumerBacklogEvictionWithAckTimeQuota: limit 6 s, checked just after ledger 2 (closed at entry 10) is 6 s old
ACK_TIME_QUOTA = producer_timeline(14, AS_OF - 9 - 2 * LIMIT_SECONDS * 1000 - 1)
# testConsumerBacklogEvictionSizeQuota / ...WithAckSizeQuota / testBacklogQuotaWithReader: 20 x 1 KiB
TWENTY = producer_timeline(20, AS_OF - 60_000, eager_rollover=True)


BACKLOG_TOPICS = {
    "persistent://prop/time-quota/topic3": ledger_topic(
        TIME_QUOTA, cursors(c1="1:-1", c2="1:-1"), entry_size=KIB
    ),
    "persistent://prop/time-quota/young": ledger_topic(
        TIME_QUOTA_YOUNG, cursors(c1="1:-1", c2="1:-1"), entry_size=KIB
    ),
    # a roll left the current ledger empty: eviction ends at (current, -1), before an unwritten ledger
    "persistent://prop/time-quota/rolled": ledger_topic(ROLLED, cursors(c1="1:-1"), entry_size=KIB),
    "persistent://prop/ack-time-quota/topic12": ledger_topic(
        ACK_TIME_QUOTA, cursors(c11="3:3", c21="1:-1"), entry_size=KIB
    ),
    "persistent://prop/size-quota/topic2": ledger_topic(
        TWENTY, cursors(c1="1:-1", c2="1:-1"), entry_size=KIB
    ),
    "persistent://prop/size-quota/topic11": ledger_topic(
        TWENTY, cursors(c11="4:4", c21="1:-1"), entry_size=KIB
    ),
    "persistent://prop/reader/topic1": ledger_topic(
        TWENTY,
        {"reader-1": {"markDeletePosition": "1:-1", "durable": False}},
        entry_size=KIB,
        producers=1,
    ),
    "persistent://prop/hold/quota": ledger_topic(TWENTY, cursors(c1="1:-1"), entry_size=KIB, producers=1),
}


def test_backlog_quota_scenarios(capsys, tmp_path):
    """BacklogQuotaManagerTest through `plan backlog` / `apply backlog`, all topics in one run."""
    store = load(capsys, tmp_path, BACKLOG_NAMESPACES, BACKLOG_TOPICS)
    planned = plan(capsys, "backlog", store, AS_OF)

    # time quota: both backlogs 14 -> 4, the open ledger is never evicted by the ledger-granular rule
    time_moves = moves(planned, "persistent://prop/time-quota/topic3")
    assert {name: backlog_after(sizes(TIME_QUOTA), to) for name, to in time_moves.items()} == {
        "c1": 4,
        "c2": 4,
    }
    # the race suite's finding: the gate once refused (4, -1) as past the last entry (3:4)
    assert moves(planned, "persistent://prop/time-quota/rolled") == {"c1": "4:-1"}
    assert not [a for a in planned["actions"] if a["topic"].endswith("/young")], (
        "exceeded is `now > ts + limit`"
    )
    # with ack: c11 acknowledged everything and is left alone; c21 goes down to the open ledger's 4
    ack_moves = moves(planned, "persistent://prop/ack-time-quota/topic12")
    assert list(ack_moves) == ["c21"] and backlog_after(sizes(ACK_TIME_QUOTA), ack_moves["c21"]) == 4
    # size quota: every durable backlog ends below 10 KiB; a subscription with no backlog is not touched
    for topic, untouched in (("topic2", None), ("topic11", "c11")):
        name = f"persistent://prop/size-quota/{topic}"
        start = {sub: body["markDeletePosition"] for sub, body in BACKLOG_TOPICS[name]["cursors"].items()}
        final = {**start, **moves(planned, name)}
        assert all(backlog_after(sizes(TWENTY), to) * KIB < 10 * KIB for to in final.values()), (topic, final)
        assert untouched is None or untouched not in moves(planned, name)
    # reader: no durable subscription, so backlog 0: nothing exceeded, nothing moved
    assert not [a for a in planned["actions"] if "/reader/" in a["topic"]]
    assert not [q for q in planned["summary"]["quotaStates"]["exceeded"] if "/reader/" in q]

    # testProducerExceptionAndThenUnblockSizeQuota: exceeded -> recorded for the write path ...
    hold = [a for a in planned["actions"] if a["topic"] == "persistent://prop/hold/quota"]
    assert [(a["action"], a["to"], a["exceeded"]) for a in hold] == [("flag_backlog_quota", "exceeded", True)]
    assert hold[0]["measuredValue"] >= hold[0]["limitValue"] == 10 * KIB
    apply(capsys, "backlog", store, AS_OF)
    assert quota_state(capsys, store, "persistent://prop/hold/quota") == (True, AS_OF)

    # ... then the consumer acknowledges everything (the ack path, simulated on the metadata) -> cleared
    from sqlalchemy import update

    from housekeeping import metadata_schema as t
    from housekeeping.store import Store

    with Store.open(store).engine.begin() as conn:
        conn.execute(
            update(t.cursors)
            .where(t.cursors.c.topic == "persistent://prop/hold/quota")
            .values(mark_delete_ledger=4, mark_delete_entry=4)
        )
    later = AS_OF + 60_000
    hold = [a for a in plan(capsys, "backlog", store, later)["actions"] if "/hold/" in a["topic"]]
    assert [(a["action"], a["to"], a["exceeded"]) for a in hold] == [("flag_backlog_quota", "clear", False)]
    apply(capsys, "backlog", store, later)
    assert quota_state(capsys, store, "persistent://prop/hold/quota") == (False, None)


def test_consumer_backlog_eviction_time_quota_precise(capsys, tmp_path):
    """preciseTimeBasedBacklogQuotaCheck: the TTL algorithm with ttl = (int)(0.9 x 3 s) = 2 s empties both
    backlogs (9 -> 0), including the entries in the open ledger."""
    ledgers = producer_timeline(9, AS_OF - 2 * LIMIT_SECONDS * 1000)
    store = load(
        capsys,
        tmp_path,
        {"prop/time-quota": BACKLOG_NAMESPACES["prop/time-quota"]},
        {
            "persistent://prop/time-quota/topic3": ledger_topic(
                ledgers, cursors(c1="1:-1", c2="1:-1"), entry_size=KIB
            )
        },
        broker={"preciseTimeBasedBacklogQuotaCheck": True},
    )
    planned = moves(plan(capsys, "backlog", store, AS_OF), "persistent://prop/time-quota/topic3")
    assert planned == {"c1": "2:3", "c2": "2:3"}


def quota_state(capsys, store: str, topic: str) -> tuple[bool, int | None]:
    code, out, err = run_cli(capsys, "inspect", "--store", store)
    assert code == 0, err
    (state,) = [s for s in json.loads(out)["store"]["backlogQuotaStates"] if s["topic"] == topic]
    return state["exceeded"], state["exceededSinceMs"]
