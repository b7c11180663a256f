"""compacted_ledger_retention under Airflow, the DAG run of the Spark apply: a real dag.test() whose plan, gate and
apply run on a real Spark Connect server (the spark_connect connection of the default local set-up; the
spark-submit path of the same operator: tests/dags/test_dags.py, tests/e2e/test_spark_cluster.py), with the Great
Expectations gate, over a generated store with keyed topics. (A dry run through Airflow:
tests/e2e/test_live_airflow.py; every DAG's dry-run wiring: tests/dags/test_dags.py; compaction's dry run
in-process: tests/compaction/test_scenarios.py.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from housekeeping.engine.plan import read_table
from housekeeping.store import metadata_schema as t
from housekeeping.store.generate import GenerateOptions, generate_store
from housekeeping.store.manifest.export import export_manifest

pytestmark = [pytest.mark.airflow, pytest.mark.processes]

AS_OF = datetime(2026, 11, 1, tzinfo=UTC)
NAMED = "persistent://globex/tables/t-00006"


@pytest.fixture(scope="module")
def dagbag(dagbag_on_spark_connect):
    return dagbag_on_spark_connect


def _compacted(store) -> dict[str, tuple]:
    with store.engine.connect() as conn:
        return {
            r.topic: (r.ledger_id, r.status, r.entries)
            for r in conn.execute(select(t.compacted_ledgers).order_by(t.compacted_ledgers.c.topic))
        }


def test_compaction_dag_compacts_the_keyed_topics(dagbag, tmp_path, monkeypatch):
    store = generate_store(tmp_path / "store", GenerateOptions(topics=28, seed=7, entries_per_ledger=60))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    before = export_manifest(store, with_messages=True)
    assert _compacted(store) == {}
    dag = dagbag.get_dag("compacted_ledger_retention")

    run = dag.test(logical_date=AS_OF, run_conf={"dry_run": False, "compact_topics": [NAMED]})
    assert run.state == "success"
    run_dir = max((store.root / "runs" / "compaction").iterdir(), key=lambda p: p.stat().st_mtime)
    assert json.loads((run_dir / "gate" / "result.json").read_text())["success"]
    actions = {a["topic"]: a for a in read_table(run_dir, "actions")}
    assert NAMED in actions and len(actions) >= 2, "the named topic and at least one over its threshold"
    compacted = _compacted(store)
    assert set(compacted) == set(actions)
    for topic, (ledger_id, status, entries) in compacted.items():
        assert status == "current" and entries == actions[topic]["entriesKept"]
        files = store.ledger_dir(topic, ledger_id)
        table = pq.read_table(files)
        assert table.num_rows == entries
        keys = table.column("key").to_pylist()
        assert len(keys) == len(set(keys)) and None not in keys, "one entry per key, keyless dropped"
        positions = list(
            zip(table.column("ledgerId").to_pylist(), table.column("entryId").to_pylist(), strict=True)
        )
        assert positions == sorted(positions), "original publish order"
    after = export_manifest(store)
    for topic, action in actions.items():
        assert after["topics"][topic]["cursors"]["__compaction"]["markDeletePosition"] == action["to"]
        # raw ledgers are untouched by compaction
        assert after["topics"][topic]["ledgers"] == before["topics"][topic]["ledgers"]
    report = (run_dir / "report" / "report.md").read_text()
    assert "Compaction report" in report and NAMED in report
