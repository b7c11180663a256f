"""The compaction gate's own derivation from each topic's input (``newest_per_key``, ``expected_survivors``,
``topic_facts``: the counts and each kept entry's and dropped key's checks), apart from the planner's: pure
functions on Arrow tables, run in the task that reads a topic."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

from spark_apps.compaction.gate import (
    DROPPED_CHECKS,
    DROPPED_ROW,
    KEPT_CHECKS,
    KEPT_ROW,
    expected_survivors,
    newest_per_key,
    topic_facts,
)

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


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _plan_rows(spec, rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=spec.arrow_schema())


def _by_kind(facts: pa.Table) -> dict[str, list[dict]]:
    by_kind: dict[str, list[dict]] = {}
    for row in facts.to_pylist():
        by_kind.setdefault(row["kind"], []).append(row)
    return by_kind


def _source(kept: list[dict], dropped: list[dict], **params) -> dict:
    return {
        "topic": "t",
        "kept": _plan_rows(KEPT_ROW, kept),
        "dropped": _plan_rows(DROPPED_ROW, dropped),
        "compactedRetentionTimeMs": -1,
        "compactedRetentionSizeBytes": -1,
        "tombstoneGraceMs": 0,
        "horizonLedger": 2,
        "horizonEntry": 2,
        **params,
    }


def _parts():
    return [
        _rows([(2, 0, "a"), (2, 1, None), (2, 2, "b", 0)]).append_column("source", pa.array(["raw"] * 3)),
        _rows([(1, 0, "a"), (1, 1, "c")]).append_column("source", pa.array(["raw"] * 2)),
    ]


def _kept(ledger, entry, key, size=5, ts=AS_OF) -> dict:
    return {"ledgerId": ledger, "entryId": entry, "key": key and _digest(key), "size": size, "entryTs": ts}


@pytest.mark.parametrize("retain_null_key", [False, True])
def test_a_topics_counts_from_its_input_in_parts(retain_null_key):
    kept = [_kept(2, 0, "a"), _kept(9, 9, "z")]  # 9:9 is no input entry
    facts = _by_kind(topic_facts(_source(kept, []), iter(_parts()), AS_OF, retain_null_key))
    # Must survive: 1:1 (c) and 2:0 (a), and 2:1 when keyless entries are retained; b's tombstone goes. Of the kept
    # positions, 9:9 is not among them.
    counts = [
        (r["entriesRead"], r["keyless"], r["keys"], r["expectedRows"], r["unexpectedRows"])
        for r in facts["counts"]
    ]
    assert counts == [(5, 1, 3, 3 if retain_null_key else 2, 1)]
    # The plan's rows of the topic, counted where they are: 2 kept (5 bytes each, keyed), none dropped.
    plan = [(r["keptRows"], r["keptBytes"], r["keptKeys"], r["droppedKeys"]) for r in facts["counts"]]
    assert plan == [(2, 10, 2, 0)]
    assert {r["topic"] for rows in facts.values() for r in rows} == {"t"}


def _failing(rows: list[dict], checks) -> dict[tuple, list[str]]:
    return {
        (r["ledgerId"], r["entryId"]) if r["kind"] == "kept" else r["key"]: sorted(
            c for c in checks if not r[c]
        )
        for r in rows
    }


def test_each_kept_entry_is_checked_against_the_input_entry_at_its_position():
    grace = 60_000
    parts = [
        _rows(
            [
                (1, 0, "a", 5, AS_OF),
                (1, 1, "a", 5, AS_OF),
                (1, 2, "t", 0, AS_OF - grace - 1),
                (1, 3, None, 5, AS_OF),
                (1, 4, "old", 5, AS_OF - 10 * grace),
                (1, 5, "b", 5, AS_OF),
            ]
        )
    ]
    kept = [
        _kept(1, 1, "a"),  # right
        _kept(1, 0, "a"),  # a superseded entry
        _kept(1, 2, "t", size=0, ts=AS_OF - grace - 1),  # a tombstone past its grace
        _kept(1, 3, None),  # keyless, not retained here
        _kept(1, 4, "old", ts=AS_OF - 10 * grace),  # past the retention time
        _kept(1, 5, "c"),  # b's entry named as another key
        _kept(7, 0, "x"),  # no input entry, after the horizon
    ]
    source = _source(
        kept, [], compactedRetentionTimeMs=5 * grace, tombstoneGraceMs=grace, horizonLedger=1, horizonEntry=5
    )
    by_kind = _by_kind(topic_facts(source, iter(parts), AS_OF, False))
    assert _failing(by_kind["kept"], KEPT_CHECKS) == {
        (1, 1): [],
        (1, 0): ["latest_for_its_key"],
        (1, 2): ["tombstone_within_grace"],
        (1, 3): ["keyed_or_null_keys_retained"],
        (1, 4): ["within_compacted_retention_time"],
        (1, 5): ["entry_matches_its_input", "latest_for_its_key"],
        (7, 0): [
            "at_or_before_horizon",
            "entry_is_an_input_entry",
            "entry_matches_its_input",
            "latest_for_its_key",
            "within_compacted_retention_time",
        ],
    }
    # A topic without compacted-retention params or horizon (not in the snapshot): nothing holds that needs them.
    bare = _source(
        [_kept(1, 1, "a")],
        [],
        compactedRetentionTimeMs=None,
        compactedRetentionSizeBytes=None,
        tombstoneGraceMs=None,
        horizonLedger=None,
        horizonEntry=None,
    )
    assert _failing(_by_kind(topic_facts(bare, iter(parts), AS_OF, False))["kept"], KEPT_CHECKS) == {
        (1, 1): ["at_or_before_horizon", "within_compacted_retention_time"]
    }


def test_each_dropped_key_is_its_keys_latest_entry_not_kept_and_its_reason_holds():
    grace, limit = 60_000, 600_000
    parts = [
        _rows(
            [
                (1, 0, "t", 0, AS_OF - grace - 1),
                (1, 1, "x", 5, AS_OF - limit - 1),
                (1, 2, "y", 5, AS_OF),
                (1, 3, "y", 5, AS_OF),
                (1, 4, "k", 5, AS_OF),
            ]
        )
    ]

    def dropped(ledger, entry, key, reason, size=5, ts=AS_OF) -> dict:
        return {"key": _digest(key), "ledgerId": ledger, "entryId": entry, "size": size, "entryTs": ts} | {
            "reason": reason
        }

    rows = [
        dropped(1, 0, "t", "tombstoned", size=0, ts=AS_OF - grace - 1),  # right
        dropped(1, 1, "x", "expired_time", ts=AS_OF - limit - 1),  # right
        dropped(1, 2, "y", "expired_size"),  # not y's latest entry (1:3)
        dropped(1, 4, "k", "tombstoned"),  # kept too, and no tombstone
        dropped(1, 4, "z", "superseded"),  # no such key at that position; no such reason
    ]
    source = _source(
        [_kept(1, 4, "k")], rows, compactedRetentionTimeMs=limit, tombstoneGraceMs=grace, horizonLedger=1
    )
    by_kind = _by_kind(topic_facts(source, iter(parts), AS_OF, False))
    assert _failing(by_kind["dropped"], DROPPED_CHECKS) == {
        _digest("t"): [],
        _digest("x"): [],
        _digest("y"): ["dropped_entry_is_the_latest_for_its_key"],
        _digest("k"): ["drop_reason_holds", "dropped_key_not_also_kept"],
        _digest("z"): ["drop_reason_holds", "dropped_entry_is_the_latest_for_its_key"],
    }


def test_a_topic_with_plan_rows_and_no_input_fails_every_input_check():
    source = _source([_kept(1, 0, "a")], [], compactedFiles=None)
    by_kind = _by_kind(topic_facts(source, iter([]), AS_OF, False))
    assert "entry_is_an_input_entry" in _failing(by_kind["kept"], KEPT_CHECKS)[(1, 0)]
    assert [(r["entriesRead"], r["keys"], r["expectedRows"]) for r in by_kind["counts"]] == [(0, 0, 0)]


def test_a_position_kept_twice_fails_on_both_rows_and_a_unique_one_passes():
    source = _source([_kept(2, 0, "a"), _kept(2, 0, "a"), _kept(1, 1, "c")], [])
    rows = _by_kind(topic_facts(source, iter(_parts()), AS_OF, False))["kept"]
    assert sorted(((r["ledgerId"], r["entryId"]), r["position_is_unique"]) for r in rows) == [
        ((1, 1), True),
        ((2, 0), False),
        ((2, 0), False),
    ]
