"""capacity_report under Airflow: its public shape, and real dag.test() runs: a run at a logical date writes what
`housekeeping forecast` and `housekeeping usage` answer at that as-of (so a backfilled date gives the same answer as
a run on that date), the latest pointer never moves back, and a bad horizon fails the task naming the param."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime

import pytest

from housekeeping.store.generate import GenerateOptions, generate_store
from tests.conftest import REPO, cli_json

pytestmark = pytest.mark.airflow

DAY_ONE, DAY_TWO = datetime(2026, 11, 1, 1, tzinfo=UTC), datetime(2026, 10, 31, 1, tzinfo=UTC)


@pytest.fixture
def dagbag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def test_the_dag_keeps_its_schedule_task_and_params(dagbag):
    dag = dagbag.get_dag("capacity_report")
    assert dag.doc_md and dag.max_active_runs == 1 and "housekeeping" in dag.tags
    assert "0 1 * * *" in dag.timetable.summary
    assert [t.task_id for t in dag.tasks] == ["write_capacity_report"]
    assert set(dag.params) == {"as_of", "horizon"}
    assert not any(t.task_id.startswith(("apply_", "purge_")) for t in dag.tasks), "it deletes nothing"


def test_a_run_writes_what_the_commands_answer_at_its_logical_date(dagbag, tmp_path, monkeypatch, capsys):
    store = generate_store(tmp_path / "store", GenerateOptions(topics=12, seed=3))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    dag = dagbag.get_dag("capacity_report")
    for logical_date in (DAY_ONE, DAY_TWO):  # the second: a backfill of an older date
        assert dag.test(logical_date=logical_date).state == "success"
    reports = store.root / "reports" / "capacity"
    latest = json.loads((reports / "latest.json").read_text())
    assert latest["asOf"] == "2026-11-01T01:00:00.000Z", (
        "a backfill of an older date does not move the latest"
    )
    for logical_date in (DAY_ONE, DAY_TWO):
        as_of = logical_date.strftime("%Y-%m-%dT%H:%M:%SZ")
        out = reports / f"{logical_date.strftime('%Y-%m-%dT%H-%M-%S')}.000Z"
        written = json.loads((out / "forecast.json").read_text())
        assert written == cli_json(capsys, "forecast", "--store", str(store.root), "--as-of", as_of)
        day_before = datetime.fromtimestamp(logical_date.timestamp() - 86_400, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        answered = cli_json(
            capsys, "usage", "--store", str(store.root), "--from", day_before, "--to", as_of, "--by", "tenant"
        )
        assert json.loads((out / "usage.json").read_text())["tenant"] == answered
        with (out / "usage-namespace.csv").open() as handle:
            rows = list(csv.DictReader(handle))
        assert rows and {r["tier"] for r in rows} <= {"local", "tier", "listed"}
        assert "Capacity report" in (out / "index.html").read_text()


def test_a_bad_horizon_fails_the_task_naming_the_param(dagbag, tmp_path, monkeypatch):
    store = generate_store(tmp_path / "store", GenerateOptions(topics=3, seed=3))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    run = dagbag.get_dag("capacity_report").test(logical_date=DAY_ONE, run_conf={"horizon": "20y"})
    assert run.state == "failed"
    assert not (store.root / "reports" / "capacity" / "latest.json").exists()


def test_a_run_alerts_the_limits_met_soon_at_the_soonest_credible_answer(dagbag, tmp_path, monkeypatch):
    """A namespace whose backlog meets its quota in about two days (a day ahead of the 7-day default) and a tenant
    budget beyond its 30 days: the run appends one capacity alert naming the namespace, not the tenant; with the
    quota's alerting horizon at one day, none."""
    from housekeeping.orchestration.alerts import capacity_alert
    from housekeeping.store.manifest.load import load_manifest
    from tests.conftest import topic_body, write_manifest

    hour, mib = 3_600_000, 1024 * 1024
    start = int(DAY_ONE.timestamp() * 1000) - 48 * hour
    ledgers = [(h + 1, 100, mib, start + (h + 1) * hour) for h in range(47)] + [(48, 0, 0, None)]
    document = {
        "namespaces": {
            "acme/orders": {
                "backlog_quota_map": {
                    "destination_storage": {"limitSize": 96 * mib, "policy": "producer_request_hold"}
                }
            }
        },
        "topics": {"persistent://acme/orders/a": topic_body(ledgers, {"sub": "1:-1"})},
    }
    store = load_manifest(tmp_path / "store", write_manifest(tmp_path, document))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    monkeypatch.setenv("HOUSEKEEPING_CAPACITY_BUDGETS", json.dumps({"acme": {"local": 1024**5}}))
    assert dagbag.get_dag("capacity_report").test(logical_date=DAY_ONE).state == "success"
    (alert,) = [
        json.loads(line) for line in (store.root / "alerts" / "capacity.jsonl").read_text().splitlines()
    ]
    assert alert["alert"] == "capacity_limit_near" and alert["asOf"] == "2026-11-01T01:00:00.000Z"
    (near,) = alert["limits"]
    assert (near["namespace"], near["limit"]) == ("acme/orders", "backlog_quota_size")
    assert 1.5 * 86_400 < near["soonestSecondsUntil"] < 3 * 86_400, near
    forecast = json.loads(
        (store.root / "reports" / "capacity" / "2026-11-01T01-00-00.000Z" / "forecast.json").read_text()
    )
    assert capacity_alert(forecast, None, 86_400, 30 * 86_400) is None
