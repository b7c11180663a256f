"""Quality-gate checks for empty-ledger unlisting: its declaration on the per-topic gate skeleton."""

from __future__ import annotations

from collections.abc import Mapping

from housekeeping.engine.contract import LEDGERS, table
from housekeeping.engine.documents import RunInfo
from housekeeping.engine.gate import Expectation, known_actions, must_be_true, one_row_each
from housekeeping.engine.mechanism import Mechanism
from spark_apps.shared.gate_app import GateTopic, TopicPassGate
from spark_apps.shared.rows import Row
from spark_apps.shared.topic_pass import boolean_columns
from spark_apps.unlist_empty.checks import LEDGER_CHECKS, check_topic


def check(topic: GateTopic, info: RunInfo) -> Mapping[str, list[Row]]:
    return check_topic(topic.rows[LEDGERS.name], topic.actions)


def expectations(spec: Mechanism) -> dict[str, list[Expectation]]:
    return {
        "actions": [known_actions(spec.action_names)],
        "ledgers": [*one_row_each(["topic", "ledgerId"]), *must_be_true(*LEDGER_CHECKS)],
    }


GATE = TopicPassGate(
    reads=(LEDGERS.name,),
    frames=(
        table("actions", "topic string, action string"),
        table("ledgers", "topic string, ledgerId bigint, " + boolean_columns(LEDGER_CHECKS)),
    ),
    check=check,
    expectations=expectations,
)
checks = GATE.checks
