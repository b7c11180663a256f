"""key_erasure under Airflow: a real dag.test() whose plan and gate run on a real Spark Connect server (the
default local set-up), with the Great Expectations gate, the library apply, purge and the report with its proof,
over a generated store with keyed topics."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest

from housekeeping.mechanisms.erasure.requests import list_requests
from housekeeping.store.generate import GenerateOptions, generate_store
from housekeeping.store.manifest.export import export_manifest
from tests.store_invariants import files_holding

pytestmark = [pytest.mark.airflow, pytest.mark.processes]

AS_OF = datetime(2026, 11, 1, tzinfo=UTC)
KEY = "key-0001"


@pytest.fixture(scope="module")
def dagbag(dagbag_on_spark_connect):
    return dagbag_on_spark_connect


def test_key_erasure_dag_forgets_the_key_in_the_namespace(dagbag, tmp_path, monkeypatch):
    """The request comes from the trigger form, by the key's SHA-256 (the key is typed nowhere)."""
    store = generate_store(tmp_path / "store", GenerateOptions(topics=28, seed=7, entries_per_ledger=60))
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store.root))
    monkeypatch.setenv("HOUSEKEEPING_ERASURE_GRACE_SECONDS", "0")
    before = export_manifest(store)
    conf = {
        "dry_run": False,
        "erase_key_sha256": hashlib.sha256(KEY.encode()).hexdigest(),
        "erase_namespace": "globex/tables",
        "erase_reason": "GDPR art. 17, ticket 981",
    }
    run = dagbag.get_dag("key_erasure").test(logical_date=AS_OF, run_conf=conf)
    assert run.state == "success"
    run_dir = max((store.root / "runs" / "erasure").iterdir(), key=lambda p: p.stat().st_mtime)
    assert json.loads((run_dir / "gate" / "result.json").read_text())["success"]
    result = json.loads((run_dir / "apply" / "result.json").read_text())
    assert result["ledgersRewritten"] > 0 and result["entriesRedacted"] > 0
    # Positions, counts and cursors as before; only sizes shrank.
    after = export_manifest(store)
    for topic, body in before["topics"].items():
        assert after["topics"][topic]["cursors"] == body["cursors"]
        assert [(ledger["ledgerId"], ledger["entries"]) for ledger in after["topics"][topic]["ledgers"]] == [
            (ledger["ledgerId"], ledger["entries"]) for ledger in body["ledgers"]
        ]
    # The replaced files were purged in the same run (0 s grace); the keyed topics are all in globex/tables, so
    # no file under the store holds the key any more (ledgers, runs, reports, data docs, metadata database).
    namespace_dir = store.root / "ledgers" / "persistent" / "globex" / "tables"
    assert any(namespace_dir.rglob("*.parquet"))
    assert files_holding(store.root, KEY) == []
    (request,) = list_requests(store)
    assert request["state"] == "done", request
    assert (
        request["requestedBy"].startswith("airflow key_erasure") and request["reason"] == conf["erase_reason"]
    )
    proof = json.loads(open(request["detail"]).read())
    assert proof["finalScan"]["filesHoldingTheKey"] == [] and proof["finalScan"]["entriesScanned"] > 0
    report = (run_dir / "report" / "report.md").read_text()
    assert "Key erasure report" in report and "**done**" in report
