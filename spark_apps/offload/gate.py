"""Quality-gate checks for ledger offload, re-derived from the snapshot apart from the planner: the gate's declaration
on the skeleton every per-topic gate shares (``spark_apps.shared.gate_app``), with ``spark_apps.offload.checks`` topic
by topic over every topic of the snapshot and every topic the plan names (an offload deletes nothing: no hold stops
it, but the hold checks run as for every gate).
"""

from __future__ import annotations

from collections.abc import Mapping

from housekeeping.engine.contract import LEDGERS, table
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.gate import Expectation, known_actions, must_be_true, one_row_each
from housekeeping.engine.mechanism import Mechanism
from spark_apps.offload.checks import OFFLOAD_CHECKS, check_topic
from spark_apps.shared.gate_app import GateTopic, TopicPassGate
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import boolean_columns

FRAMES = (
    table("actions", "topic string, action string, topic_in_snapshot boolean"),
    table("offloads", "topic string, ledgerId bigint, " + boolean_columns(OFFLOAD_CHECKS)),
    table("selection", "topic string, ledgerId bigint, planned boolean"),
)


def check(topic: GateTopic, info: RunInfo) -> Mapping[str, list[Row]]:
    return check_topic(topic.row, topic.rows[LEDGERS.name], topic.actions, int(info.as_of_ms))


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    """What each per-bucket check frame must meet (the pass ships only the rows that could fail it)."""
    return {
        "actions": [known_actions(spec.action_names), *must_be_true("topic_in_snapshot")],
        "offloads": one_row_each(["topic", "ledgerId"], *OFFLOAD_CHECKS),
        "selection": must_be_true("planned"),
    }


GATE = TopicPassGate(
    reads=(LEDGERS.name,), frames=FRAMES, check=check, expectations=expectations, every_topic=True
)
checks = GATE.checks
