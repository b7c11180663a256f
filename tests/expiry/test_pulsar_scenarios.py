"""Pulsar's own message-expiry scenarios through the command-line contract: load -> `housekeeping plan expiry
--format json` -> `apply` -> `inspect` (apache/pulsar pulsar-broker/src/test/java/org/apache/pulsar/broker/service/
PersistentMessageFinderTest: testPersistentMessageFinder, testMessageExpiryWithTimestampNonRecoverableException).
The Pulsar tests sleep in wall-clock time; here the same timeline is written into the entries and ledger close times
and "now" is the run's --as-of."""

from __future__ import annotations

import pytest

from tests.conftest import ledger_topic
from tests.cursor_scenarios import (
    AS_OF,
    apply,
    cursors,
    load,
    moves,
    plan,
    producer_timeline,
)

pytestmark = [pytest.mark.spark, pytest.mark.runs]

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
