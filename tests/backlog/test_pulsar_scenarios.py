"""Pulsar's own backlog-quota scenarios through the command-line contract: load -> `housekeeping plan backlog
--format json` -> `apply` -> `inspect` (apache/pulsar pulsar-broker/src/test/java/org/apache/pulsar/broker/service/
BacklogQuotaManagerTest: testConsumerBacklogEvictionTimeQuota, ...TimeQuotaPrecise, ...SizeQuota, ...WithAckSizeQuota,
...WithAckTimeQuota, testBacklogQuotaWithReader, testProducerExceptionAndThenUnblockSizeQuota). MAX_ENTRIES_PER_LEDGER
= 5 and 1024-byte payloads as there. Each scenario is a topic (in its own namespace where its policy differs) of one
store, shifted in time so that one run at one as-of decides them all, as the DAG does for a whole store."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ledger_topic, run_cli
from tests.cursor_scenarios import (
    AS_OF,
    KIB,
    apply,
    backlog_after,
    cursors,
    load,
    moves,
    plan,
    producer_timeline,
    sizes,
)

pytestmark = [pytest.mark.spark, pytest.mark.runs]

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
    # a roll left the current ledger empty: (current, -1) is past the last entry, a mark-delete the cursor refuses
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
    # ManagedCursorImpl#asyncMarkDelete refuses (4, -1), past the last entry 3:4, from inside ledger 3: the loop
    # ends at (3, -1), the last closed ledger's entries kept (testConsumerBacklogEvictionTimeQuotaWithEmptyLedger)
    assert moves(planned, "persistent://prop/time-quota/rolled") == {"c1": "3:-1"}
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

    from housekeeping.store import metadata_schema as t
    from housekeeping.store.store import Store

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


def test_with_the_check_switched_off_producers_are_still_refused(capsys, tmp_path):
    """backlogQuotaCheckEnabled=false stops the monitor (no eviction), but ServerCnx#handleProducer still checks the
    quota: the exceeded producer quota is recorded and the write path refuses a new producer."""
    from housekeeping.store import clients
    from housekeeping.store.store import Store

    store = load(
        capsys,
        tmp_path,
        {
            "prop/hold": BACKLOG_NAMESPACES["prop/hold"],
            "prop/size-quota": BACKLOG_NAMESPACES["prop/size-quota"],
        },
        {
            "persistent://prop/hold/quota": BACKLOG_TOPICS["persistent://prop/hold/quota"],
            "persistent://prop/size-quota/topic2": BACKLOG_TOPICS["persistent://prop/size-quota/topic2"],
        },
        broker={"backlogQuotaCheckEnabled": False},
    )
    planned = plan(capsys, "backlog", store, AS_OF)
    assert [(a["topic"], a["action"], a["to"]) for a in planned["actions"]] == [
        ("persistent://prop/hold/quota", "flag_backlog_quota", "exceeded")
    ]
    apply(capsys, "backlog", store, AS_OF)
    assert quota_state(capsys, store, "persistent://prop/hold/quota") == (True, AS_OF)
    with pytest.raises(clients.ProducerBlocked, match="destination_storage is exceeded"):
        clients.connect_producer(Store.open(store), "persistent://prop/hold/quota", now_ms=AS_OF + 1)
    # the eviction topic is over its quota too, and nothing moved it
    assert cursors_of(capsys, store, "persistent://prop/size-quota/topic2") == {"c1": "1:-1", "c2": "1:-1"}


def cursors_of(capsys, store: str, topic: str) -> dict[str, str]:
    code, out, err = run_cli(capsys, "inspect", "--store", store)
    assert code == 0, err
    body = json.loads(out)["topics"][topic]["cursors"]
    return {name: c["markDeletePosition"] for name, c in body.items()}


def quota_state(capsys, store: str, topic: str) -> tuple[bool, int | None]:
    code, out, err = run_cli(capsys, "inspect", "--store", store)
    assert code == 0, err
    (state,) = [s for s in json.loads(out)["store"]["backlogQuotaStates"] if s["topic"] == topic]
    return state["exceeded"], state["exceededSinceMs"]
