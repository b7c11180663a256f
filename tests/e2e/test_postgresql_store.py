"""The metadata store on a real PostgreSQL server (started by the suite: tests/pg_server.py), beside what the
other suites already run on it (the CLI contract on both backends, the races on both, the live Airflow's store):
the migrations build the same schema as the Table definitions, a lock held by another session is a named error
after HOUSEKEEPING_DB_LOCK_TIMEOUT_SECONDS with nothing changed, and holds and the journal work there."""

from __future__ import annotations

import json

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from housekeeping.store import metadata_schema
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.store import Store, migrate
from tests.conftest import run_cli, topic_body, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.processes]

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
AS_OF = "2026-01-01T01:00:00Z"
TOPIC = "persistent://acme/orders/pay"


def _load(capsys, tmp_path, url: str) -> str:
    ledgers = [(1, 10, 1000, T0 + 1), (2, 10, 1000, T0 + 2), (3, 0, 0, None)]
    document = {
        "namespaces": {
            "acme/orders": {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}}
        },
        "topics": {TOPIC: topic_body(ledgers, {"billing": "2:9"})},
    }
    store = str(tmp_path / "store")
    manifest = write_manifest(tmp_path, document)
    code, _, err = run_cli(
        capsys, "load", "--store", store, "--manifest", str(manifest), "--metadata-url", url
    )
    assert code == 0, err
    return store


def test_migrations_build_the_table_definitions_on_postgresql(postgres_server):
    engine = create_engine(postgres_server.create_database("schema"))
    try:
        migrate(engine)
        migrate(engine)  # idempotent
        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), metadata_schema.metadata)
    finally:
        engine.dispose()
    assert differences == []


@pytest.mark.runs
def test_a_lock_held_by_another_session_is_named_and_nothing_changes(
    postgres_server, tmp_path, capsys, monkeypatch
):
    url = postgres_server.create_database()
    store = _load(capsys, tmp_path, url)
    monkeypatch.setenv("HOUSEKEEPING_DB_LOCK_TIMEOUT_SECONDS", "1")
    before = export_manifest(Store.open(store, url))
    holder = create_engine(url)
    with holder.connect() as connection:
        transaction = connection.begin()
        connection.exec_driver_sql("LOCK TABLE topics IN ACCESS EXCLUSIVE MODE")
        try:
            code, _, err = run_cli(
                capsys, "apply", "trim", "--store", store, "--as-of", AS_OF, "--metadata-url", url,
                "--max-deleted-share", "1",
            )  # fmt: skip
        finally:
            transaction.rollback()
    holder.dispose()
    assert code == 2, err
    assert "locked" in err and "HOUSEKEEPING_DB_LOCK_TIMEOUT_SECONDS" in err and url.rsplit("/", 1)[1] in err
    assert export_manifest(Store.open(store, url)) == before
    # The lock gone, the same command goes through.
    code, out, err = run_cli(
        capsys, "apply", "trim", "--store", store, "--as-of", AS_OF, "--metadata-url", url,
        "--max-deleted-share", "1",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["ledgersDeleted"] == 2, err


@pytest.mark.runs
def test_holds_and_the_journal_on_postgresql(postgres_server, tmp_path, capsys, monkeypatch):
    url = postgres_server.create_database()
    monkeypatch.setenv("HOUSEKEEPING_METADATA_URL", url)
    monkeypatch.setenv("HOUSEKEEPING_ACTOR", "pg-test")
    store = _load(capsys, tmp_path, url)
    code, _, err = run_cli(capsys, "hold", "add", "acme/orders", "--store", store, "--reason", "audit")
    assert code == 0, err
    code, out, _ = run_cli(capsys, "hold", "list", "--store", store, "--format", "json")
    assert [(h["target"], h["reason"], h["createdBy"]) for h in json.loads(out)["holds"]] == [
        ("acme/orders", "audit", "pg-test")
    ]
    code, out, err = run_cli(
        capsys, "apply", "trim", "--store", store, "--as-of", AS_OF, "--max-deleted-share", "1"
    )
    assert code == 0 and json.loads(out)["ledgersDeleted"] == 0, err  # held
    code, _, err = run_cli(capsys, "hold", "remove", "acme/orders", "--store", store)
    assert code == 0, err
    code, out, err = run_cli(
        capsys, "apply", "trim", "--store", store, "--as-of", AS_OF, "--max-deleted-share", "1"
    )
    assert code == 0 and json.loads(out)["ledgersDeleted"] == 2, err
    code, out, err = run_cli(capsys, "journal", "--store", store, "--topic", TOPIC, "--format", "json")
    assert code == 0, err
    entries = json.loads(out)["entries"]
    assert {e["actor"] for e in entries} == {"pg-test"}
    statuses = [e["status"] for e in entries]
    assert "applied" in statuses, statuses
    applied = next(e for e in entries if e["status"] == "applied")
    assert sorted(r["ledgerId"] for r in applied["planRows"] if r["action"] == "delete_ledger") == [1, 2]


def test_a_hold_placed_while_an_apply_batch_is_open_waits_for_its_commit(postgres_server, tmp_path, capsys):
    """Apply reads the holds once per batch of topics (holds_for_this_transaction); on PostgreSQL that read
    share-locks the holds table, so a hold placed meanwhile cannot commit unseen by the batch: it waits."""
    from sqlalchemy.exc import OperationalError

    from housekeeping.store.holds import add_hold, holds_for_this_transaction, load_holds
    from housekeeping.store.store import write_transaction

    url = postgres_server.create_database()
    store = Store.open(_load(capsys, tmp_path, url), url)
    other = create_engine(url)
    try:
        with write_transaction(store.engine) as batch:
            assert holds_for_this_transaction(batch) == {}
            with other.connect() as placing, pytest.raises(OperationalError, match="lock timeout"):
                with placing.begin():
                    placing.exec_driver_sql("SET LOCAL lock_timeout = '1s'")
                    add_hold(placing, "acme/orders", reason="audit", actor="test")
        with other.connect() as placing, placing.begin():  # the batch committed: the hold goes through
            add_hold(placing, "acme/orders", reason="audit", actor="test")
        with write_transaction(store.engine) as batch:
            assert set(holds_for_this_transaction(batch)) == {"acme/orders"} == set(load_holds(batch))
    finally:
        other.dispose()
