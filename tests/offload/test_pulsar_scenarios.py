"""Pulsar's OffloadLedgerDeleteTest and the trim rules across both tiers (docs/semantics.md §9), in
our own words, through `load` + the CLI, on a directory tier (and on a real S3 API server where the tier is written,
read or deleted):

- the lagged delete: the local copy goes only once as-of - offload time > the lag (strict), whatever the cursors
  (a slow consumer does not keep it), the ledger stays listed and is read from the tier;
- retention shorter than the lag: the ledger leaves both tiers (its local files and its object), never through the
  lag rule;
- an incomplete offload: the lag never touches it; retention deletes its attempt's object too;
- lag -1 (PIP-350): the local copy stays; no tier configured: the lag rule does nothing; a hold keeps the local copy;
- restore puts a deleted local copy back, and an offloaded ledger back with both copies.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store, read_transaction
from housekeeping.store.tier import object_key
from tests.conftest import cli_json, iso, ledger_topic, load_store, run_cli

pytestmark = [pytest.mark.spark, pytest.mark.runs]

T0 = 1_767_225_600_000
MIN = 60_000
TOPIC = "persistent://t/ns/a"
OFFLOADED_AT = T0 + 10 * MIN
LAG = 10 * MIN
LATER = T0 + 30 * 24 * 60 * MIN  # past every grace period (a day), not past the clock


def manifest(*, retention=(-1, -1), lag=LAG, cursor="1:0", contexts=None) -> dict:
    """L1..L3 closed (10 entries of 10 bytes), L4 current (40 entries: retention deleting L1..L3 stays within the
    default blast radius); L1 and L2 offloaded at OFFLOADED_AT unless ``contexts`` (ledger id -> offloadContext)
    says otherwise."""
    stamps = [T0 + i for i in range(10)]
    body = ledger_topic(
        [(1, stamps, T0 + MIN), (2, stamps, T0 + 2 * MIN), (3, stamps, T0 + 3 * MIN), (4, stamps * 4, None)],
        {"sub": {"markDeletePosition": cursor}},
    )
    if contexts is None:
        contexts = {
            1: {"complete": True, "timestamp": OFFLOADED_AT},
            2: {"complete": True, "timestamp": OFFLOADED_AT},
        }
    for ledger in body["ledgers"]:
        context = contexts.get(ledger["ledgerId"])
        if context is not None:
            ledger["offloadContext"] = context
    offload = {} if lag is None else {"managedLedgerOffloadDeletionLagInMillis": lag}
    return {
        "namespaces": {
            "t/ns": {
                "retention_policies": {
                    "retentionTimeInMinutes": retention[0],
                    "retentionSizeInMB": retention[1],
                },
                "offload_policies": offload,
            }
        },
        "topics": {TOPIC: body},
    }


def plan(capsys, store: str, as_of: int) -> dict[str, list[int]]:
    document = cli_json(capsys, "plan", "trim", "--store", store, "--as-of", iso(as_of), "--format", "json")
    assert document["gate"]["success"], document["gate"]
    out: dict[str, list[int]] = {}
    for action in document["actions"]:
        out.setdefault(action["action"], []).append(action.get("ledgerId"))
    return {k: sorted(v) for k, v in out.items()}


def ledgers(capsys, store: str) -> dict[int, dict]:
    state = cli_json(capsys, "inspect", "--store", store)
    return {ledger["ledgerId"]: ledger for ledger in state["topics"][TOPIC]["ledgers"]}


def ledger_rows(store: str) -> dict[int, object]:
    with read_transaction(Store.open(store).engine) as conn:
        return {r.ledger_id: r for r in conn.execute(select(t.ledgers).where(t.ledgers.c.topic == TOPIC))}


def test_the_lagged_delete_is_strict_ignores_cursors_and_keeps_the_ledger_readable(
    capsys, tmp_path, directory_tier
):
    document = manifest()
    store = load_store(capsys, tmp_path, document)
    # Exactly at the lag: nothing; one millisecond later: both offloaded ledgers, though the only subscription
    # has not consumed them (slow consumer, testLaggedDeleteSlowConsumer).
    assert "delete_local_copy" not in plan(capsys, store, OFFLOADED_AT + LAG)
    assert plan(capsys, store, OFFLOADED_AT + LAG + 1) == {"delete_local_copy": [1, 2]}
    # The approval step counts them apart from data deletions: a threshold of 0 deleted bytes asks nobody.
    from housekeeping.engine.approval import ApprovalThresholds, request_approval, request_markdown
    from housekeeping.mechanisms.registry import get_mechanism

    run_dir = tmp_path / "run"
    cli_json(capsys, "plan", "trim", "--store", store, "--as-of", iso(OFFLOADED_AT + LAG + 1), "--format", "json",
        "--run-dir", str(run_dir))  # fmt: skip
    request = request_approval(run_dir, get_mechanism("trim"), ApprovalThresholds(bytes=0))
    assert not request.required, request.reasons
    assert {k: request.measures[k] for k in ("bytes", "ledgers", "local_copies", "local_copy_bytes")} == {
        "bytes": 0, "ledgers": 0, "local_copies": 2, "local_copy_bytes": 200
    }  # fmt: skip
    assert "2 local copies of offloaded ledgers deleted (200 B)" in request_markdown(request)
    result = cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(OFFLOADED_AT + LAG + 1))
    assert (result["localCopiesDeleted"], result["localBytesDeleted"], result["ledgersDeleted"]) == (
        2,
        200,
        0,
    )
    after = ledgers(capsys, store)
    assert sorted(after) == [1, 2, 3, 4]  # still listed
    assert [after[i]["offloadContext"]["bookkeeperDeleted"] for i in (1, 2)] == [True, True]
    cursors = cli_json(capsys, "inspect", "--store", store)["topics"][TOPIC]["cursors"]
    assert cursors["sub"]["markDeletePosition"] == "1:0"  # the lag moves no cursor
    # After purge the local directories are gone, the objects stay, the entries read back from the tier.
    cli_json(capsys, "purge", "--store", store, "--as-of", iso(LATER))
    local = sorted(p.name for p in (tmp_path / "store/ledgers/persistent/t/ns/a").iterdir())
    assert local == ["3", "4"]
    rows = ledger_rows(store)
    assert all(directory_tier.info(object_key(TOPIC, i, rows[i].offload_uuid)) for i in (1, 2))
    exported = cli_json(capsys, "inspect", "--store", store, "--messages")
    assert exported["topics"][TOPIC]["messages"] == document["topics"][TOPIC]["messages"]
    # Nothing more to do.
    assert "delete_local_copy" not in plan(capsys, store, LATER)


def test_retention_shorter_than_the_lag_deletes_from_both_tiers(capsys, tmp_path, object_tier):
    """The ledgers are consumed and past a 1-minute retention long before their 1-hour lag."""
    store = load_store(capsys, tmp_path, manifest(retention=(1, -1), lag=60 * MIN, cursor="3:9"))
    rows = ledger_rows(store)
    keys = [object_key(TOPIC, i, rows[i].offload_uuid) for i in (1, 2)]
    assert all(object_tier.info(key) for key in keys)
    as_of = OFFLOADED_AT + MIN
    assert plan(capsys, store, as_of) == {"delete_ledger": [1, 2, 3]}
    cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(as_of))
    with read_transaction(Store.open(store).engine) as conn:
        pending = {r.ledger_id: (bool(r.path), r.tier_key) for r in conn.execute(select(t.pending_deletions))}
    assert pending == {1: (True, keys[0]), 2: (True, keys[1]), 3: (True, None)}
    cli_json(capsys, "purge", "--store", store, "--as-of", iso(LATER))
    assert not any(object_tier.info(key) for key in keys)
    assert sorted(p.name for p in (tmp_path / "store/ledgers/persistent/t/ns/a").iterdir()) == ["4"]


def test_an_incomplete_offload_is_never_lag_deleted_and_retention_deletes_its_object(
    capsys, tmp_path, object_tier
):
    store = load_store(
        capsys, tmp_path, manifest(retention=(1, -1), cursor="3:9", contexts={1: {"complete": False}})
    )
    # The attempt's upload reached the tier, its completion was never recorded (testOffloadDeleteIncomplete).
    row = ledger_rows(store)[1]
    key = object_key(TOPIC, 1, row.offload_uuid)
    object_tier.write_ledger(key, Store.open(store).read_ledger_entries(row))
    assert "delete_local_copy" not in plan(capsys, store, LATER)
    cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(OFFLOADED_AT + MIN))
    cli_json(capsys, "purge", "--store", store, "--as-of", iso(LATER))
    assert object_tier.info(key) is None


@pytest.mark.usefixtures("directory_tier")
def test_a_lag_of_minus_one_keeps_the_local_copy(capsys, tmp_path):
    store = load_store(capsys, tmp_path, manifest(lag=-1))
    assert plan(capsys, store, LATER) == {}


def test_without_a_tier_the_lag_rule_does_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("HOUSEKEEPING_OFFLOAD_URL", raising=False)
    document = manifest()
    document["topics"][TOPIC].pop("messages")  # metadata only: no tier needed to load
    store = load_store(capsys, tmp_path, document)
    assert plan(capsys, store, LATER) == {}


@pytest.mark.usefixtures("directory_tier")
def test_a_hold_keeps_the_local_copy(capsys, tmp_path):
    store = load_store(capsys, tmp_path, manifest())
    code, _, err = run_cli(capsys, "hold", "add", TOPIC, "--store", store, "--reason", "legal")
    assert code == 0, err
    assert plan(capsys, store, LATER) == {}


@pytest.mark.usefixtures("object_tier")
def test_restore_puts_a_local_copy_back_and_an_offloaded_ledger_back_with_both_copies(capsys, tmp_path):
    store = load_store(capsys, tmp_path, manifest(retention=(1, -1), lag=LAG, cursor="1:9"))
    # The lag deletes L2's local copy (L1 is retention's: consumed and past its minute).
    as_of = OFFLOADED_AT + LAG + 1
    assert plan(capsys, store, as_of) == {"delete_ledger": [1], "delete_local_copy": [2]}
    cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(as_of))
    assert (
        1 not in ledgers(capsys, store) and ledgers(capsys, store)[2]["offloadContext"]["bookkeeperDeleted"]
    )
    restored = cli_json(capsys, "restore", TOPIC, "--store", store, "--as-of", iso(as_of))
    assert sorted(restored["restoredLedgers"]) == [1, 2]
    after = ledgers(capsys, store)
    assert after[1]["offloadContext"] == {
        "complete": True,
        "timestamp": OFFLOADED_AT,
        "bookkeeperDeleted": False,
    }
    assert after[2]["offloadContext"]["bookkeeperDeleted"] is False
