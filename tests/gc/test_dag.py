"""inactive_topic_gc under Airflow, the DAG run of the Python apply: a real dag.test() (plan and gate on the
suite's Spark Connect server as `make airflow` runs them, the Great Expectations gate, the apply engine in the
task) over a generated store, then a restore of what it deleted. (The DAG run of the Spark apply: tests/compaction/test_dag.py; a dry run in
tests/e2e/test_live_airflow.py; wiring of every DAG: tests/dags/test_dags.py.)"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime

import pytest

from housekeeping.engine.plan import read_table
from housekeeping.store.generate import PARTITIONED_TOPIC, GenerateOptions, generate_store
from housekeeping.store.manifest.export import export_manifest
from tests.conftest import run_cli

pytestmark = [pytest.mark.airflow, pytest.mark.processes]

AS_OF = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def dagbag(dagbag_on_spark_connect):
    return dagbag_on_spark_connect


@pytest.fixture
def statsd_packets(monkeypatch):
    """Airflow's [metrics] StatsD backend pointed at a UDP socket of the test, initialised the way the task runner
    initialises it (dag.test() runs tasks in this process); yields a function returning the lines received."""
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(0.2)
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(receiver.getsockname()[1]))
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
    lines: list[str] = []

    def received() -> list[str]:
        while True:
            try:
                lines.extend(receiver.recv(65536).decode().splitlines())
            except TimeoutError:
                return lines

    yield received
    from airflow.sdk._shared.observability.metrics.stats import NoStatsLogger

    stats.initialize(factory=NoStatsLogger, export_legacy_names=False)
    receiver.close()


def test_gc_dag_deletes_exactly_the_planned_topics_and_they_can_be_restored(
    dagbag, tmp_path, monkeypatch, capsys, statsd_packets
):
    store = generate_store(tmp_path / "store", GenerateOptions(topics=12, seed=7, entries_per_ledger=40))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    before = export_manifest(store, with_messages=True)

    run = dagbag.get_dag("inactive_topic_gc").test(logical_date=AS_OF, run_conf={"dry_run": False})
    assert run.state == "success"
    run_dir = max((store.root / "runs" / "gc").iterdir(), key=lambda p: p.stat().st_mtime)
    assert json.loads((run_dir / "gate" / "result.json").read_text())["success"]
    planned = {a["topic"] for a in read_table(run_dir, "actions") if a["action"] == "delete_topic"}
    assert f"{PARTITIONED_TOPIC}-partition-0" in planned, (
        "the generated idle partition must go for this to be a test"
    )
    after = export_manifest(store)
    assert set(after["topics"]) == set(before["topics"]) - planned
    assert after["partitionedTopics"] == {PARTITIONED_TOPIC: {"partitions": 3}}, (
        "metadata deletion is off by default"
    )
    assert "persistent://public/default/__change_events" in after["topics"]
    stamped = {a["topic"] for a in read_table(run_dir, "actions") if a["action"] == "refresh_last_active"}
    assert stamped and all(after["topics"][t]["lastActive"] == int(AS_OF.timestamp() * 1000) for t in stamped)
    # The run's figures went out through Airflow's own metrics path (StatsD here).
    packets = statsd_packets()
    assert f"airflow.housekeeping.gc.topics_deleted:{len(planned)}|c" in packets, packets
    assert "airflow.housekeeping.gc.gate_passed:1.0|g" in packets
    assert "airflow.housekeeping.gc.runs:1|c" in packets
    assert any(p.startswith("airflow.ti.finish") or p.startswith("airflow.ti_successes") for p in packets), (
        "Airflow's own metrics travel the same way"
    )
    report = (run_dir / "report" / "report.md").read_text()
    assert "Inactive-topic GC report" in report and "Kept topics and why" in report
    # The journal names the DAG run as the actor of every row the run wrote, with the plan rows.
    code, out, err = run_cli(
        capsys, "journal", "--store", str(store.root), "--run", "inactive_topic_gc__", "--format", "json"
    )
    assert code == 0, err
    entries = json.loads(out)["entries"]
    assert entries and all(e["actor"].startswith("airflow inactive_topic_gc (") for e in entries)
    deleted = [e for e in entries if e["status"] == "applied" and e["detail"].get("topicDeleted")]
    assert {e["topic"] for e in deleted} == planned
    assert all(e["planRows"][0]["action"] == "delete_topic" and e["planRows"][0]["reason"] for e in deleted)

    for topic in sorted(planned):
        code, _, err = run_cli(capsys, "restore", topic, "--store", str(store.root))
        assert code == 0, err
    restored = export_manifest(store, with_messages=True)
    for topic in planned:
        assert restored["topics"][topic]["messages"] == before["topics"][topic]["messages"]
