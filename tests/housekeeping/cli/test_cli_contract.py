"""The `housekeeping` command-line contract (docs/cli.md) on a manifest: the plan document's shape, a plan that
changes nothing, apply -> rerun -> restore -> purge, and bad input as exit 2 with a named error."""

from __future__ import annotations

import json

import pytest

from tests.conftest import iso, load_store, run_cli
from tests.trim.test_pulsar_scenarios import MINUTE, T0, consumed_ledgers_trim_manifest, plan_json

pytestmark = pytest.mark.spark
# The paths that read or write the store run on both metadata databases: SQLite in the store, and a fresh database
# on the real PostgreSQL server the suite starts (tests/pg_server.py).
both_databases = pytest.mark.usefixtures("metadata_backend")


@pytest.mark.runs
def test_plan_document_shape(capsys, tmp_path, spark):
    doc = json.loads(json.dumps(consumed_ledgers_trim_manifest("12:1")))
    doc["topics"]["persistent://prop/ns-abc/TestConsumedLedgersTrim"]["cursors"]["reader"] = {
        "markDeletePosition": "10:0",
        "durable": False,
    }
    store = load_store(capsys, tmp_path, doc)
    plan = plan_json(capsys, store, T0 + 10 * MINUTE)
    assert set(plan) >= {"mechanism", "asOf", "actions", "blockers"}
    for action in plan["actions"]:
        assert action["action"] in {"delete_ledger", "move_cursor"} and action["reason"]
        assert set(action) <= {"topic", "action", "ledgerId", "subscription", "from", "to", "bytes", "reason"}
    move = [a for a in plan["actions"] if a["action"] == "move_cursor"]
    assert move == [
        {
            "topic": "persistent://prop/ns-abc/TestConsumedLedgersTrim",
            "action": "move_cursor",
            "subscription": "reader",
            "from": "10:0",
            "to": "12:1",
            "reason": move[0]["reason"],
        }
    ]
    for blocker in plan["blockers"]:
        assert set(blocker) >= {"topic", "kind", "detail", "bytes"}


@pytest.mark.runs
@both_databases
def test_plan_changes_nothing(capsys, tmp_path, spark):
    store = load_store(capsys, tmp_path, consumed_ledgers_trim_manifest("14:1"))
    _, before, _ = run_cli(capsys, "inspect", "--store", store)
    plan_json(capsys, store, T0 + 10 * MINUTE)
    _, after, _ = run_cli(capsys, "inspect", "--store", store)
    assert before == after
    assert not (tmp_path / "store" / "runs").exists()


@pytest.mark.runs
@both_databases
def test_apply_rerun_restore_and_purge(capsys, tmp_path, spark, monkeypatch):
    monkeypatch.setenv("HOUSEKEEPING_PURGE_GRACE_SECONDS", "3600")
    doc = consumed_ledgers_trim_manifest("14:1")
    topic = "persistent://prop/ns-abc/TestConsumedLedgersTrim"
    doc["topics"][topic]["cursors"]["reader"] = {"markDeletePosition": "10:0", "durable": False}
    store = load_store(capsys, tmp_path, doc)
    as_of = T0 + 10 * MINUTE
    code, _, err = run_cli(capsys, "apply", "trim", "--store", store, "--as-of", iso(as_of))
    assert code == 3 and "deleted_share" in err  # 100% of the namespace: the default blast radius refuses
    code, out, err = run_cli(
        capsys, "apply", "trim", "--store", store, "--as-of", iso(as_of), "--max-deleted-share", "1"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["ledgersDeleted"] == 5 and result["cursorsMoved"] == 1
    assert (tmp_path / "store" / "runs" / "trim").is_dir() and result["report"].endswith("report.md")
    _, state, _ = run_cli(capsys, "inspect", "--store", store)
    body = json.loads(state)["topics"][topic]
    assert [ledger["ledgerId"] for ledger in body["ledgers"]] == [15]
    assert body["cursors"]["reader"]["markDeletePosition"] == "14:1"

    code, out, _ = run_cli(
        capsys, "apply", "trim", "--store", store, "--as-of", iso(as_of), "--max-deleted-share", "1"
    )
    assert code == 0 and json.loads(out)["ledgersDeleted"] == 0  # rerun: nothing left to do
    _, state_again, _ = run_cli(capsys, "inspect", "--store", store)
    assert json.loads(state_again)["topics"][topic]["ledgers"] == body["ledgers"]

    code, out, _ = run_cli(capsys, "restore", topic, "--store", store, "--ledger", "14")
    assert code == 0 and json.loads(out)["restoredLedgers"] == [14]
    _, state, _ = run_cli(capsys, "inspect", "--store", store)
    assert [ledger["ledgerId"] for ledger in json.loads(state)["topics"][topic]["ledgers"]] == [14, 15]

    code, out, _ = run_cli(capsys, "purge", "--store", store, "--as-of", iso(as_of + 3599_000))
    assert json.loads(out)["purged"] == [] and json.loads(out)["waiting"] == 4
    code, out, _ = run_cli(capsys, "purge", "--store", store, "--as-of", iso(as_of + 3600_000))
    assert len(json.loads(out)["purged"]) == 4
    code, _, err = run_cli(capsys, "restore", topic, "--store", store, "--ledger", "10")
    assert code == 2 and "nothing to restore" in err


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["plan", "compaktion", "--store", "{store}", "--as-of", "2026-01-01T00:00:00Z"],
            "unknown mechanism 'compaktion'",
        ),
        (
            ["plan", "trim", "--store", "{store}", "--as-of", "yesterday"],
            "as_of 'yesterday' is not an ISO 8601",
        ),
        (["plan", "trim", "--store", "{store}", "--as-of", "2026-01-01T00:00:00"], "has no timezone"),
        (["plan", "trim", "--store", "{missing}", "--as-of", "2026-01-01T00:00:00Z"], "does not exist"),
        (
            ["plan", "trim", "--store", "{store}", "--as-of", "2026-01-01T00:00:00Z", "--scope", "nobody/*"],
            "matches no topic",
        ),
        (["restore", "persistent://a/../x", "--store", "{store}"], "not a valid name"),
    ],
)
def test_bad_input_exits_2_with_a_named_error(capsys, tmp_path, spark, argv, message):
    store = load_store(capsys, tmp_path, consumed_ledgers_trim_manifest("14:1"))
    args = [a.format(store=store, missing=str(tmp_path / "missing")) for a in argv]
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and message in err
