"""The per-topic gates' one skeleton (``spark_apps.shared.gate_app``), without Spark: every gate deciding topic by
topic is a declaration on it; a bucket's check visits the topics the plan names (and, when declared, every topic of
the snapshot), hands each its snapshot rows, actions, routed rows and entry reader; the frames come back in one
order: the validated frames of the pass, the driver's, the hold checks. The pass itself (one Spark job, the routing)
is tests/shared/test_gate_own_parts.py and test_gate_routing.py; the verdicts are in the plan fingerprints."""

from __future__ import annotations

import importlib

import pytest

from housekeeping.engine.contract import CURSORS, LEDGERS, table
from housekeeping.engine.gate import CheckFrame, must_be_true
from housekeeping.mechanisms import registry
from housekeeping.mechanisms.backlog.tables import EVICTION_STEPS
from spark_apps.shared import gate_app
from spark_apps.shared.gate_app import GateTopic, TopicPassGate, no_entries
from spark_apps.shared.topic_pass import BucketPlan, BucketRows, CheckedFrames

pytestmark = pytest.mark.unit

PER_TOPIC = ("trim", "expiry", "backlog", "gc", "offload")
FRAME = table("checked", "topic string, ok boolean")


@pytest.mark.parametrize("name", PER_TOPIC)
def test_every_per_topic_gate_is_a_declaration_on_the_skeleton(name):
    module = importlib.import_module(registry.get_mechanism(name).gate_checks)
    assert isinstance(module.GATE, TopicPassGate)
    assert module.checks == module.GATE.checks
    validated = module.GATE.expectations(registry.get_mechanism(name))
    assert set(validated) <= {frame.name for frame in module.GATE.frames}, name


def snapshot_of_bucket(monkeypatch) -> None:
    """The bucket's snapshot: topics a and b, a with a ledger and a cursor."""
    rows = BucketRows(
        {"a": {"topic": "a"}, "b": {"topic": "b"}},
        {LEDGERS.name: {"a": [{"ledgerId": 1}]}, CURSORS.name: {"a": [{"name": "s"}]}},
    )
    monkeypatch.setattr(gate_app.BucketRows, "read", classmethod(lambda cls, *args: rows))
    monkeypatch.setattr(gate_app.LedgerFiles, "of", classmethod(lambda cls, info: "files"))
    monkeypatch.setattr(gate_app, "TopicEntryReads", lambda files, topic: f"entries of {topic} in {files}")


def declared(seen: list[GateTopic], **options) -> TopicPassGate:
    def check(topic: GateTopic, info):
        seen.append(topic)
        return {FRAME.name: [{"topic": topic.name, "ok": True}]}

    return TopicPassGate(
        reads=(LEDGERS.name, CURSORS.name),
        frames=(FRAME,),
        check=check,
        expectations=lambda spec: {FRAME.name: must_be_true("ok")},
        **options,
    )


def test_a_bucket_visits_the_topics_its_plan_names_with_their_rows(monkeypatch):
    snapshot_of_bucket(monkeypatch)
    seen: list[GateTopic] = []
    gate = declared(seen, routed=(EVICTION_STEPS,))
    plan = BucketPlan(
        [{"topic": "a", "action": "move_cursor"}, {"topic": "gone", "action": "move_cursor"}],
        {EVICTION_STEPS.name: [{"topic": "c", "step": 1}, {"topic": "a", "step": 1}]},
    )
    frames = gate.check_bucket(0, plan, "run", {"asOfMs": 1})
    assert [t.name for t in seen] == ["a", "gone", "c"]
    a, gone, c = seen
    assert a.row == {"topic": "a"} and a.rows == {
        LEDGERS.name: [{"ledgerId": 1}],
        CURSORS.name: [{"name": "s"}],
    }
    assert a.actions == [plan.actions[0]] and a.routed == {EVICTION_STEPS.name: [{"topic": "a", "step": 1}]}
    assert gone.row is None and gone.rows == {LEDGERS.name: [], CURSORS.name: []}
    assert c.actions == [] and c.routed == {EVICTION_STEPS.name: [{"topic": "c", "step": 1}]}
    assert all(t.entries is no_entries for t in seen), "a gate that does not declare entry reads reads none"
    assert frames == {FRAME.name: [{"topic": n, "ok": True} for n in ("a", "gone", "c")]}


def test_every_topic_and_entry_reads_when_declared(monkeypatch):
    snapshot_of_bucket(monkeypatch)
    seen: list[GateTopic] = []
    gate = declared(seen, every_topic=True, reads_entries=True)
    plan = BucketPlan([{"topic": "gone"}, {"topic": None}], {})
    gate.check_bucket(0, plan, "run", {"asOfMs": 1})
    assert [t.name for t in seen] == ["a", "b", "gone", None]
    assert [t.entries for t in seen[:3]] == [f"entries of {n} in files" for n in ("a", "b", "gone")]
    assert seen[3].entries is no_entries and seen[3].row is None


def test_the_frames_come_validated_first_then_the_drivers_then_the_hold_checks(monkeypatch, tmp_path):
    import pyarrow as pa

    passed = CheckedFrames(
        {FRAME.name: pa.table({"topic": ["a"], "ok": [True]}), "holds": pa.table({"not_held": [True]})},
        {FRAME.name: 1, "holds": 1},
        {FRAME.name: must_be_true("ok"), "holds": must_be_true("not_held")},
    )
    calls = []

    def check_pass(spark, run_dir, info, **kwargs):
        calls.append((spark, kwargs["frames"], sorted(kwargs["expectations"]), kwargs["routed"]))
        return passed

    monkeypatch.setattr(gate_app, "check_pass", check_pass)
    monkeypatch.setattr(gate_app, "read_run_info", lambda run: {"asOfMs": 1})
    driver_frame = CheckFrame("summary", None, must_be_true("summary_reconciles"))
    gate = TopicPassGate(
        reads=(),
        frames=(FRAME, table("figures", "namespace string")),
        check=lambda topic, info: {},
        expectations=lambda spec: {FRAME.name: must_be_true("ok")},
        driver=lambda frames, run, info: [driver_frame],
    )
    checked = gate.checks("the session", tmp_path, registry.get_mechanism("trim"))
    assert [c.name for c in checked] == [FRAME.name, "summary", "holds"]
    assert checked[1] is driver_frame and checked[0].rows == 1
    assert calls == [("the session", gate.frames, [FRAME.name], ())]
