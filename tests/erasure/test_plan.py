"""Key erasure's staging rule, apart from a whole run: which positions a ledger's rewrite redacts and what it leaves
as it was (``redact_entries``, in the task that reads the ledger), and the marker each redacted position carries
(``request_marks``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from housekeeping.store.entries import ENTRY_SCHEMA, ERASED_PROPERTY
from spark_apps.erasure.plan import redact_entries, request_marks

TOPIC = "persistent://acme/orders/t0"


def _entries(positions: list[tuple[int, int]]) -> pa.Table:
    """A compacted ledger's entries as a file may hold them: positions of several raw ledgers, not in order."""
    rows = [
        {
            "topic": TOPIC,
            "ledgerId": ledger,
            "entryId": entry,
            "publishTime": 1_000 + 10 * ledger + entry,
            "brokerTimestamp": None if entry % 2 else 2_000 + entry,
            "key": f"k-{ledger}-{entry}",
            "value": f"v-{ledger}-{entry}".encode(),
            "size": 100 + entry,
            "properties": [("source", f"{ledger}:{entry}")],
        }
        for ledger, entry in positions
    ]
    return pa.Table.from_pylist(rows, ENTRY_SCHEMA)


@pytest.mark.unit
def test_only_the_marked_positions_are_redacted_and_the_ledger_is_in_position_order():
    positions = [(6, 1), (5, 2), (5, 1), (6, 0), (5, 0)]
    # (6, 1) is marked, (5, 1) has the same entry id in another ledger and is not; (5, 0) is marked too.
    marks = [
        {"entryLedgerId": 6, "entryId": 1, "requests": "3,7"},
        {"entryLedgerId": 5, "entryId": 0, "requests": "12"},
    ]
    staged = redact_entries(_entries(positions), TOPIC, marks)

    assert staged.schema == ENTRY_SCHEMA
    by_position = {(r["ledgerId"], r["entryId"]): r for r in staged.to_pylist()}
    assert list(by_position) == sorted(positions), "sorted by (ledgerId, entryId)"
    original = {(r["ledgerId"], r["entryId"]): r for r in _entries(positions).to_pylist()}
    for position, marker in (((6, 1), "3,7"), ((5, 0), "12")):
        redacted = by_position.pop(position)
        assert (redacted["key"], redacted["value"], redacted["size"]) == (None, None, 0)
        assert redacted["properties"] == [(ERASED_PROPERTY, marker)]
        kept = {k: redacted[k] for k in ("topic", "ledgerId", "entryId", "publishTime", "brokerTimestamp")}
        assert kept == {k: original[position][k] for k in kept}, "position and times stay"
    assert by_position == {p: original[p] for p in by_position}, "every other entry untouched in every column"


@pytest.mark.unit
def test_a_ledger_without_marks_is_rewritten_as_it_was_in_position_order():
    entries = _entries([(9, 2), (9, 0), (9, 1)])
    staged = redact_entries(entries, TOPIC, [])
    assert staged.equals(entries.sort_by([("ledgerId", "ascending"), ("entryId", "ascending")]))


@pytest.mark.spark
def test_a_position_several_requests_match_carries_their_ids_once_sorted_as_text(spark):
    found = spark.createDataFrame(
        [
            (TOPIC, 40, "compacted", 6, 1, request)
            for request in (7, 12, 3, 7)  # request 7 found twice (two keys' digests can name one entry)
        ]
        + [(TOPIC, 40, "compacted", 5, 0, 4)],
        "topic string, ledgerId long, source string, entryLedgerId long, entryId long, requestId long",
    )
    (row,) = request_marks(found).collect()
    assert (row["topic"], row["ledgerId"], row["source"]) == (TOPIC, 40, "compacted")
    marks = sorted((m["entryLedgerId"], m["entryId"], m["requests"]) for m in row["marks"])
    assert marks == [(5, 0, "4"), (6, 1, "12,3,7")]
