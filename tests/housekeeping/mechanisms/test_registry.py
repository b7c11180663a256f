"""The architecture: the registry is the only dispatch and the action catalogue the only list of actions. Every
mechanism names modules and a template that exist with the entry points the launcher and the gate app call, the
mechanism folders are exactly the registered mechanisms, no module outside a mechanism's package switches on a
mechanism's name or spells one of its action names, and every kind is declared once. Import direction, the
library's rooms and cycles are checked by `lint-imports` (contracts in pyproject.toml, run by `make lint`)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine.actions import ActionKind
from housekeeping.engine.mechanism import Mechanism
from housekeeping.mechanisms import registry
from tests.conftest import REPO

pytestmark = pytest.mark.unit

LIBRARY = REPO / "include" / "housekeeping"
SPARK_APPS = REPO / "spark_apps"
SHARED = "shared"  # the folder of what mechanisms share (never a mechanism), in both trees


def test_the_eight_mechanisms_in_order():
    assert registry.mechanism_names() == (
        "trim",
        "expiry",
        "backlog",
        "gc",
        "compaction",
        "erasure",
        "offload",
        "scrub",
    )


def test_a_policy_what_if_runs_the_mechanisms_whose_plans_follow_policies():
    from housekeeping.what_if.overlay import PolicyOverlay
    from housekeeping.what_if.what_if import check_request

    assert registry.what_if_mechanisms() == ("trim", "expiry", "backlog", "gc", "compaction", "offload")
    with pytest.raises(InputError, match="erasure does not"):
        check_request("erasure", PolicyOverlay(), None)


def test_an_unknown_mechanism_is_bad_input_naming_the_known_ones():
    with pytest.raises(InputError, match=r"unknown mechanism 'ttl': expected one of trim, expiry, backlog"):
        registry.get_mechanism("ttl")


@pytest.mark.parametrize("name", registry.mechanism_names())
def test_a_mechanism_names_modules_and_a_template_that_exist(name):
    spec = registry.get_mechanism(name)
    assert isinstance(spec, Mechanism) and spec.name == name
    plan = importlib.import_module(spec.plan_app)
    assert {"parse_args", "main", "run"} <= set(vars(plan)), spec.plan_app
    assert list(inspect.signature(plan.run).parameters)[:2] == ["spark", "run_dir"]
    gate = importlib.import_module(spec.gate_checks)
    assert list(inspect.signature(gate.checks).parameters) == ["spark", "run_dir", "spec"]
    if spec.apply_app is not None:
        apply_app = importlib.import_module(spec.apply_app)
        assert {"parse_args", "main", "run"} <= set(vars(apply_app))
    assert spec.report_template.is_file()
    # Everything of its own lives under its name: its Spark apps, its package, its template.
    for module in (spec.plan_app, spec.gate_checks, spec.apply_app):
        if module is not None:
            assert module.startswith(f"spark_apps.{name}."), module
    assert importlib.import_module(f"housekeeping.mechanisms.{name}").MECHANISM is spec
    assert spec.report_template.parent == LIBRARY / "mechanisms" / name
    # Its report is its own, found by convention: its package's report module.
    assert spec.report_module == f"housekeeping.mechanisms.{name}.report"
    report = importlib.import_module(spec.report_module)
    assert list(inspect.signature(report.build_report).parameters) == ["run_dir", "dry_run"]


def test_the_folders_are_the_registered_mechanisms():
    spark_folders = {
        p.name for p in SPARK_APPS.iterdir() if (p / "__init__.py").is_file() and p.name != SHARED
    }
    packages = {
        p.name
        for p in (LIBRARY / "mechanisms").iterdir()
        if (p / "__init__.py").is_file() and p.name != SHARED
    }
    assert spark_folders == set(registry.mechanism_names())
    assert packages == set(registry.mechanism_names())


def test_the_import_contracts_keep_every_registered_mechanism_independent():
    """pyproject.toml's independence contracts name every package under ``spark_apps`` and
    ``housekeeping.mechanisms`` by a wildcard: each registered mechanism's packages are among those they keep
    independent, and a new one is without an edit there."""
    import tomllib

    import grimp
    from importlinter.domain.helpers import module_expressions_to_modules
    from importlinter.domain.imports import ModuleExpression

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    independent = [c["modules"] for c in contracts["contracts"] if c["type"] == "independence"]
    assert independent == [["spark_apps.*"], ["housekeeping.mechanisms.*"]]
    graph = grimp.build_graph("spark_apps", "housekeeping")
    covered = [
        {m.name for m in module_expressions_to_modules(graph, [ModuleExpression(e) for e in modules])}
        for modules in independent
    ]
    names = registry.mechanism_names()
    assert {f"spark_apps.{n}" for n in names} <= covered[0]
    assert {f"housekeeping.mechanisms.{n}" for n in names} <= covered[1]


def test_every_dag_file_is_one_factory_call_for_a_registered_mechanism():
    dag_ids = {registry.get_mechanism(n).dag_id for n in registry.mechanism_names()}
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


# --- no switch on a mechanism's name, no list of action names ------------------------------------------------


def _sources() -> list[Path]:
    roots = (LIBRARY, SPARK_APPS, REPO / "dags", REPO / "plugins")
    return [p for root in roots for p in root.rglob("*.py") if "migrations" not in p.relative_to(REPO).parts]


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


def test_nothing_outside_the_mechanism_packages_switches_on_a_mechanism_name():
    offenders = {}
    for path in _sources():
        relative = path.relative_to(REPO)
        if "mechanisms" in relative.parts:
            continue
        lines = _switches_on_a_mechanism_name(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            offenders[str(relative)] = lines
    assert offenders == {}


def test_the_switch_detector_finds_a_switch():
    source = 'if run.mechanism == "gc":\n    pass\nBUILDERS = {"trim": 1, "expiry": 2}\n'
    assert _switches_on_a_mechanism_name(ast.parse(source)) == [1, 3]


def _declaring_package(kind: ActionKind) -> str:
    """The package that declares ``kind``: a mechanism's, or ``shared`` (the module its constant is defined in)."""
    for module in (f"housekeeping.mechanisms.{n}.actions" for n in [*registry.mechanism_names(), SHARED]):
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError:
            continue
        if any(value is kind for value in vars(found).values()):
            return module.split(".")[2]
    shared = importlib.import_module("housekeeping.mechanisms.shared.cursors")
    assert any(value is kind for value in vars(shared).values()), f"{kind.name} is declared nowhere known"
    return SHARED


def _action_literals(text: str, names: set[str]) -> set[str]:
    """Action names spelled as string literals in ``text``."""
    return set(re.findall(r"""["']([a-z_]+)["']""", text)) & names


def _offending_literals() -> dict[str, set[str]]:
    """Files outside the declaring package (library and Spark side) that spell an action's name."""
    kinds = registry.action_kinds()
    owner = {name: _declaring_package(kind) for name, kind in kinds.items()}
    offenders: dict[str, set[str]] = {}
    for path in _sources():
        relative = path.relative_to(REPO).parts
        # The package a file belongs to: include/housekeeping/mechanisms/<pkg>/..., or spark_apps/<pkg>/...
        package = (
            relative[3]
            if relative[:3] == ("include", "housekeeping", "mechanisms") and len(relative) > 4
            else relative[1]
            if relative[0] == "spark_apps" and len(relative) > 2
            else None
        )
        spelled = {
            name
            for name in _action_literals(path.read_text(encoding="utf-8"), set(kinds))
            if owner[name] != package
        }
        if spelled:
            offenders["/".join(relative)] = spelled
    return offenders


def test_no_action_name_is_spelled_outside_the_package_that_declares_it():
    """Consumers ask the catalogue (``registry.action_kinds``) or import the kind (``DELETE_LEDGER.name``)."""
    assert _offending_literals() == {}


def test_the_literal_detector_finds_an_action_name():
    assert _action_literals('DELETING = ("delete_ledger", "delete_topic")', {"delete_ledger"}) == {
        "delete_ledger"
    }


def test_every_kind_is_declared_once_and_by_the_package_of_the_mechanisms_that_plan_it():
    kinds = registry.action_kinds()  # raises on two declarations of one name
    planners: dict[str, set[str]] = {}
    for spec in registry.MECHANISMS.values():
        for kind in spec.actions:
            planners.setdefault(kind.name, set()).add(spec.name)
    for name, kind in kinds.items():
        package = _declaring_package(kind)
        assert package == SHARED or planners[name] == {package}, (name, package, planners[name])
        assert package != SHARED or len(planners[name]) > 1, (
            f"{name} is declared as shared but one mechanism plans it"
        )


# --- no function over 80 lines ---------------------------------------------------------------------------------

MAX_FUNCTION_LINES = 80
# A function that must be one piece says so in a comment right above its ``def`` containing this phrase.
ONE_PIECE = "must be one piece"


def _long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Functions longer than ``limit`` lines (decorators excluded) without a one-piece comment above them."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            above = lines[start - 2] if start >= 2 else ""
            if node.end_lineno - node.lineno + 1 > limit and ONE_PIECE not in above:
                found.append(f"{node.name}:{node.lineno}")
    return found


def test_no_function_is_over_80_lines_unless_it_says_why():
    offenders = {}
    for root in (LIBRARY, SPARK_APPS):
        for path in root.rglob("*.py"):
            found = _long_functions(path.read_text(encoding="utf-8"))
            if found:
                offenders[str(path.relative_to(REPO))] = found
    assert offenders == {}


def test_the_length_detector_finds_a_long_function_and_honours_the_comment():
    body = "".join(f"    x{i} = {i}\n" for i in range(3))
    source = (
        f"def short():\n    pass\n\n\n# this {ONE_PIECE}: why\ndef excused():\n{body}\n\ndef long():\n{body}"
    )
    assert _long_functions(source, limit=3) == ["long:12"]
