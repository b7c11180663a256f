"""A store whose metadata an older housekeeping wrote: every command refuses it with the command that upgrades
it (nothing changed), `housekeeping upgrade` migrates it keeping every row, and a store a newer housekeeping
wrote is refused by both. On SQLite and on the real PostgreSQL server (tests/pg_server.py)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import inspect as sql_inspect
from sqlalchemy import text

from housekeeping.store.store import Store, _alembic_config, schema_revision, schema_revisions
from tests.conftest import ledger_topic, run_cli, write_manifest

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("metadata_backend")]

OLDEST = "0001"


def _state(store: Store) -> tuple[str | None, list[str]]:
    with store.engine.connect() as connection:
        return schema_revision(connection), sorted(sql_inspect(connection).get_table_names())


@pytest.fixture
def old_store(tmp_path, capsys) -> tuple[str, dict]:
    """A store loaded by this version, then taken back to the first schema revision with the migrations' own
    downgrades (as if the first release had written it); and what `inspect` showed before."""
    from alembic import command

    root = tmp_path / "store"
    manifest = {
        "namespaces": {
            "public/default": {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}}
        },
        "topics": {
            "persistent://public/default/orders": ledger_topic(
                [(1, [1_000, 2_000], 3_000), (2, [4_000], None)], {"billing": {"markDeletePosition": "1:0"}}
            )
        },
    }
    code, _, err = run_cli(
        capsys, "load", "--store", str(root), "--manifest", str(write_manifest(tmp_path, manifest))
    )
    assert code == 0, err
    code, out, err = run_cli(capsys, "inspect", "--store", str(root))
    assert code == 0, err
    inspected = json.loads(out)

    store = Store.open(root)
    config = _alembic_config()
    with store.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, OLDEST)
    store.engine.dispose()
    return str(root), inspected


def test_commands_refuse_an_old_store_naming_the_upgrade_and_change_nothing(old_store, capsys):
    root, _ = old_store
    store = Store.open(root, check_schema=False)
    before = _state(store)
    assert before[0] == OLDEST and "holds" not in before[1]
    for argv in (
        ("inspect", "--store", root),
        ("plan", "trim", "--store", root, "--as-of", "2026-11-02T00:00:00Z"),
        ("apply", "trim", "--store", root, "--as-of", "2026-11-02T00:00:00Z"),
        ("journal", "--store", root),
        ("hold", "add", "public/default", "--store", root, "--reason", "audit"),
    ):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2, (argv, err)
        assert f"store {Store.open(root, check_schema=False).root}" in err, err
        assert f"schema revision {OLDEST}" in err and f"housekeeping upgrade --store {root}" in err, err
        assert "nothing was changed" in err
    assert _state(store) == before


def test_upgrade_migrates_keeping_every_row_and_is_idempotent(old_store, capsys):
    root, inspected = old_store
    head = schema_revisions()[-1]
    code, out, err = run_cli(capsys, "upgrade", "--store", root)
    assert code == 0, err
    assert json.loads(out) == {"store": root, "fromRevision": OLDEST, "toRevision": head}

    code, out, err = run_cli(capsys, "inspect", "--store", root)
    assert code == 0, err
    assert json.loads(out) == inspected, "the upgrade lost or changed rows"

    code, out, err = run_cli(capsys, "upgrade", "--store", root)
    assert code == 0, err
    assert json.loads(out) == {"store": root, "fromRevision": head, "toRevision": head}


def test_a_store_a_newer_version_wrote_is_refused_by_every_command_and_by_upgrade(old_store, capsys):
    root, _ = old_store
    run_cli(capsys, "upgrade", "--store", root)
    store = Store.open(root)
    with store.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    before = _state(store)
    for argv in (("inspect", "--store", root), ("upgrade", "--store", root)):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2, (argv, err)
        assert "schema revision 9999" in err and "newer housekeeping" in err, err
    assert _state(store) == before


def test_upgrade_of_a_missing_store_names_it(tmp_path, capsys):
    code, _, err = run_cli(capsys, "upgrade", "--store", str(tmp_path / "nowhere"))
    assert code == 2 and "nowhere does not exist" in err, err
