"""A new mechanism is its own files and one registry entry: a throw-away mechanism, made inside this test with one
action kind, runs plan -> gate -> apply -> report through the `housekeeping` CLI without any shared module knowing
it (docs/architecture.md, "How to add a mechanism").

The mechanism, ``unlist_empty``, takes closed ledgers that hold no entry out of their topic's ledger list (its one
action, ``forget_empty_ledger``). Everything it is lives in this file: its action kind with its traits and its apply,
its Spark plan (``run``) and gate checks (``checks``), its report; ``registry.registered`` lists it for the test.
The shared engine gives it the rest: the snapshot, the gate's hold checks and Great Expectations, the digest, the
topic version's compare-and-set, the journal, the pending-deletion log, the run figures.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import and_, select

from tests.conftest import REPO, iso, run_cli, topic_body, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
NAME = "unlist_empty"


# --- the mechanism: its action kind ---------------------------------------------------------------------------


def _forget_empty_ledger():
    from housekeeping.engine.actions import ActionKind, Changes, Frees, TopicTally
    from housekeeping.store import metadata_schema as t
    from housekeeping.store.store import record_pending_deletion

    class ForgetEmptyLedger(ActionKind):
        def apply_in_topic(self, conn: Any, run: Any, tally: TopicTally, row: Mapping[str, Any]) -> None:
            where = and_(t.ledgers.c.topic == tally.topic, t.ledgers.c.ledger_id == int(row["ledgerId"]))
            stored = conn.execute(select(t.ledgers).where(where)).one()
            conn.execute(t.ledgers.delete().where(where))
            record_pending_deletion(
                conn,
                dict(stored._mapping),
                run_id=run.run_id,
                as_of_ms=run.as_of_ms,
                purge_after_ms=run.purge_after_ms,
            )
            tally.ledgers_deleted.append(int(row["ledgerId"]))
            tally.add("emptyLedgersForgotten")

    return ForgetEmptyLedger(
        "forget_empty_ledger",
        "a closed ledger without entries leaves the ledger list",
        Changes.LEDGERS,
        Frees.DATA,
        result_keys={"emptyLedgersForgotten": 0},
    )


# --- its Spark plan and gate (this module is both apps: plan_app and gate_checks name it) ----------------------


def empty_closed_ledgers(ledgers):
    """Closed ledgers (below the topic's current, newest one) that hold no entry."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    current = F.max("ledgerId").over(Window.partitionBy("topic"))
    return ledgers.withColumn("currentLedgerId", current).where(
        (F.col("entries") == 0) & (F.col("ledgerId") < F.col("currentLedgerId"))
    )


def run(spark, run_dir) -> dict:
    from pyspark.sql import functions as F

    from housekeeping.engine.contract import ACTIONS, BLOCKERS
    from housekeeping.engine.run_dir import RunDir, read_run_info
    from spark_apps.shared.io import action_rows, read_snapshot, write_summary, write_table

    info = read_run_info(run_dir)
    snapshot = read_snapshot(spark, run_dir)
    held = snapshot["topics"].where(F.col("heldBy").isNotNull()).select("topic")
    chosen = empty_closed_ledgers(snapshot["ledgers"]).join(held, "topic", "left_anti")
    actions = action_rows(
        chosen,
        MECHANISM_ACTION_NAME,
        topic=F.col("topic"),
        ledgerId=F.col("ledgerId"),
        bytes=F.col("size"),
        reason=F.lit("closed ledger with no entry"),
    )
    write_table(actions, run_dir, ACTIONS, ["topic", "ledgerId"])
    write_table(spark.createDataFrame([], "topic string"), run_dir, BLOCKERS, ["topic"])
    summary = {"mechanism": NAME, "runId": info["runId"], "asOfMs": info["asOfMs"], "ledgers": chosen.count()}
    write_summary(RunDir(run_dir), summary)
    return summary


def checks(spark, run_dir, spec) -> list:
    """Re-derived from the snapshot apart from the planner: every planned ledger exists, is empty and is not its
    topic's current ledger."""
    from pyspark.sql import functions as F

    from housekeeping.engine.gate import CheckFrame, must_be_true
    from spark_apps.shared.io import read_actions, read_snapshot

    ledgers = read_snapshot(spark, run_dir)["ledgers"]
    current = ledgers.groupBy("topic").agg(F.max("ledgerId").alias("currentLedgerId"))
    frame = (
        read_actions(spark, run_dir)
        .join(ledgers.select("topic", "ledgerId", "entries"), ["topic", "ledgerId"], "left")
        .join(current, "topic", "left")
        .select(
            "topic",
            "ledgerId",
            F.coalesce(F.col("entries") == 0, F.lit(False)).alias("empty"),
            F.coalesce(F.col("ledgerId") < F.col("currentLedgerId"), F.lit(False)).alias("closed"),
        )
    )
    return [CheckFrame("empty_ledgers", frame, must_be_true("empty", "closed"))]


MECHANISM_ACTION_NAME = "forget_empty_ledger"


def parse_args(argv=None):  # the plan app's entry points, as the architecture test asks of every plan app
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--run-dir", required=True)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    from spark_apps.shared.session import get_spark

    run(get_spark(f"housekeeping-plan-{NAME}"), parse_args(argv).run_dir)
    return 0


# --- the mechanism itself -------------------------------------------------------------------------------------


def make_mechanism(template_dir: Path):
    from housekeeping.engine.mechanism import Mechanism, TaskIds
    from housekeeping.engine.report import run_section

    class UnlistEmpty(Mechanism):
        def build_report(self, run_dir: Path, *, dry_run: bool) -> dict[str, Any]:
            from housekeeping.engine.run_dir import read_run_info

            return run_section(run_dir, read_run_info(run_dir), dry_run)

    template = template_dir / "report.md.j2"
    template.write_text(
        "# {{ r.mechanism }} {{ r.runId }}\n\ngate: {{ r.gate.success }}\n"
        "{% if r.apply %}forgotten: {{ r.apply.emptyLedgersForgotten }}{% endif %}\n",
        encoding="utf-8",
    )
    return UnlistEmpty(
        name=NAME,
        title="empty-ledger unlisting",
        pulsar="(none: a test's mechanism)",
        dag_id="empty_ledger_unlisting",
        schedule="@daily",
        tags=("test",),
        task_ids=TaskIds(
            plan="plan_empty_ledgers",
            validate="validate_empty_ledger_plan",
            apply="apply_empty_ledgers",
            report="write_empty_ledger_report",
        ),
        plan_app=__name__,
        gate_checks=__name__,
        actions=(_forget_empty_ledger(),),
        report_template=template,
    )


# --- the test ---------------------------------------------------------------------------------------------------


def _shared_sources() -> dict[str, str]:
    """Digest of every library and Spark-app source: proof that nothing shared was edited to run the mechanism."""
    roots = (REPO / "include" / "housekeeping", REPO / "spark_apps")
    return {
        str(p.relative_to(REPO)): hashlib.sha256(p.read_bytes()).hexdigest()
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


MANIFEST = {
    "namespaces": {"t/ns": {}, "t/held": {}},
    "topics": {
        # 11 and 13 are empty closed ledgers; 14, the current ledger, is empty too and stays.
        "persistent://t/ns/a": topic_body(
            [
                (10, 5, 500, T0),
                (11, 0, 0, T0 + 1),
                (12, 3, 300, T0 + 2),
                (13, 0, 0, T0 + 3),
                (14, 0, 0, None),
            ],
            {"sub": "12:2"},
        ),
        # Nothing empty but its current ledger: nothing to do.
        "persistent://t/ns/b": topic_body([(20, 2, 200, T0), (21, 0, 0, None)], {"sub": "20:0"}),
        # An empty closed ledger under a hold: the planner leaves it, the gate would refuse it.
        "persistent://t/held/c": topic_body([(30, 0, 0, T0), (31, 1, 100, None)], {"sub": "31:0"}),
    },
}


def test_a_mechanism_made_in_the_test_runs_plan_gate_apply_through_the_cli(capsys, tmp_path, spark):
    from housekeeping.engine.run_dir import RunDir, read_json
    from housekeeping.mechanisms.registry import get_mechanism, registered
    from housekeeping.observe.run_figures import run_figures
    from housekeeping.store.manifest.export import export_manifest
    from housekeeping.store.store import Store

    before = _shared_sources()
    store = str(tmp_path / "store")
    manifest = write_manifest(tmp_path, MANIFEST)
    code, _, err = run_cli(capsys, "load", "--store", store, "--manifest", str(manifest))
    assert code == 0, err
    code, _, err = run_cli(capsys, "hold", "add", "t/held", "--store", store, "--reason", "legal")
    assert code == 0, err
    as_of = iso(T0 + 60_000)

    with registered(make_mechanism(tmp_path)):
        assert get_mechanism(NAME).action_names == (MECHANISM_ACTION_NAME,)
        code, out, err = run_cli(capsys, "plan", NAME, "--store", store, "--as-of", as_of, "--format", "json")
        assert code == 0, err
        plan = json.loads(out)
        assert plan["gate"] == {"success": True, "failed": []}
        assert [(a["topic"], a["ledgerId"], a["action"]) for a in plan["actions"]] == [
            ("persistent://t/ns/a", 11, MECHANISM_ACTION_NAME),
            ("persistent://t/ns/a", 13, MECHANISM_ACTION_NAME),
        ]

        code, out, err = run_cli(capsys, "apply", NAME, "--store", store, "--as-of", as_of)
        assert code == 0, err
        result = json.loads(out)
        assert result["emptyLedgersForgotten"] == 2
        assert result["appliedTopics"] == ["persistent://t/ns/a"]
        run_dir = RunDir(result["runDir"])
        assert "forgotten: 2" in run_dir.report_md.read_text(encoding="utf-8")
        assert read_json(run_dir.gate_result)["success"] is True
        # The run figures count it by its kind, as any mechanism's.
        assert run_figures(run_dir)["gauges"]["planned_actions"] == 2.0

        code, out, _ = run_cli(capsys, "journal", "--store", store, "--format", "json")
        assert code == 0
        journaled = [row for row in json.loads(out)["entries"] if row["mechanism"] == NAME]
        assert {row["status"] for row in journaled} >= {"started", "applied", "finished"}, journaled

    topics = export_manifest(Store.open(Path(store)))["topics"]
    assert [ledger["ledgerId"] for ledger in topics["persistent://t/ns/a"]["ledgers"]] == [10, 12, 14]
    assert [ledger["ledgerId"] for ledger in topics["persistent://t/held/c"]["ledgers"]] == [30, 31]
    # Out of the block the registry is as it was, and no shared file changed.
    with pytest.raises(Exception, match="unknown mechanism"):
        get_mechanism(NAME)
    assert _shared_sources() == before


def test_its_gate_refuses_a_plan_its_checks_do_not_derive(capsys, tmp_path, spark, monkeypatch):
    """The gate is the mechanism's own checks plus the shared ones: a plan holding ledgers with entries is refused
    (exit 3, the failed check named) and nothing is applied."""
    import sys

    from housekeeping.mechanisms.registry import registered
    from housekeeping.store.manifest.export import export_manifest
    from housekeeping.store.store import Store

    store = str(tmp_path / "store")
    code, _, err = run_cli(
        capsys, "load", "--store", store, "--manifest", str(write_manifest(tmp_path, MANIFEST))
    )
    assert code == 0, err
    # A broken planner: every closed ledger, empty or not.
    planner = empty_closed_ledgers
    monkeypatch.setattr(
        sys.modules[__name__],
        "empty_closed_ledgers",
        lambda ledgers: planner(ledgers.withColumn("entries", ledgers.entries * 0)),
    )
    with registered(make_mechanism(tmp_path)):
        code, _, err = run_cli(capsys, "apply", NAME, "--store", store, "--as-of", iso(T0 + 60_000))
    assert code == 3, err
    assert "empty_ledgers" in err
    ledgers = export_manifest(Store.open(Path(store)))["topics"]["persistent://t/ns/a"]["ledgers"]
    assert [ledger["ledgerId"] for ledger in ledgers] == [10, 11, 12, 13, 14]
