"""The compaction gate's own reading of each key's latest entry (``latest_per_key``), apart from the planner's."""

from __future__ import annotations

import pytest

from spark_apps.compaction.gate import latest_per_key

pytestmark = pytest.mark.spark

T = "persistent://t/ns/table"


def _latest(spark, rows) -> dict:
    frame = spark.createDataFrame(
        [(T, *r) for r in rows], "topic string, ledgerId long, entryId long, key string"
    )
    return {r.key: (r.latest.ledgerId, r.latest.entryId) for r in latest_per_key(frame).collect()}


@pytest.mark.parametrize(
    "big", [5, 1 << 24, 1 << 40], ids=["packs", "entry id past 2^24", "ledger-sized entry id"]
)
def test_the_latest_position_of_each_key_whether_or_not_positions_pack(spark, big):
    rows = [(1, big, "a"), (1, big - 1, "a"), (2, 0, "b"), (1, big + 1, "b"), (3, 0, None), (0, 7, "c")]
    assert _latest(spark, rows) == {"a": (1, big), "b": (2, 0), "c": (0, 7)}


def test_a_ledger_id_past_2_39_is_ordered_exactly(spark):
    huge = 1 << 39
    assert _latest(spark, [(huge, 0, "a"), (huge - 1, 99, "a"), (3, 1, "b")]) == {"a": (huge, 0), "b": (3, 1)}
