"""The compaction gate's own derivation from each topic's input (``newest_per_key``, ``expected_survivors``,
``topic_facts``), apart from the planner's: pure functions on Arrow tables, run in the task that reads a topic."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_apps.compaction.gate import expected_survivors, newest_per_key, topic_facts

pytestmark = pytest.mark.unit

AS_OF = 100_000_000


def _rows(rows) -> pa.Table:
    """rows: (ledgerId, entryId, key[, size, entryTs])."""
    full = [(*r, 5, AS_OF)[:5] for r in rows]
    names = ["ledgerId", "entryId", "key", "size", "entryTs"]
    types = [pa.int64(), pa.int64(), pa.string(), pa.int32(), pa.int64()]
    return pa.table(
        {n: pa.array([r[i] for r in full], t) for i, (n, t) in enumerate(zip(names, types, strict=True))}
    )


def _latest(rows) -> dict:
    table = _rows(rows)
    keyed = table.filter(pa.compute.is_valid(table["key"]))
    return {r["key"]: (r["ledgerId"], r["entryId"]) for r in newest_per_key(keyed).to_pylist()}


@pytest.mark.parametrize(
    "big", [5, 1 << 24, 1 << 40], ids=["packs", "entry id past 2^24", "ledger-sized entry id"]
)
def test_the_latest_position_of_each_key_whether_or_not_positions_pack(big):
    rows = [(1, big, "a"), (1, big - 1, "a"), (2, 0, "b"), (1, big + 1, "b"), (3, 0, None), (0, 7, "c")]
    assert _latest(rows) == {"a": (1, big), "b": (2, 0), "c": (0, 7)}


def test_a_ledger_id_past_2_39_is_ordered_exactly():
    huge = 1 << 39
    assert _latest([(huge, 0, "a"), (huge - 1, 99, "a"), (3, 1, "b")]) == {"a": (huge, 0), "b": (3, 1)}
    assert _latest([]) == {}


def _expected(rows, *, time_ms=-1, size_bytes=-1, grace_ms=0) -> list:
    out = expected_survivors(_rows(rows), AS_OF, time_ms, size_bytes, grace_ms)
    return sorted((r["ledgerId"], r["entryId"]) for r in out.to_pylist())


def test_what_must_survive_at_the_retention_and_grace_boundaries():
    limit = 60_000
    rows = [(1, 0, "old", 5, AS_OF - limit - 1), (1, 1, "edge", 5, AS_OF - limit), (1, 2, "new", 5, AS_OF)]
    assert _expected(rows, time_ms=limit) == [(1, 1), (1, 2)]  # strict, as Pulsar's retention
    sized = [(1, 0, "a", 10), (1, 1, "b", 10), (1, 2, "c", 10), (2, 0, "d", 10)]
    assert _expected(sized, size_bytes=30) == [
        (1, 1),
        (1, 2),
        (2, 0),
    ]  # the newest that fit, exactly at the limit
    assert _expected(sized, size_bytes=29) == [(1, 2), (2, 0)]
    grace = 3_600_000
    tombstones = [
        (1, 0, "a", 0, AS_OF - grace - 1),
        (1, 1, "b", 0, AS_OF - grace),
        (1, 2, None, 0, AS_OF - grace - 1),
    ]
    assert _expected(tombstones, grace_ms=grace) == [(1, 1), (1, 2)]  # a keyless empty entry is no tombstone
    assert _expected(tombstones, grace_ms=0) == [(1, 2)]


@pytest.mark.parametrize("retain_null_key", [False, True])
def test_a_topics_facts_from_its_input_in_parts(retain_null_key):
    parts = [
        _rows([(2, 0, "a"), (2, 1, None), (2, 2, "b", 0)]).append_column("source", pa.array(["raw"] * 3)),
        _rows([(1, 0, "a"), (1, 1, "c")]).append_column("source", pa.array(["raw"] * 2)),
    ]
    source = {
        "topic": "t",
        "kept": [{"ledgerId": 2, "entryId": 0}, {"ledgerId": 9, "entryId": 9}],  # 9:9 is no input entry
        "compactedRetentionTimeMs": -1,
        "compactedRetentionSizeBytes": -1,
        "tombstoneGraceMs": 0,
    }
    facts = topic_facts(source, iter(parts), AS_OF, retain_null_key).to_pylist()
    by_kind = {}
    for row in facts:
        by_kind.setdefault(row["kind"], []).append(row)
    assert sorted((r["key"], r["ledgerId"], r["entryId"]) for r in by_kind["latest"]) == [
        ("a", 2, 0),
        ("b", 2, 2),
        ("c", 1, 1),
    ]
    assert [(r["ledgerId"], r["entryId"], r["key"]) for r in by_kind["input"]] == [(2, 0, "a")]
    # Must survive: 1:1 (c) and 2:0 (a), and 2:1 when keyless entries are retained; b's tombstone goes. Of the kept
    # positions, 9:9 is not among them.
    counts = [
        (r["entriesRead"], r["keyless"], r["expectedRows"], r["unexpectedRows"]) for r in by_kind["counts"]
    ]
    assert counts == [(5, 1, 3 if retain_null_key else 2, 1)]
    assert {r["topic"] for r in facts} == {"t"}
