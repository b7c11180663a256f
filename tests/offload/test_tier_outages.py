"""The object tier failing under a run, on a real S3 API server: a missing bucket and credentials the server refuses
are bad input naming the bucket, before anything changes; the server stopping mid-run fails the run naming the
tier, loses nothing (what completed stays complete, what did not stays incomplete) and a rerun completes. Each ends
with the store's invariants (tests/store_invariants.py) and one object per offloaded ledger."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store, read_transaction, write_transaction
from housekeeping.store.tier import OFFLOAD_ENDPOINT_ENV, OFFLOAD_URL_ENV, parse_object_key
from tests.conftest import iso, ledger_topic, run_cli, write_manifest
from tests.s3_server import CREDENTIALS, S3Server
from tests.store_invariants import assert_no_orphans_and_no_dangling_metadata, store_state

pytestmark = [pytest.mark.spark, pytest.mark.processes, pytest.mark.runs]

T0 = 1_767_225_600_000
AS_OF = T0 + 24 * 60 * 60_000
TOPIC = "persistent://t/ns/a"


def manifest() -> dict:
    """L1..L3 closed, L4 current; a time threshold of 0 offloads L1..L3."""
    stamps = [T0 + i for i in range(8)]
    body = ledger_topic(
        [(i, stamps, T0 + i * 60_000) for i in range(1, 4)] + [(4, stamps[:2], None)],
        {"sub": {"markDeletePosition": "1:0"}},
    )
    return {
        "namespaces": {"t/ns": {"offload_policies": {"managedLedgerOffloadThresholdInSeconds": 0}}},
        "topics": {TOPIC: body},
    }


def use_tier(monkeypatch, server: S3Server, bucket: str, credentials: dict[str, str]) -> None:
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(OFFLOAD_URL_ENV, f"s3://{bucket}/offloaded")
    monkeypatch.setenv(OFFLOAD_ENDPOINT_ENV, server.endpoint_url)


def load(capsys, tmp_path) -> Store:
    code, _, err = run_cli(
        capsys,
        "load",
        "--store",
        str(tmp_path / "store"),
        "--manifest",
        str(write_manifest(tmp_path, manifest())),
    )
    assert code == 0, err
    return Store.open(tmp_path / "store")


def offload(capsys, store: Store) -> tuple[int, str]:
    code, _, err = run_cli(capsys, "apply", "offload", "--store", str(store.root), "--as-of", iso(AS_OF))
    return code, err


def completed(store: Store) -> dict[int, bool]:
    with read_transaction(store.engine) as conn:
        rows = conn.execute(select(t.ledgers).where(t.ledgers.c.topic == TOPIC))
        return {r.ledger_id: bool(r.offload_complete) for r in rows}


def objects(server: S3Server, bucket: str) -> list[str]:
    """The ledger objects in the bucket (not the store's claim, nor the zero-byte directory marker pyarrow leaves
    when a topic's last object is deleted)."""
    return [key for key in server.keys(bucket) if key.endswith(".parquet")]


def converged(capsys, store: Store, server: S3Server, bucket: str) -> None:
    """After a clean rerun and the purge: L1..L3 complete, one object each, nothing orphaned."""
    store = Store.open(store.root)  # the tier as the environment names it now
    code, err = offload(capsys, store)
    assert code == 0, err
    code, _, err = run_cli(capsys, "purge", "--store", str(store.root), "--as-of", iso(AS_OF + 10**10))
    assert code == 0, err
    assert completed(store) == {1: True, 2: True, 3: True, 4: False}
    ledgers = sorted(
        parse_object_key(k.split("/", 1)[1])[1] for k in server.keys(bucket) if k.endswith(".parquet")
    )
    assert ledgers == [1, 2, 3]
    assert_no_orphans_and_no_dangling_metadata(store)


def test_a_missing_bucket_is_named_nothing_changes_and_a_rerun_completes(
    capsys, tmp_path, s3_server, monkeypatch
):
    bucket = f"missing-{tmp_path.name}".lower().replace("_", "-")[:60]
    use_tier(monkeypatch, s3_server, bucket, CREDENTIALS)
    store = load(capsys, tmp_path)
    before = store_state(store)
    code, err = offload(capsys, store)
    assert code == 2 and f"bucket {bucket} does not exist" in err, err
    assert store_state(store) == before, "a refused run changes nothing"
    s3_server.client().create_bucket(Bucket=bucket)
    converged(capsys, store, s3_server, bucket)


@pytest.fixture(scope="module")
def authenticating_s3_server():
    server = S3Server.start(authenticating=True)
    server.grant()
    yield server
    server.stop()


def test_credentials_the_server_refuses_are_named_nothing_changes_and_a_rerun_completes(
    capsys, tmp_path, authenticating_s3_server, monkeypatch
):
    server = authenticating_s3_server
    bucket = server.create_bucket()
    use_tier(monkeypatch, server, bucket, {**CREDENTIALS, "AWS_SECRET_ACCESS_KEY": "not-the-secret"})
    store = load(capsys, tmp_path)
    before = store_state(store)
    code, err = offload(capsys, store)
    assert code == 2 and f"cannot list bucket {bucket}" in err and "ACCESS_DENIED" in err, err
    assert "not-the-secret" not in err and CREDENTIALS["AWS_ACCESS_KEY_ID"] not in err.replace(bucket, "")
    assert store_state(store) == before
    assert server.keys(bucket) == []
    use_tier(monkeypatch, server, bucket, server.credentials)
    converged(capsys, store, server, bucket)


def test_the_server_stopping_mid_run_fails_the_run_loses_nothing_and_a_rerun_completes(
    capsys, tmp_path, monkeypatch
):
    """The server stops answering once L1 is recorded complete (SIGSTOP: requests time out as with a server gone
    away): L2 and L3 fail, the run exits 1 naming the tier, L1 stays complete; a rerun once it is back completes."""
    import housekeeping.mechanisms.offload.apply as offload_apply

    server = S3Server.start()
    try:
        bucket = server.create_bucket()
        use_tier(monkeypatch, server, bucket, CREDENTIALS)
        store = load(capsys, tmp_path)

        def stop_after_the_first_completion(name: str) -> None:
            if name == "offload_apply_after_complete":
                server.pause()

        monkeypatch.setattr(offload_apply, "checkpoint", stop_after_the_first_completion)
        code, err = offload(capsys, store)
        assert code == 1, err
        assert "2 ledger(s) could not be offloaded" in err and f"s3://{bucket}/offloaded" in err, err
        assert completed(store) == {1: True, 2: False, 3: False, 4: False}
        server.resume()
        assert_no_orphans_and_no_dangling_metadata(store)
        monkeypatch.undo()
        use_tier(monkeypatch, server, bucket, CREDENTIALS)
        converged(capsys, store, server, bucket)
    finally:
        server.stop()


def test_a_tier_delete_that_fails_stays_pending_fails_the_purge_and_the_next_purge_completes(
    capsys, tmp_path, authenticating_s3_server, monkeypatch
):
    """Retention deletes offloaded ledgers; at purge time the key is refused (a rotated secret): purge deletes the
    local files, keeps every object's pending deletion pending, lists them in `failed` and exits 1 (never a
    silent success, apache/pulsar#14693); with the right key the next purge deletes the objects."""
    server = authenticating_s3_server
    bucket = server.create_bucket()
    use_tier(monkeypatch, server, bucket, server.credentials)
    store = load(capsys, tmp_path)
    code, err = offload(capsys, store)
    assert code == 0, err
    assert len(objects(server, bucket)) == 3
    # Retention 0 and a consumed backlog: trim deletes L1..L3 from both tiers (to the pending-deletion log).
    with write_transaction(store.engine) as conn:
        conn.execute(
            t.cursors.update()
            .where(t.cursors.c.topic == TOPIC)
            .values(mark_delete_ledger=3, mark_delete_entry=7)
        )
    code, _, err = run_cli(
        capsys, "apply", "trim", "--store", str(store.root), "--as-of", iso(AS_OF), "--max-deleted-share", "1"
    )
    assert code == 0, err
    later = iso(AS_OF + 10**10)
    use_tier(monkeypatch, server, bucket, {**server.credentials, "AWS_SECRET_ACCESS_KEY": "rotated"})
    code, out, err = run_cli(capsys, "purge", "--store", str(store.root), "--as-of", later)
    assert code == 1 and "3 pending deletion(s) could not be purged" in err and bucket in err, err
    result = json.loads(out)
    assert sorted(result["failed"]) == [f"{TOPIC}:{i}" for i in (1, 2, 3)] and result["purged"] == []
    with read_transaction(store.engine) as conn:
        pending = conn.execute(select(t.pending_deletions.c.status, t.pending_deletions.c.tier_key)).all()
    assert sorted(status for status, key in pending if key) == ["pending"] * 3
    assert not any((store.root / "ledgers/persistent/t/ns/a" / str(i)).exists() for i in (1, 2, 3))
    assert len(objects(server, bucket)) == 3, "nothing deleted in the tier"
    use_tier(monkeypatch, server, bucket, server.credentials)
    code, out, err = run_cli(capsys, "purge", "--store", str(store.root), "--as-of", later)
    assert code == 0, err
    assert sorted(json.loads(out)["purged"]) == [f"{TOPIC}:{i}" for i in (1, 2, 3)]
    assert objects(server, bucket) == []
    assert_no_orphans_and_no_dangling_metadata(Store.open(store.root))
