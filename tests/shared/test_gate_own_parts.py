"""A gate's pass reads each bucket's plan from the bucket's own part files when the plan is as the planner wrote it
(``topic_pass.planned_parts`` and ``read_bucket_plan``: no shuffle), and otherwise lets Spark read and route
every row. Both must hand each bucket the same rows: a part file's reading is taken only when it is plain (every
line one JSON object of the table's columns, each value of its column's type, each topic of the file's bucket), and
compared here with Spark's own reading of the same file; anything else sends the whole pass to Spark's routing,
shown by plans a hand edit or a mutant wrote."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from housekeeping.engine.contract import ACTIONS, topic_bucket
from housekeeping.engine.documents import read_run_info
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.backlog.tables import EVICTION_STEPS
from housekeeping.mechanisms.registry import get_mechanism
from spark_apps.shared import topic_pass
from spark_apps.shared.io import read_table
from spark_apps.shared.topic_pass import check_pass, part_file, planned_parts, read_bucket_plan
from tests.conftest import rewrite_part, table_parts
from tests.gate_mutants import planned

pytestmark = pytest.mark.spark

BUCKETS = 4
TOPICS = [f"persistent://t/ns/topic-{i}" for i in range(24)] + ["persistent://t/ns/été-ü"]


def action(topic: str, n: int) -> dict:
    return {
        "topic": topic,
        "action": "delete_ledger",
        "ledgerId": 2**63 - 1 - n,
        "bytes": -n,
        "exceeded": n % 2 == 0,
        "reason": 'said "why"\n\u2028',
    }


def write_parts(run_dir: Path, rows_of_bucket) -> Path:
    directory = RunDir(run_dir).plan_table(ACTIONS)
    directory.mkdir(parents=True, exist_ok=True)
    for bucket in range(BUCKETS):
        (directory / part_file(bucket)).write_text(rows_of_bucket(bucket))
    return directory


def plain_rows(bucket: int) -> str:
    topics = [t for t in TOPICS if topic_bucket(t, BUCKETS) == bucket]
    return "".join(json.dumps(action(t, n)) + "\n" for n, t in enumerate(topics))


def own_parts(run_dir: Path, bucket: int):
    return read_bucket_plan(run_dir, BUCKETS, bucket, [], planned_parts(run_dir, BUCKETS, [ACTIONS]))


def test_a_plain_part_file_reads_as_spark_reads_it(spark, tmp_path):
    directory = write_parts(tmp_path, plain_rows)
    # Past the buckets' files: one with rows of every bucket (where a planner's driver writes), one empty.
    driver_rows = [action(t, 100 + n) for n, t in enumerate(TOPICS[::3])]
    (directory / part_file(BUCKETS)).write_text("".join(json.dumps(r) + "\n" for r in driver_rows))
    (directory / part_file(BUCKETS + 1)).write_text("")
    assert planned_parts(tmp_path, BUCKETS, [ACTIONS]) == {
        "actions": [part_file(BUCKETS), part_file(BUCKETS + 1)]
    }
    by_spark = [row.asDict() for row in read_table(spark, tmp_path, ACTIONS).collect()]
    by_parts = [row for b in range(BUCKETS) for row in own_parts(tmp_path, b).actions]
    assert len(by_parts) == len(TOPICS) + len(driver_rows)

    def key(row):
        return json.dumps(row, sort_keys=True)

    assert sorted(by_parts, key=key) == sorted(by_spark, key=key)
    assert list(by_parts[0]) == list(ACTIONS.names)


@pytest.mark.parametrize(
    "line",
    [
        '{"topic": "MINE", "action": "delete_ledger", "ledgerId": 1.0}',  # a double where a long goes
        '{"topic": "MINE", "action": "delete_ledger", "ledgerId": "1"}',  # a string where a long goes
        '{"topic": "MINE", "action": "delete_ledger", "ledgerId": true}',
        '{"topic": "MINE", "action": "delete_ledger", "ledgerId": 9223372036854775808}',  # past a long
        '{"topic": "MINE", "action": 7}',  # Spark would read the number's text
        '{"topic": "MINE", "action": "delete_ledger", "exceeded": "yes"}',
        '{"topic": "MINE", "action": "delete_ledger", "ledgerIdd": 1}',  # a column the table does not have
        '["MINE", "delete_ledger"]',
        '{"topic": "MINE", "action": "delete_ledger"',  # malformed: Spark reads a row of nulls
        '{"topic": "MINE", "action": "delete_ledger"}\r',  # Spark's line reader splits on a carriage return
        "",  # an empty line (Spark skips it)
        '{"topic": "OTHER", "action": "delete_ledger"}',  # a topic of another bucket
        '{"action": "delete_ledger"}',  # no topic
    ],
)
def test_a_part_file_whose_reading_is_not_plain_is_left_to_spark(tmp_path, line):
    def topic_of(bucket: int) -> str:
        return next(t for t in TOPICS if topic_bucket(t, BUCKETS) == bucket)

    def rows(bucket: int) -> str:
        if bucket != 1:
            return plain_rows(bucket)
        edited = line.replace("MINE", topic_of(1)).replace("OTHER", topic_of(2))
        return plain_rows(bucket) + edited + "\n"

    write_parts(tmp_path, rows)
    assert own_parts(tmp_path, 0) is not None
    assert own_parts(tmp_path, 1) is None


def test_a_part_file_without_its_last_newline_is_left_to_spark(tmp_path):
    write_parts(tmp_path, lambda b: plain_rows(b).rstrip("\n") if b == 2 else plain_rows(b))
    assert own_parts(tmp_path, 2) is None


def test_a_file_past_the_buckets_is_read_by_every_bucket_but_must_be_plain_too(tmp_path):
    directory = write_parts(tmp_path, plain_rows)
    (directory / part_file(BUCKETS)).write_text(json.dumps({**action(TOPICS[0], 1), "bytes": "1"}) + "\n")
    assert all(own_parts(tmp_path, b) is None for b in range(BUCKETS))


def test_only_part_files_named_as_the_planner_names_them_one_per_bucket_at_least_are_as_planned(tmp_path):
    directory = write_parts(tmp_path, plain_rows)
    (directory / "_SUCCESS").write_text("")
    (directory / ".part-00000.json.crc").write_text("")  # Spark's listing skips both
    assert planned_parts(tmp_path, BUCKETS, [ACTIONS]) == {"actions": []}
    assert planned_parts(tmp_path, BUCKETS + 1, [ACTIONS]) is None
    assert planned_parts(tmp_path, BUCKETS, [ACTIONS, EVICTION_STEPS]) is None  # no such directory
    for name in ("edited.json", "part-00000.json.gz", "part-0009.json", "part-00009.jsonl"):
        (directory / name).write_text("")
        assert planned_parts(tmp_path, BUCKETS, [ACTIONS]) is None, name
        (directory / name).unlink()
    (directory / part_file(3)).unlink()
    assert planned_parts(tmp_path, BUCKETS, [ACTIONS]) is None


def get_gate(mechanism: str):
    return importlib.import_module(f"spark_apps.{mechanism}.gate")


def gate_pass(spark, run_dir: Path, mechanism: str) -> topic_pass.CheckedFrames:
    gate = get_gate(mechanism).GATE
    return check_pass(
        spark, run_dir, read_run_info(run_dir), checker=gate.check_bucket, frames=gate.frames,
        expectations=gate.expectations(get_mechanism(mechanism)), routed=gate.routed,
    )  # fmt: skip


def frames_read(frames: topic_pass.CheckedFrames) -> dict:
    return {
        name: (frames.rows[name], sorted(json.dumps(r, sort_keys=True) for r in table.to_pylist()))
        for name, table in frames.tables.items()
    }


def duplicated_first_action(run_dir: Path) -> None:
    """The plan's first action written twice in its own part file: plain, still as planned."""
    part, text = next((p, t) for p, t in table_parts(run_dir / "plan" / "actions").items() if t)
    rewrite_part(part, text + text.splitlines(keepends=True)[0])


def first_action_bytes_as_a_double(run_dir: Path) -> None:
    """The first action with a byte count of 1.5: not plain (Spark reads it otherwise), so Spark routes."""
    part, text = next((p, t) for p, t in table_parts(run_dir / "plan" / "actions").items() if t)
    first, *rest = text.splitlines(keepends=True)
    rewrite_part(part, json.dumps({**json.loads(first), "bytes": 1.5}) + "\n" + "".join(rest))


@pytest.mark.runs
@pytest.mark.parametrize("mechanism", ["trim", "backlog", "gc"])
@pytest.mark.parametrize(
    ("edit", "own_parts"),
    [(None, True), (duplicated_first_action, True), (first_action_bytes_as_a_double, False)],
)
def test_own_parts_and_spark_s_routing_check_the_same_rows(
    spark, tmp_path_factory, monkeypatch, mechanism, edit, own_parts
):
    _, run_dir = planned(tmp_path_factory, mechanism)
    if edit:
        edit(run_dir)
    routings: list[int] = []
    routed_plan = topic_pass._routed_plan

    def recorded(*args, **kwargs):
        routings.append(1)
        return routed_plan(*args, **kwargs)

    monkeypatch.setattr(topic_pass, "_routed_plan", recorded)
    first = frames_read(gate_pass(spark, run_dir, mechanism))
    assert routings == ([] if own_parts else [1])
    monkeypatch.setattr(topic_pass, "planned_parts", lambda *args: None)
    assert frames_read(gate_pass(spark, run_dir, mechanism)) == first
    assert routings == ([1] if own_parts else [1, 1])
    if edit is duplicated_first_action:  # offending rows shipped, not only counts
        validated = get_gate(mechanism).expectations(get_mechanism(mechanism))
        assert any(first[name][1] for name in validated)
