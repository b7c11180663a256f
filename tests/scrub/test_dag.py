"""store_scrub under Airflow: a real dag.test() (the listing in take_snapshot, plan and gate on the worker's Spark
Connect server as `make airflow` runs them, Great Expectations, the repair in the apply task, the purge, the report)
over a generated store with an old orphan and a lost ledger: the orphan is queued for purge (not deleted), the lost
ledger is reported as data loss and left in the metadata, and `housekeeping metrics` exports the scrub's figures."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime

import pytest

from housekeeping.engine.plan import read_summary
from housekeeping.store.generate import GenerateOptions, generate_store
from tests.conftest import run_cli
from tests.scrub.test_scenarios import age

pytestmark = [pytest.mark.airflow, pytest.mark.processes]

AS_OF = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def dagbag(dagbag_on_spark_connect):
    return dagbag_on_spark_connect


def test_scrub_dag_queues_the_orphan_and_reports_the_lost_ledger(dagbag, tmp_path, monkeypatch, capsys):
    store = generate_store(tmp_path / "store", GenerateOptions(topics=6, seed=3, entries_per_ledger=30))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    topic_dir = next(
        p for p in sorted((store.root / "ledgers" / "persistent").glob("*/*/*")) if len(list(p.iterdir())) > 2
    )
    first, second = sorted(topic_dir.iterdir(), key=lambda p: int(p.name))[:2]
    shutil.copytree(second, topic_dir / "999999")
    age(topic_dir / "999999")
    shutil.rmtree(first)

    run = dagbag.get_dag("store_scrub").test(logical_date=AS_OF, run_conf={"dry_run": False})
    assert run.state == "success"
    run_dir = next((store.root / "runs" / "scrub").iterdir())
    summary = read_summary(run_dir)
    assert (summary["orphans"], summary["missingLedgers"], summary["errors"]) == (1, 1, 2)
    applied = json.loads((run_dir / "apply" / "result.json").read_text())
    orphan = str((topic_dir / "999999").relative_to(store.root))
    assert applied["orphansQueued"] == [f"local:{orphan}"]
    assert (topic_dir / "999999").is_dir(), "queued, not deleted by the run that found it"
    report = (run_dir / "report" / "report.md").read_text()
    assert "DATA LOSS: 1 ledger(s)" in report and first.name in report

    code, out, err = run_cli(capsys, "metrics", "--store", str(store.root), "--as-of", "2026-11-01T00:00:00Z")
    assert code == 0, err
    assert "housekeeping_scrub_missing_ledgers 1.0" in out
    assert "housekeeping_scrub_orphans 1.0" in out

    # The storage report shows the latest scrub, the lost ledger marked.
    from housekeeping.observe.storage_report import write_storage_report

    page = write_storage_report(store, int(AS_OF.timestamp() * 1000)).read_text()
    assert (
        '<tr class="rejected"><td>scrub</td><td><code>housekeeping_scrub_missing_ledgers</code></td><td>1</td>'
        in page
    )
