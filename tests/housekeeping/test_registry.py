"""The mechanism registry (housekeeping.registry) is the only dispatch, and the folders show the mechanisms: every
spec names modules and templates that exist with the entry points the launcher and the gate app call, the
mechanism folders are exactly the registered mechanisms, and no other module switches on a mechanism's name.
Import direction and cycles are checked by `lint-imports` (contracts in pyproject.toml, run by `make lint`)."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from housekeeping import registry
from housekeeping.errors import InputError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "include" / "housekeeping"
SPARK_APPS = REPO / "spark_apps"


def test_the_six_mechanisms_in_order():
    assert registry.mechanism_names() == ("trim", "expiry", "backlog", "gc", "compaction", "erasure")


def test_a_policy_what_if_runs_the_mechanisms_whose_plans_follow_policies():
    from housekeeping.policy_overlay import PolicyOverlay
    from housekeeping.what_if import check_request

    assert registry.what_if_mechanisms() == ("trim", "expiry", "backlog", "gc", "compaction")
    with pytest.raises(InputError, match="erasure does not"):
        check_request("erasure", PolicyOverlay(), None)


def test_an_unknown_mechanism_is_bad_input_naming_the_known_ones():
    with pytest.raises(InputError, match=r"unknown mechanism 'ttl': expected one of trim, expiry, backlog"):
        registry.mechanism_spec("ttl")


@pytest.mark.parametrize("name", registry.mechanism_names())
def test_a_spec_names_modules_and_templates_that_exist(name):
    spec = registry.mechanism_spec(name)
    assert spec.name == name
    plan = importlib.import_module(spec.plan_app)
    assert {"parse_args", "main", "run"} <= set(vars(plan)), spec.plan_app
    assert list(inspect.signature(plan.run).parameters)[:2] == ["spark", "run_dir"]
    gate = importlib.import_module(spec.gate_checks)
    assert list(inspect.signature(gate.checks).parameters) == ["spark", "run_dir", "spec"]
    if spec.apply_app is not None:
        apply_app = importlib.import_module(spec.apply_app)
        assert {"parse_args", "main", "run"} <= set(vars(apply_app))
    assert (LIBRARY / "templates" / spec.report_template).is_file()
    # The mechanism's code lives under its own name.
    for module in (spec.plan_app, spec.gate_checks, spec.apply_app):
        if module is not None:
            assert module.startswith(f"spark_apps.{name}."), module
    # Its report builder is its own or the one the cursor mechanisms share (housekeeping.report).
    assert spec.report.__module__ in (f"housekeeping.mechanisms.{name}", "housekeeping.report")
    assert list(inspect.signature(spec.report).parameters) == ["run_dir", "dry_run"]


def test_the_folders_are_the_registered_mechanisms():
    spark_folders = {
        p.name for p in SPARK_APPS.iterdir() if (p / "__init__.py").is_file() and p.name != "shared"
    }
    library_modules = {p.stem for p in (LIBRARY / "mechanisms").glob("*.py") if p.stem != "__init__"}
    assert spark_folders == set(registry.mechanism_names())
    assert library_modules == set(registry.mechanism_names())


def test_the_import_contracts_keep_every_registered_mechanism_independent():
    """pyproject.toml's import-linter contracts name the mechanisms; a new one must be added there too."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    independent = [c["modules"] for c in contracts["contracts"] if c["type"] == "independence"]
    names = list(registry.mechanism_names())
    assert independent == [
        [f"spark_apps.{n}" for n in names],
        [f"housekeeping.mechanisms.{n}" for n in names],
    ]


def test_every_dag_file_is_one_factory_call_for_a_registered_mechanism():
    dag_ids = {registry.mechanism_spec(n).dag_id for n in registry.mechanism_names()}
    built = set()
    for path in (REPO / "dags").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        ]
        if "build_housekeeping_dag" in calls:
            assert calls.count("build_housekeeping_dag") == 1, path.name
            built.add(path.stem)
    assert built == dag_ids


def _switches_on_a_mechanism_name(tree: ast.AST) -> list[int]:
    """Lines that compare something called ``mechanism`` with a mechanism's name, or build a dict or a match
    keyed by two or more mechanism names: a dispatch that belongs in the registry."""
    names = set(registry.mechanism_names())
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            says_mechanism = any("mechanism" in ast.unparse(side).lower() for side in sides)
            constants = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant)}
            if says_mechanism and names & constants:
                lines.append(node.lineno)
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if len(names & keys) >= 2:
                lines.append(node.lineno)
        elif isinstance(node, ast.Match):
            patterns = {
                c.value for case in node.cases for c in ast.walk(case.pattern) if isinstance(c, ast.Constant)
            }
            if names & patterns:
                lines.append(node.lineno)
    return lines


def test_nothing_outside_the_mechanism_modules_switches_on_a_mechanism_name():
    offenders = {}
    for root in (LIBRARY, SPARK_APPS, REPO / "dags", REPO / "plugins"):
        for path in root.rglob("*.py"):
            relative = path.relative_to(REPO)
            if "mechanisms" in relative.parts or "migrations" in relative.parts:
                continue
            lines = _switches_on_a_mechanism_name(ast.parse(path.read_text(encoding="utf-8")))
            if lines:
                offenders[str(relative)] = lines
    assert offenders == {}


def test_the_switch_detector_finds_a_switch():
    source = 'if run.mechanism == "gc":\n    pass\nBUILDERS = {"trim": 1, "expiry": 2}\n'
    assert _switches_on_a_mechanism_name(ast.parse(source)) == [1, 3]
