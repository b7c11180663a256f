"""The README lists what the code defines, so a new mechanism, DAG or setting cannot leave it stale: its DAG table
against the mechanism registry and the dags/ folder, its configuration table against every setting the code reads,
and each DAG's own docs against the DAG's tasks."""

from __future__ import annotations

import ast
import re

import pytest

from housekeeping.mechanisms.registry import MECHANISMS
from tests.conftest import REPO

pytestmark = pytest.mark.unit

README = REPO / "README.md"
# Set by the project for its own processes, never by an operator: the fault point a test kills a process at, and the
# SQL settings a Connect task hands to the app it launches.
INTERNAL_SETTINGS = {"HOUSEKEEPING_FAULT_POINT", "HOUSEKEEPING_CONNECT_SQL_CONF", "HOUSEKEEPING_STEP"}
SETTING = re.compile(r"HOUSEKEEPING_[A-Z][A-Z0-9_]*[A-Z0-9]")


def table_rows(marker: str) -> list[list[str]]:
    """The cells of the README table between ``<!-- marker ... -->`` and ``<!-- /marker -->``, header and rule
    skipped."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker}\b.*?-->\n(.*?)<!-- /{marker} -->", text, re.S)
    assert match, f"README.md has no {marker} table"
    lines = [line for line in match.group(1).splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def code_names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_dag_table_is_the_registry_and_the_dags_folder():
    rows = {code_names(row[0])[0]: row for row in table_rows("dag-table")}
    assert set(rows) == {path.stem for path in (REPO / "dags").glob("*.py")}, "one row per DAG file"
    for mechanism in MECHANISMS.values():
        dag, schedule, acts, approval, _ = rows[mechanism.dag_id]
        assert code_names(schedule) == [mechanism.schedule], mechanism.dag_id
        assert code_names(acts) == list(mechanism.action_names), mechanism.dag_id
        assert code_names(approval) == [mechanism.task_ids.approve], mechanism.dag_id
    others = set(rows) - {m.dag_id for m in MECHANISMS.values()}
    for dag_id in others:
        assert rows[dag_id][2] == "nothing" and rows[dag_id][3] == "none", f"{dag_id} deletes nothing"


def _settings_the_code_reads() -> set[str]:
    found: set[str] = set()
    for folder in ("include", "spark_apps", "dags", "plugins"):
        for source in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found.update(m for m in SETTING.findall(node.value) if m == node.value)
    return found


def test_the_configuration_table_lists_every_setting_the_code_reads():
    read = _settings_the_code_reads()
    assert {"HOUSEKEEPING_STORE_ROOT", "HOUSEKEEPING_APPLY_BATCH_TOPICS"} <= read, (
        "the scan finds the settings"
    )
    listed = {name for row in table_rows("settings-table") for name in SETTING.findall(row[0])}
    assert read - INTERNAL_SETTINGS - listed == set(), "settings the README does not list"
    assert listed - read == set(), "the README lists settings no code reads"


@pytest.mark.parametrize("mechanism", list(MECHANISMS.values()), ids=list(MECHANISMS))
def test_each_dag_file_docs_name_every_task_of_the_dag(mechanism):
    ids = mechanism.task_ids
    tasks = [
        "take_snapshot",
        ids.plan,
        ids.validate,
        ids.approve,
        ids.apply,
        "purge_pending_deletions",
        ids.report,
    ]
    doc = ast.get_docstring(ast.parse((REPO / "dags" / f"{mechanism.dag_id}.py").read_text(encoding="utf-8")))
    assert doc and [task for task in tasks if f"`{task}`" not in doc] == [], mechanism.dag_id
