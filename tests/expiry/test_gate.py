"""The message-expiry gate blocks a move past an unexpired entry, on the compaction cursor, backwards or past the
topic's end (docs/semantics.md §4), and passes the unmutated plan."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ledger_topic, restore_table, rewrite_table, table_parts
from tests.expiry.test_plan import AS_OF, CUTOFF, NS, build, plan

pytestmark = [pytest.mark.spark, pytest.mark.runs]


def test_gate_rejects_moves_past_an_unexpired_entry_or_on_protected_cursors(spark, tmp_path):
    from spark_apps import validate_plan

    store = build(
        tmp_path,
        {
            "x": ledger_topic(
                [(1, [CUTOFF - 9, CUTOFF - 8, AS_OF - 5, CUTOFF - 7], None)],
                {"s": {"markDeletePosition": "1:-1"}, "__compaction": {"markDeletePosition": "1:-1"}},
            )
        },
    )
    run_dir, gate, subs, _ = plan(store, tmp_path)
    assert gate.success and subs[("x", "s")]["to"] == "1:1"
    actions = run_dir / "plan" / "actions"
    parts = table_parts(actions)
    original = "".join(parts.values())
    topic = f"persistent://{NS}/x"
    mutants = {
        "past the young entry": original.replace('"to":"1:1"', '"to":"1:3"'),
        "compaction cursor": original
        + json.dumps(
            {
                "topic": topic,
                "action": "move_cursor",
                "subscription": "__compaction",
                "from": "1:-1",
                "to": "1:0",
                "reason": "x",
            }
        )
        + "\n",
        "backward": original.replace('"from":"1:-1","to":"1:1"', '"from":"1:-1","to":"0:5"'),
        "past the end": original.replace('"to":"1:1"', '"to":"1:7"'),
    }
    for label, text in mutants.items():
        assert text != original, label
        rewrite_table(actions, [json.loads(line) for line in text.splitlines()])
        assert not validate_plan.run(spark, run_dir, "expiry").success, label
    restore_table(parts)
    assert validate_plan.run(spark, run_dir, "expiry").success
