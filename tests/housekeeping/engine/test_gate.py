"""The gate's Great Expectations Data Docs (GX's own renderer and page view) are written per run and read
offline: no tag loads anything from the network, and the validation results are there as text."""

from __future__ import annotations

import dataclasses
import os
import re

import pytest

from housekeeping.engine.gate import write_data_docs

pytestmark = pytest.mark.unit

EXTERNAL = re.compile(r"(?:src|href)=\"(?:https?:)?//", re.IGNORECASE)


@pytest.fixture(scope="module")
def validations():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
    import great_expectations.expectations as gxe
    import pandas as pd

    context = gx.get_context(mode="ephemeral")
    source = context.data_sources.add_pandas("checks")
    results = []
    for name, values in (("cursor_moves", [True, True]), ("deletions", [True, False, True])):
        batch = (
            source.add_dataframe_asset(name)
            .add_batch_definition_whole_dataframe("whole")
            .get_batch(batch_parameters={"dataframe": pd.DataFrame({"not_current_ledger": values})})
        )
        suite = gx.ExpectationSuite(name=f"trim_{name}")
        suite.add_expectation(gxe.ExpectColumnValuesToBeInSet(column="not_current_ledger", value_set=[True]))
        results.append((name, batch.validate(suite, result_format={"result_format": "SUMMARY"})))
    return results


def test_data_docs_pages_exist_per_frame_and_need_no_network(tmp_path, validations):
    index = write_data_docs(tmp_path / "data_docs", "trim", validations, success=False)
    pages = {p.name: p.read_text() for p in index.parent.glob("*.html")}
    assert set(pages) == {"index.html", "cursor_moves.html", "deletions.html"}
    for name, html in pages.items():
        assert not EXTERNAL.search(html), f"{name} loads something from the network"
        # No script (the pages' own call jQuery, which is not there), no stylesheet URL on the web, no link out of
        # the pages to a Data Docs site that does not exist.
        assert "<script" not in html and not re.search(r"url\((['\"]?)(https?:)?//", html), name
        assert not re.search(r'href="\.\./', html), name
    assert "url('data:image/png;base64," in pages["deletions.html"], "the dark theme's logo is inlined"
    assert re.search(r'<img[^>]*src="data:image/png;base64,', pages["deletions.html"]), "the logo is inlined"
    assert "REJECTED" in pages["index.html"] and 'href="deletions.html"' in pages["index.html"]
    deletions = pages["deletions.html"]
    assert "Expectation Validation Result" in deletions and "values must belong to this set" in deletions
    assert "1 unexpected values found" in deletions and "trim_deletions" in deletions


def _outcomes(document: dict) -> list[tuple]:
    return sorted(
        (
            o.frame,
            o.expectation,
            o.success,
            o.rows,
            o.unexpected_count,
            tuple(o.unexpected_sample),
        )
        for o in document.expectations
    )


@pytest.mark.spark
@pytest.mark.runs
def test_a_check_frame_over_the_driver_limit_is_validated_on_spark_with_the_same_verdict(
    tmp_path, spark, monkeypatch
):
    """A small check frame is brought to the driver by one query and validated with GX's pandas engine; one over
    PANDAS_ROWS is materialized once and validated on Spark. Both give the same outcomes, failures included."""
    from housekeeping.engine import gate

    def checks() -> list:
        frame = spark.createDataFrame(
            [("t1", 1, True), ("t1", 2, False), ("t2", 1, True), ("t2", 1, True)],
            "topic string, ledgerId long, not_current_ledger boolean",
        )
        return [
            gate.CheckFrame(
                "deletions",
                frame,
                [
                    gate.expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "ledgerId"]),
                    *gate.must_be_true("not_current_ledger"),
                ],
            )
        ]

    materialized: list = []

    def materialize(frame):
        materialized.append(frame)
        return frame.localCheckpoint(eager=True)

    for run in ("driver", "spark"):
        (tmp_path / run / "plan").mkdir(parents=True)
    on_driver = gate.run_gate(tmp_path / "driver", "trim", checks(), materialize=materialize)
    assert materialized == [], "a small frame is not materialized"
    monkeypatch.setattr(gate, "PANDAS_ROWS", 3)
    on_spark = gate.run_gate(tmp_path / "spark", "trim", checks(), materialize=materialize)
    assert len(materialized) == 1
    assert not on_driver.success and _outcomes(on_spark) == _outcomes(on_driver)
    # A frame marked as possibly large is computed once first, then validated where its size says.
    for limit, run in ((100, "first-driver"), (3, "first-spark")):
        monkeypatch.setattr(gate, "PANDAS_ROWS", limit)
        (tmp_path / run / "plan").mkdir(parents=True)
        marked = [dataclasses.replace(c, materialize_first=True) for c in checks()]
        before = len(materialized)
        assert _outcomes(gate.run_gate(tmp_path / run, "trim", marked, materialize=materialize)) == _outcomes(
            on_driver
        )
        assert len(materialized) == before + 1, "computed once, whatever its size"
    assert [(o.expectation, o.unexpected_count) for o in on_driver.failed] == [
        ("expect_compound_columns_to_be_unique", 2),
        ("expect_column_values_to_be_in_set", 1),
    ]


def test_an_expectation_is_data_until_the_gate_builds_great_expectations_object():
    from housekeeping.engine import gate

    spec = gate.expect("ExpectColumnValuesToBeInSet", column="action", value_set=["delete_ledger"])
    assert spec == gate.Expectation(
        "ExpectColumnValuesToBeInSet", {"column": "action", "value_set": ["delete_ledger"]}
    )
    built = spec.build()
    assert type(built).__name__ == "ExpectColumnValuesToBeInSet"
    assert (built.column, built.value_set) == ("action", ["delete_ledger"])
    assert gate.must_be_true("a", "b") == [
        gate.expect("ExpectColumnValuesToBeInSet", column=column, value_set=[True]) for column in ("a", "b")
    ]
    with pytest.raises(ValueError, match="'ExpectColumnToBeGreen'"):
        gate.expect("ExpectColumnToBeGreen", column="action").build()


@pytest.mark.processes
def test_great_expectations_loads_on_a_thread_of_its_own_and_the_gate_import_finds_it(tmp_path):
    """In a fresh process (the gate's): the loader leaves GX's import to a daemon thread of its own (GX's import takes
    seconds, so the thread is still there when the call returns), and the main thread's own import then finds GX
    whole."""
    import subprocess
    import sys

    script = """
import threading
import pandas, pyarrow
from housekeeping.engine import gate
gate.start_loading_great_expectations()
loader = [t for t in threading.enumerate() if t.name == "load-great-expectations"]
assert loader and loader[0].daemon, loader
import great_expectations.expectations as gxe
assert gxe.ExpectColumnValuesToBeInSet(column="c", value_set=[True]).column == "c"
loader[0].join(10)
assert not loader[0].is_alive()
gate.start_loading_great_expectations()  # loaded: no second thread
assert not [t for t in threading.enumerate() if t.name == "load-great-expectations"]
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def _check_rows(seed: int) -> list[dict]:
    """A check frame's rows with every kind of failure: a false and a null check, an action out of the set, a
    share out of bounds, repeated keys (within a topic)."""
    import random

    chance = random.Random(seed)
    rows = []
    for _ in range(300):
        topic = f"persistent://t/ns/{chance.randrange(40)}"
        rows.append(
            {
                "topic": topic,
                "ledgerId": chance.randrange(60),
                "action": chance.choice(["delete_ledger"] * 30 + ["move_cursor"] * 10 + ["drop_everything"]),
                "share": chance.choice([0.1] * 30 + [0.9, None]),
                "not_current_ledger": chance.choice([True] * 40 + [False, None]),
            }
        )
    return rows


GATE_EXPECTATIONS = [
    ("ExpectCompoundColumnsToBeUnique", {"column_list": ["topic", "ledgerId"]}),
    ("ExpectColumnValuesToBeInSet", {"column": "action", "value_set": ["delete_ledger", "move_cursor"]}),
    ("ExpectColumnValuesToBeBetween", {"column": "share", "min_value": 0.0, "max_value": 0.5}),
    ("ExpectColumnValuesToBeInSet", {"column": "not_current_ledger", "value_set": [True]}),
]


@pytest.mark.runs
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_gx_over_each_shares_offending_rows_gives_the_whole_frames_outcomes_and_data_docs_counts(
    tmp_path, seed
):
    """A gate's pass ships, per bucket, only the rows that could fail an expectation (offending_rows): Great
    Expectations over those rows, told the whole frame's row count, gives each expectation the same success, row
    count, unexpected count and sample as over every row, and Data Docs say "of" the whole frame."""
    import pyarrow as pa

    from housekeeping.engine import gate
    from housekeeping.engine.contract import topic_bucket

    rows = _check_rows(seed)
    expectations = [gate.expect(kind, **arguments) for kind, arguments in GATE_EXPECTATIONS]
    buckets: dict[int, list[dict]] = {}
    for row in rows:
        buckets.setdefault(topic_bucket(row["topic"], 4), []).append(row)
    shipped = [r for b in sorted(buckets) for r in gate.offending_rows(buckets[b], expectations, "topic")]
    assert 0 < len(shipped) < len(rows)
    whole = [r for b in sorted(buckets) for r in buckets[b]]  # the pass's order: bucket by bucket
    schema = pa.schema(
        [("topic", pa.string()), ("ledgerId", pa.int64()), ("action", pa.string()), ("share", pa.float64()),
         ("not_current_ledger", pa.bool_())]
    )  # fmt: skip
    documents = {}
    for name, frame_rows, count in (("whole", whole, None), ("offending", shipped, len(rows))):
        (tmp_path / name / "plan").mkdir(parents=True)
        frame = pa.Table.from_pylist(frame_rows, schema)
        documents[name] = gate.run_gate(
            tmp_path / name, "trim", [gate.CheckFrame("deletions", frame, expectations, rows=count)]
        )
    assert not documents["whole"].success
    assert documents["offending"].expectations == documents["whole"].expectations
    page = (tmp_path / "offending" / "gate" / "data_docs" / "deletions.html").read_text()
    assert f"of {len(rows)} total rows" in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def test_offending_rows_keeps_every_row_when_a_check_cannot_be_judged_within_one_share():
    from housekeeping.engine import gate

    rows = _check_rows(4)
    unique_ledger = [gate.expect("ExpectColumnValuesToBeUnique", column="ledgerId")]
    assert gate.offending_rows(rows, unique_ledger, "topic") is None, "a key without the topic spans shares"
    mostly = [gate.expect("ExpectColumnValuesToBeInSet", column="action", value_set=["x"], mostly=0.5)]
    assert gate.offending_rows(rows, mostly, "topic") is None
    table_wide = [gate.expect("ExpectTableRowCountToBeBetween", min_value=1)]
    assert gate.offending_rows(rows, table_wide, "topic") is None
    passing = [{"topic": "a", "ledgerId": 1, "ok": True}, {"topic": "a", "ledgerId": 2, "ok": True}]
    checks = [
        gate.expect("ExpectCompoundColumnsToBeUnique", column_list=["topic", "ledgerId"]),
        *gate.must_be_true("ok"),
    ]
    assert gate.offending_rows(passing, checks, "topic") == [], "a share whose checks all hold ships nothing"


@pytest.mark.runs
def test_the_gate_signs_the_plan_as_its_checks_began_so_a_plan_rewritten_under_it_is_refused(tmp_path):
    """The digest a gate records is taken as its checks begin (start_plan_digest): a plan rewritten while the
    checks run matches no passed gate, and apply refuses it. Hashed at the end instead, the gate would sign the
    rewritten plan it never checked."""
    import pyarrow as pa

    from housekeeping.core.errors import PlanNotValidated
    from housekeeping.engine import gate

    def passing_checks() -> list:
        frame = pa.table({"topic": ["t"], "not_current_ledger": [True]})
        return [gate.CheckFrame("deletions", frame, gate.must_be_true("not_current_ledger"))]

    documents = {}
    for name, signed_at_start in (("at_start", True), ("at_end", False)):
        run_dir = tmp_path / name
        part = run_dir / "plan" / "actions" / "part-00000.json"
        part.parent.mkdir(parents=True)
        part.write_text('{"topic": "t", "action": "delete_ledger", "ledgerId": 1}\n')
        digest = gate.start_plan_digest(run_dir) if signed_at_start else None
        checked = digest.result() if digest is not None else gate.plan_digest(run_dir)
        part.write_text('{"topic": "t", "action": "delete_ledger", "ledgerId": 2}\n')  # while the checks run
        documents[name] = gate.run_gate(run_dir, "trim", passing_checks(), digest=digest)
        assert documents[name].success
        if signed_at_start:
            assert documents[name].plan_digest == checked
            with pytest.raises(PlanNotValidated, match="changed after the gate validated it"):
                gate.require_passed_gate(run_dir)
        else:
            assert gate.require_passed_gate(run_dir).plan_digest != checked, "the unchecked plan was signed"
