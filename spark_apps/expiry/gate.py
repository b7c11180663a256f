"""Quality-gate checks for message expiry, re-derived from the snapshot and, where timestamps decide, from the
entries themselves, apart from the planner: the gate's declaration on the skeleton every per-topic gate shares
(``spark_apps.shared.gate_app``), with ``spark_apps.expiry.checks`` topic by topic over each topic the plan names
(reading the entries it needs inside the task), and the summary's cursor count reconciled with the moves checked.
"""

from __future__ import annotations

from collections.abc import Mapping

from housekeeping.engine.contract import CURSORS, LEDGERS, table
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.gate import Expectation, known_actions, one_row_each
from housekeeping.engine.mechanism import Mechanism
from spark_apps.expiry.checks import EXPIRY_CHECKS, check_topic
from spark_apps.shared.gate_app import GateTopic, TopicPassGate, moves_reconcile_with_summary
from spark_apps.shared.move_checks import TopicFacts
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import boolean_columns

FRAMES = (
    table("actions", "topic string, action string"),
    table(
        "cursor_moves", "topic string, name string, from string, to string, " + boolean_columns(EXPIRY_CHECKS)
    ),
)


def check(topic: GateTopic, info: RunInfo) -> Mapping[str, list[Row]]:
    facts = TopicFacts(topic.row, topic.rows[LEDGERS.name], topic.rows[CURSORS.name])
    return check_topic(facts, topic.actions, info, topic.entries)


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    """What each per-bucket check frame must meet (the pass ships only the rows that could fail it)."""
    return {
        "actions": [known_actions(spec.action_names)],
        "cursor_moves": one_row_each(["topic", "name"], *EXPIRY_CHECKS),
    }


GATE = TopicPassGate(
    reads=(LEDGERS.name, CURSORS.name),
    frames=FRAMES,
    check=check,
    expectations=expectations,
    reads_entries=True,
    driver=moves_reconcile_with_summary,
)
checks = GATE.checks
