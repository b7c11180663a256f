"""Quality-gate checks for backlog-quota enforcement, re-derived from the snapshot apart from the planner (and, in
precise mode, from the entries themselves): the gate's declaration on the skeleton every per-topic gate shares
(``spark_apps.shared.gate_app``), with ``spark_apps.backlog.checks`` topic by topic over each topic the plan's
actions or eviction steps name, and the summary's cursor count reconciled with the moves checked.
"""

from __future__ import annotations

from collections.abc import Mapping

from housekeeping.engine.contract import CURSORS, LEDGERS, table
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.gate import Expectation, known_actions, one_row_each
from housekeeping.engine.mechanism import Mechanism
from housekeeping.mechanisms.backlog.tables import EVICTION_STEPS
from spark_apps.backlog.checks import FLAG_CHECKS, MOVE_CHECKS, STEP_CHECKS, check_topic
from spark_apps.shared.gate_app import GateTopic, TopicPassGate, moves_reconcile_with_summary
from spark_apps.shared.move_checks import TopicFacts
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import boolean_columns

FRAMES = (
    table("actions", "topic string, action string"),
    table(
        "cursor_moves",
        "topic string, name string, from string, to string, quotaType string, "
        + boolean_columns(MOVE_CHECKS),
    ),
    table("eviction_steps", "topic string, step int, cursor string, " + boolean_columns(STEP_CHECKS)),
    table("quota_flags", "topic string, quotaType string, " + boolean_columns(FLAG_CHECKS)),
)


def check(topic: GateTopic, info: RunInfo) -> Mapping[str, list[Row]]:
    facts = TopicFacts(topic.row, topic.rows[LEDGERS.name], topic.rows[CURSORS.name])
    return check_topic(facts, topic.actions, topic.routed[EVICTION_STEPS.name], info, topic.entries)


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    """What each per-bucket check frame must meet (the pass ships only the rows that could fail it)."""
    return {
        "actions": [known_actions(spec.action_names)],
        "cursor_moves": one_row_each(["topic", "name"], *MOVE_CHECKS),
        "eviction_steps": one_row_each(["topic", "step"], *STEP_CHECKS),
        "quota_flags": one_row_each(["topic", "quotaType"], *FLAG_CHECKS),
    }


GATE = TopicPassGate(
    reads=(LEDGERS.name, CURSORS.name),
    frames=FRAMES,
    check=check,
    expectations=expectations,
    routed=(EVICTION_STEPS,),
    reads_entries=True,
    driver=moves_reconcile_with_summary,
)
checks = GATE.checks
