"""A ninth per-topic mechanism is eight files and the registry's one line (docs/architecture.md, "How to add a
mechanism"). ``ninth/`` beside this file holds one as it would be written in the repository, ``unlist_empty`` (closed
ledgers that hold no entry leave their topic's ledger list, one action ``forget_empty_ledger``):

- ``spark_apps/unlist_empty/``: ``rule.py`` (the rule, plain Python over one topic), ``checks.py`` (the gate's checks,
  apart from the rule), ``plan.py`` and ``gate.py`` (their declarations on the two skeletons), ``__init__.py``;
- ``include/housekeeping/mechanisms/unlist_empty/``: ``__init__.py`` (the mechanism's declaration), ``actions.py``
  (its action kind and its apply);
- ``dags/empty_ledger_unlisting.py``.

Its apps are found by its name, its report is the engine's default page, and the import contracts cover any package
under ``spark_apps`` and ``housekeeping.mechanisms``. The test puts those folders on the packages' paths (as if copied
into the repository) and registers the mechanism as the registry's line would; it then runs plan -> gate -> apply ->
report through the ``housekeeping`` CLI and builds its DAG, and no shared file is changed. The shared engine gives it
the rest: the snapshot, the gate's hold checks and Great Expectations, the digest, the topic version's
compare-and-set, the journal, the pending-deletion log, the run figures.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from housekeeping.engine.documents import read_gate_result
from housekeeping.engine.mechanism import Mechanism
from tests.conftest import REPO, iso, run_cli, topic_body, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

NINTH = Path(__file__).with_name("ninth")
NAME = "unlist_empty"
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SPARK_MODULES = ("rule", "checks", "plan", "gate")


def _shared_sources() -> dict[str, str]:
    """Digest of every library and Spark-app source: proof that nothing shared was edited to run the mechanism."""
    roots = (REPO / "include" / "housekeeping", REPO / "spark_apps")
    return {
        str(p.relative_to(REPO)): hashlib.sha256(p.read_bytes()).hexdigest()
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def ninth(monkeypatch) -> Iterator[Mechanism]:
    """The ninth mechanism as if its files were in the repository, registered for the test."""
    from pyspark import cloudpickle

    import housekeeping.mechanisms
    import spark_apps
    from housekeeping.mechanisms.registry import registered

    monkeypatch.setattr(spark_apps, "__path__", [*spark_apps.__path__, str(NINTH / "spark_apps")])
    monkeypatch.setattr(
        housekeeping.mechanisms,
        "__path__",
        [*housekeeping.mechanisms.__path__, str(NINTH / "include" / "housekeeping" / "mechanisms")],
    )
    # Spark's Python workers import the rule by its module, which is on no path of theirs: its functions go to them
    # whole (the repository's mechanisms are on the workers' path as any other module).
    by_value = [importlib.import_module(f"spark_apps.{NAME}.{m}") for m in SPARK_MODULES] + [
        sys.modules[__name__]
    ]
    for module in by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        with registered(importlib.import_module(f"housekeeping.mechanisms.{NAME}").MECHANISM) as mechanism:
            yield mechanism
    finally:
        for module in by_value:
            cloudpickle.unregister_pickle_by_value(module)
        for name in [n for n in sys.modules if f".{NAME}" in n]:
            del sys.modules[name]


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


def _store(capsys, tmp_path) -> str:
    store = str(tmp_path / "store")
    code, _, err = run_cli(
        capsys, "load", "--store", store, "--manifest", str(write_manifest(tmp_path, MANIFEST))
    )
    assert code == 0, err
    code, _, err = run_cli(capsys, "hold", "add", "t/held", "--store", store, "--reason", "legal")
    assert code == 0, err
    return store


def test_the_ninth_mechanism_is_eight_files_found_by_its_name():
    files = sorted(
        str(p.relative_to(NINTH)) for p in NINTH.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    assert files == [
        "dags/empty_ledger_unlisting.py",
        "include/housekeeping/mechanisms/unlist_empty/__init__.py",
        "include/housekeeping/mechanisms/unlist_empty/actions.py",
        "spark_apps/unlist_empty/__init__.py",
        "spark_apps/unlist_empty/checks.py",
        "spark_apps/unlist_empty/gate.py",
        "spark_apps/unlist_empty/plan.py",
        "spark_apps/unlist_empty/rule.py",
    ]


def test_it_runs_plan_gate_apply_and_report_through_the_cli_and_builds_its_dag(
    capsys, tmp_path, spark, ninth
):
    from housekeeping.engine.run_dir import RunDir
    from housekeeping.mechanisms.registry import get_mechanism
    from housekeeping.observe.run_figures import run_figures
    from housekeeping.store.manifest.export import export_manifest
    from housekeeping.store.store import Store

    before = _shared_sources()
    # Found by its name: its apps, and the engine's report page (it has none of its own).
    assert (ninth.plan_app, ninth.gate_checks) == (f"spark_apps.{NAME}.plan", f"spark_apps.{NAME}.gate")
    assert ninth.report_template.parent.name == "templates"
    store = _store(capsys, tmp_path)
    as_of = iso(T0 + 60_000)
    code, out, err = run_cli(capsys, "plan", NAME, "--store", store, "--as-of", as_of, "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["gate"] == {"success": True, "failed": []}
    assert [(a["topic"], a["ledgerId"], a["action"], a["reason"]) for a in plan["actions"]] == [
        ("persistent://t/ns/a", 11, "forget_empty_ledger", "closed ledger 11 holds no entry (the current ledger is 14)"),
        ("persistent://t/ns/a", 13, "forget_empty_ledger", "closed ledger 13 holds no entry (the current ledger is 14)"),
    ]  # fmt: skip
    assert plan["summary"] == {"ledgersToForget": 2, "bytesListed": 0}

    code, out, err = run_cli(capsys, "apply", NAME, "--store", store, "--as-of", as_of)
    assert code == 0, err
    result = json.loads(out)
    assert result["emptyLedgersForgotten"] == 2 and result["appliedTopics"] == ["persistent://t/ns/a"]
    run_dir = RunDir(result["runDir"])
    page = run_dir.report_md.read_text(encoding="utf-8")
    assert page.startswith("# empty-ledger unlisting report")
    assert "| `forget_empty_ledger` | a closed ledger without entries leaves the ledger list | 2 |" in page
    assert "- emptyLedgersForgotten: 2" in page and "- ledgersToForget: 2" in page
    assert read_gate_result(run_dir).success is True
    assert run_figures(run_dir)["gauges"]["planned_actions"] == 2.0  # counted by its kind, as any mechanism's
    code, out, _ = run_cli(capsys, "journal", "--store", store, "--format", "json")
    journaled = [row for row in json.loads(out)["entries"] if row["mechanism"] == NAME]
    assert {row["status"] for row in journaled} >= {"started", "applied", "finished"}, journaled

    topics = export_manifest(Store.open(Path(store)))["topics"]
    assert [ledger["ledgerId"] for ledger in topics["persistent://t/ns/a"]["ledgers"]] == [10, 12, 14]
    assert [ledger["ledgerId"] for ledger in topics["persistent://t/held/c"]["ledgers"]] == [30, 31]

    dag = runpy.run_path(str(NINTH / "dags" / "empty_ledger_unlisting.py"))["dag"]
    assert dag.dag_id == "empty_ledger_unlisting" and dag.task_dict.keys() >= {
        "take_snapshot", "plan_empty_ledgers", "validate_empty_ledger_plan", "apply_empty_ledgers",
        "purge_pending_deletions", "write_empty_ledger_report",
    }  # fmt: skip
    assert get_mechanism(NAME) is ninth and _shared_sources() == before


def test_its_gate_refuses_a_plan_its_checks_do_not_derive(capsys, tmp_path, spark, ninth, monkeypatch):
    """The gate is the mechanism's own checks plus the shared ones: a planner that lists ledgers holding entries is
    refused (exit 3, the failed frame named) and nothing is applied."""
    from housekeeping.store.manifest.export import export_manifest
    from housekeeping.store.store import Store

    plan = sys.modules[f"spark_apps.{NAME}.plan"]
    planner = plan.plan_topic

    def every_closed_ledger(topic, ledgers):
        return planner(topic, [dict(ledger, entries=0) for ledger in ledgers])

    monkeypatch.setattr(plan, "plan_topic", every_closed_ledger)
    store = _store(capsys, tmp_path)
    code, _, err = run_cli(capsys, "apply", NAME, "--store", store, "--as-of", iso(T0 + 60_000))
    assert code == 3, err
    assert "ledgers: expect_column_values_to_be_in_set(empty)" in err, err
    ledgers = export_manifest(Store.open(Path(store)))["topics"]["persistent://t/ns/a"]["ledgers"]
    assert [ledger["ledgerId"] for ledger in ledgers] == [10, 11, 12, 13, 14]
