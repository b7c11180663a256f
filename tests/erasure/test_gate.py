"""Key erasure's gate against wrong plans: the staged ledgers and the plan's tables rewritten as a buggy planner
would write them (the bytes bound again, so only the re-derived invariant can catch it) are blocked, and apply
refuses them with nothing changed; staged bytes changed after the gate are refused by apply."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from housekeeping.core.errors import InputError, PlanNotValidated
from housekeeping.core.timeutil import parse_as_of
from housekeeping.engine.plan import read_table
from housekeeping.mechanisms.erasure.requests import add_request, key_digest
from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, snapshot_step
from housekeeping.store.entries import ERASED_PROPERTY, files_sha256
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.store import Store
from spark_apps import validate_plan
from spark_apps.erasure.gate import compare_staged
from tests.conftest import rewrite_part

pytestmark = [pytest.mark.spark, pytest.mark.runs]

AS_OF = "2026-11-02T00:00:00Z"
KEY = "key-0001"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A generated store with a request for a key of its keyed topics, planned and passed by the gate."""
    from housekeeping.store.generate import GenerateOptions, generate_store

    root = tmp_path_factory.mktemp("erasure-gate") / "store"
    store = generate_store(root, GenerateOptions(28, 7, 60, 6, 60, "2026-11-01T00:00:00Z", False), None)
    add_request(
        store,
        key=KEY,
        namespace="globex/tables",
        reason="gate",
        requested_at_ms=parse_as_of(AS_OF) - 1,
        actor="t",
    )
    info = snapshot_step(store, "erasure", run_id="mutants", as_of_ms=parse_as_of(AS_OF))
    assert plan_and_gate_in_process(info.run_dir, "erasure", "local[2]").success
    return root


@pytest.fixture
def planned(template, tmp_path) -> tuple[Store, Path]:
    root = tmp_path / "store"
    shutil.copytree(template, root)
    store = Store.open(root)
    (run_dir,) = (root / "runs" / "erasure").iterdir()
    # The copy's run names the copy's store.
    info_path = run_dir / "snapshot" / "run.json"
    info = json.loads(info_path.read_text())
    info["store"] = str(root)
    info_path.write_text(json.dumps(info))
    return store, run_dir


def _staged(run_dir: Path) -> tuple[dict, Path]:
    ledger = read_table(run_dir, "erasure/ledgers")[0]
    return ledger, run_dir / "staged" / ledger["staged"]


def _rewrite_staged(run_dir: Path, edit) -> None:
    """Rewrite the first staged ledger's rows with ``edit`` and bind the new bytes in the plan, as a planner that
    wrote them would."""
    ledger, staged = _staged(run_dir)
    (part,) = staged.glob("*.parquet")
    table = pq.read_table(part)
    pq.write_table(pa.Table.from_pylist(edit(table.to_pylist()), schema=table.schema), part)
    ledgers_part = next((run_dir / "plan" / "erasure" / "ledgers").glob("part-*"))
    rows = [json.loads(line) for line in ledgers_part.read_text().splitlines()]
    for row in rows:
        if row["staged"] == ledger["staged"]:
            row["stagedSha256"] = files_sha256(staged)
    rewrite_part(ledgers_part, "".join(json.dumps(r) + "\n" for r in rows))


def _original_entries(store: Store, ledger: dict) -> list[dict]:
    return pq.read_table(
        store.ledger_dir(ledger["topic"], ledger["ledgerId"], ledger["fromGeneration"])
    ).to_pylist()


def _check_blocked(store: Store, run_dir: Path, failing: set[str]) -> None:
    from housekeeping.mechanisms.steps import local_spark

    before = export_manifest(store)
    document = validate_plan.run(local_spark("local[2]"), run_dir, "erasure")
    assert not document.success
    assert failing <= {f.kwargs.get("column") for f in document.failed}, document.failed
    with pytest.raises(PlanNotValidated):
        apply_step(store, run_dir, purge_grace_seconds=0)
    assert export_manifest(store) == before


def test_a_requested_key_left_in_one_ledger_is_blocked(planned):
    store, run_dir = planned
    ledger, _ = _staged(run_dir)
    original = {(r["ledgerId"], r["entryId"]): r for r in _original_entries(store, ledger)}
    restored = []

    def keep_one(rows):
        for i, row in enumerate(rows):
            if row["key"] is None and original[(row["ledgerId"], row["entryId"])]["key"] == KEY:
                rows[i] = original[(row["ledgerId"], row["entryId"])]
                restored.append((row["ledgerId"], row["entryId"]))
                break
        return rows

    _rewrite_staged(run_dir, keep_one)
    assert restored
    _check_blocked(
        store, run_dir, {"no_requested_key_in_new_files", "other_entries_identical_planned_ones_redacted"}
    )


def test_another_keys_entry_changed_is_blocked(planned):
    store, run_dir = planned

    def change_another(rows):
        for row in rows:
            if row["key"] not in (None, KEY):
                row["value"] = b"tampered"
                break
        return rows

    _rewrite_staged(run_dir, change_another)
    _check_blocked(store, run_dir, {"other_entries_identical_planned_ones_redacted"})


def test_a_requested_entry_missing_from_the_plan_is_blocked(planned):
    store, run_dir = planned
    entries_dir = run_dir / "plan" / "erasure" / "entries"
    part = max(entries_dir.rglob("*.parquet"), key=lambda p: pq.read_metadata(p).num_rows)
    table = pq.read_table(part)
    part.with_name(f".{part.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum of the planner's bytes
    pq.write_table(table.slice(1), part)  # the planner "forgot" one entry of the key
    _check_blocked(store, run_dir, {"requested_entry_is_planned"})


def test_staged_bytes_changed_after_the_gate_are_refused_by_apply(planned):
    store, run_dir = planned
    _, staged = _staged(run_dir)
    (part,) = staged.glob("*.parquet")
    table = pq.read_table(part)
    pq.write_table(table, part, compression="snappy")  # same rows, other bytes: not what the gate passed
    before = export_manifest(store)
    with pytest.raises(InputError, match="not the one the gate passed"):
        apply_step(store, run_dir, purge_grace_seconds=0)
    assert export_manifest(store)["topics"] == before["topics"]


def _entries(rows: list[dict]) -> pa.Table:
    """Entries of one ledger (ledger 3 of topic t), given by entry id with any field changed."""
    from housekeeping.store.entries import ENTRY_SCHEMA

    base = {"topic": "t", "ledgerId": 3, "publishTime": 10, "brokerTimestamp": None, "properties": None}
    filled = [{**base, "key": f"k{r['entryId']}", "value": b"vv", "size": 2, **r} for r in rows]
    return pa.Table.from_pylist(filled, pa.schema([f.with_nullable(True) for f in ENTRY_SCHEMA]))


REDACTED = {"key": None, "value": None, "size": 0, "properties": [(ERASED_PROPERTY, "7")]}


def test_a_staged_ledger_is_compared_with_its_files_in_force_position_by_position():
    original = _entries([{"entryId": 0}, {"entryId": 1, "key": KEY}, {"entryId": 2}])
    staged = _entries([{"entryId": 0}, {"entryId": 1, **REDACTED}, {"entryId": 2}])
    requested = frozenset({key_digest(KEY)})
    assert compare_staged(original, staged, {(3, 1)}, requested) == {
        "same_positions": True,
        "times_unchanged": True,
        "other_entries_identical_planned_ones_redacted": True,
        "no_requested_key_in_new_files": True,
        "redactedBytes": 2,
        "stagedEntries": 3,
    }
    assert compare_staged(original.slice(0, 0), staged.slice(0, 0), set(), requested) is None

    def failing(staged_rows: list[dict], redact=frozenset({(3, 1)})) -> set[str]:
        found = compare_staged(original, _entries(staged_rows), set(redact), requested)
        return {name for name, value in found.items() if value is False}

    redacted = {"entryId": 1, **REDACTED}
    assert failing([{"entryId": 0}, {"entryId": 1, "key": KEY}, {"entryId": 2}]) == {
        "other_entries_identical_planned_ones_redacted",
        "no_requested_key_in_new_files",
    }
    assert failing([{"entryId": 0, "value": b"xx"}, redacted, {"entryId": 2}]) == {
        "other_entries_identical_planned_ones_redacted"
    }
    assert failing([{"entryId": 0, "properties": [(ERASED_PROPERTY, "7")]}, redacted, {"entryId": 2}]) == {
        "other_entries_identical_planned_ones_redacted"
    }
    assert failing([{"entryId": 0}, redacted]) == {
        "same_positions",
        "times_unchanged",
        "other_entries_identical_planned_ones_redacted",
    }
    assert failing([{"entryId": 0, "publishTime": 11}, redacted, {"entryId": 2}]) == {"times_unchanged"}
    assert (
        failing([{"entryId": 0}, redacted, {"entryId": 2}, {"entryId": 2}]) == set()
    )  # counted: stagedEntries 4
    assert failing([{"entryId": 0}, {"entryId": 1, **REDACTED, "size": 2}, {"entryId": 2}]) == {
        "other_entries_identical_planned_ones_redacted"
    }
    # A position the plan does not redact, redacted anyway.
    assert failing([{"entryId": 0}, redacted, {"entryId": 2}], redact=set()) == {
        "other_entries_identical_planned_ones_redacted"
    }
