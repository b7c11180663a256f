"""ledger_offload then consumed_ledger_trim under Airflow against a real S3 API server: real dag.test() runs with the
real SparkSubmitOperator (spark-submit, local[2]) and the Great Expectations gate. The offload run puts every closed
ledger in the bucket; the trim run a day later lets the local copies go (the offload-deletion lag has passed) and
retention deletes the consumed ledgers from both tiers through the pending-deletion log; what is left reads back
from the bucket."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store, read_transaction
from housekeeping.store.tier import OFFLOAD_ENDPOINT_ENV, OFFLOAD_URL_ENV, object_key
from tests.conftest import ledger_topic, run_cli, write_manifest
from tests.s3_server import CREDENTIALS
from tests.store_invariants import assert_no_orphans_and_no_dangling_metadata

pytestmark = [pytest.mark.airflow, pytest.mark.processes]

REPO = Path(__file__).resolve().parents[2]
OFFLOAD_AT = datetime(2026, 1, 2, tzinfo=UTC)
TRIM_AT = datetime(2026, 1, 3, tzinfo=UTC)
T0 = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
TOPIC = "persistent://t/ns/orders"


def manifest() -> dict:
    """L1..L4 closed, L5 current. The subscription has consumed L1 and L2; retention 1 min deletes them (and
    keeps L3, L4 for the subscription). Offload: every closed ledger (time threshold 0), lag 1 h."""
    stamps = [T0 + i for i in range(10)]
    body = ledger_topic(
        [(i, stamps, T0 + i * 60_000) for i in range(1, 5)] + [(5, stamps[:3], None)],
        {"sub": {"markDeletePosition": "2:9"}},
    )
    return {
        "namespaces": {
            "t/ns": {
                "retention_policies": {"retentionTimeInMinutes": 1, "retentionSizeInMB": -1},
                "offload_policies": {
                    "managedLedgerOffloadThresholdInSeconds": 0,
                    "managedLedgerOffloadDeletionLagInMillis": 3_600_000,
                },
            }
        },
        "topics": {TOPIC: body},
    }


@pytest.fixture(scope="module")
def dagbag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def _ledgers(store: Store) -> dict[int, tuple]:
    with read_transaction(store.engine) as conn:
        rows = conn.execute(select(t.ledgers).where(t.ledgers.c.topic == TOPIC))
        return {r.ledger_id: (bool(r.offload_complete), bool(r.local_deleted), r.offload_uuid) for r in rows}


def _gate_passed(store: Store, mechanism: str) -> bool:
    (run_dir,) = (store.root / "runs" / mechanism).iterdir()
    return json.loads((run_dir / "gate" / "result.json").read_text())["success"]


def test_ledger_offload_then_consumed_ledger_trim_against_the_s3_server(
    dagbag, s3_server, tmp_path, monkeypatch, capsys
):
    bucket = s3_server.create_bucket()
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(OFFLOAD_URL_ENV, f"s3://{bucket}/offloaded")
    monkeypatch.setenv(OFFLOAD_ENDPOINT_ENV, s3_server.endpoint_url)
    store_root = tmp_path / "store"
    code, _, err = run_cli(
        capsys, "load", "--store", str(store_root), "--manifest", str(write_manifest(tmp_path, manifest()))
    )
    assert code == 0, err
    monkeypatch.setenv("HOUSEKEEPING_STORE_ROOT", str(store_root))

    run = dagbag.get_dag("ledger_offload").test(logical_date=OFFLOAD_AT, run_conf={})
    assert run.state == "success"
    store = Store.open(store_root)
    assert _gate_passed(store, "offload")
    offloaded = _ledgers(store)
    assert {i: v[:2] for i, v in offloaded.items()} == {
        1: (True, False), 2: (True, False), 3: (True, False), 4: (True, False), 5: (False, False)
    }  # fmt: skip
    keys = {object_key(TOPIC, i, offloaded[i][2]) for i in range(1, 5)}
    assert {k.split("/", 1)[1] for k in s3_server.keys(bucket) if k.endswith(".parquet")} == keys

    run = dagbag.get_dag("consumed_ledger_trim").test(logical_date=TRIM_AT, run_conf={})
    assert run.state == "success"
    assert _gate_passed(store, "trim")
    # L1, L2 retention-deleted (pending: both copies kept until purge); L3, L4 lose their local copy only.
    assert sorted(_ledgers(store)) == [3, 4, 5]
    assert {i: v[:2] for i, v in _ledgers(store).items()} == {
        3: (True, True),
        4: (True, True),
        5: (False, False),
    }
    with read_transaction(store.engine) as conn:
        pending = {
            (r.ledger_id, r.kind, r.tier_key)
            for r in conn.execute(
                select(t.pending_deletions).where(t.pending_deletions.c.status == "pending")
            )
        }
    assert {(i, kind) for i, kind, _ in pending} == {
        (1, "ledger"),
        (2, "ledger"),
        (3, "local_copy"),
        (4, "local_copy"),
    }
    assert {key for i, _, key in pending if i in (1, 2)} == {
        object_key(TOPIC, i, offloaded[i][2]) for i in (1, 2)
    }
    # Purged after the grace period: L1, L2's objects leave the bucket, L3, L4's stay and are read from it.
    code, _, err = run_cli(capsys, "purge", "--store", str(store_root), "--as-of", "2026-02-01T00:00:00Z")
    assert code == 0, err
    assert {k.split("/", 1)[1] for k in s3_server.keys(bucket) if k.endswith(".parquet")} == {
        object_key(TOPIC, i, offloaded[i][2]) for i in (3, 4)
    }
    assert not (store.ledger_dir(TOPIC, 3)).exists()
    code, out, err = run_cli(capsys, "inspect", "--store", str(store_root), "--messages")
    assert code == 0, err
    messages = json.loads(out)["topics"][TOPIC]["messages"]
    assert sorted({m["ledgerId"] for m in messages}) == [3, 4, 5] and len(messages) == 23
    assert_no_orphans_and_no_dangling_metadata(Store.open(store_root))
