"""Holds (``housekeeping hold``) and the journal (``housekeeping journal``) through the CLI contract.

A hold must stop every deleting or cursor-moving action of every mechanism for what it covers, at each of the
three places that enforce it: the planner (kind ``held``), the gate (re-derived from the raw holds) and apply
and purge (re-read in the transaction, so a hold added after the snapshot still wins).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from housekeeping.core.names import TopicName
from housekeeping.core.timeutil import format_ms, parse_as_of
from housekeeping.engine.contract import HOLDS
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.plan import read_table
from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.steps import apply_step, plan_and_gate_in_process, snapshot_step
from housekeeping.store.manifest.export import export_manifest
from housekeeping.store.store import Store
from tests.conftest import run_cli

pytestmark = [pytest.mark.spark, pytest.mark.runs]

AS_OF = "2026-11-02T00:00:00Z"
FORBIDDEN = {
    "delete_ledger",
    "move_cursor",
    "delete_topic",
    "rewrite_compacted",
    "delete_partitioned_metadata",
}
MECHANISMS = ("trim", "expiry", "backlog", "gc", "compaction")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    from housekeeping.store.generate import GenerateOptions, generate_store

    root = tmp_path_factory.mktemp("holds") / "store"
    generate_store(root, GenerateOptions(40, 7, 200, 12, 120, "2026-11-01T00:00:00Z", False), None)
    return root


def _copy_store(source: Path, target: Path) -> Store:
    import shutil

    shutil.copytree(source, target)
    return Store.open(target)


def _plan(capsys, root: Path, mechanism: str) -> dict:
    code, out, err = run_cli(
        capsys, "plan", mechanism, "--store", str(root), "--as-of", AS_OF, "--format", "json"
    )
    assert code == 0, err
    return json.loads(out)


def _forbidden_topics(plan: dict) -> set[str]:
    return {a["topic"] for a in plan["actions"] if a["action"] in FORBIDDEN}


def _namespace(topic: str) -> str:
    return str(TopicName.parse(topic).namespace_name)


def _topic_state(store: Store, topics: set[str]) -> dict:
    """Metadata and ledger files of the given topics (what a held topic must keep)."""
    exported = export_manifest(store)
    files = {
        str(p.relative_to(store.root))
        for topic in topics
        for p in (store.root / "ledgers").rglob("*.parquet")
        if f"/{TopicName.parse(topic).local_name}/" in str(p)
    }
    return {"topics": {t: exported["topics"].get(t) for t in sorted(topics)}, "files": files}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_namespace_hold_keeps_every_topic_it_covers_out_of_the_plan_and_apply(
    generated, tmp_path, capsys, mechanism
):
    store = _copy_store(generated, tmp_path / "store")
    unheld = _plan(capsys, store.root, mechanism)
    touched = _forbidden_topics(unheld)
    assert touched, f"the generated store must give {mechanism} something to do"
    namespace = _namespace(sorted(touched)[0])
    covered = {t for t in touched if _namespace(t) == namespace}

    code, out, err = run_cli(
        capsys,
        "hold",
        "add",
        namespace,
        "--store",
        str(store.root),
        "--reason",
        f"legal hold for {mechanism}",
    )
    assert code == 0, err
    assert json.loads(out)["scope"] == "namespace"

    before = _topic_state(store, covered)
    code, out, err = run_cli(
        capsys, "apply", mechanism, "--store", str(store.root), "--as-of", AS_OF, "--format", "json"
    )
    assert code == 0, err
    run_dir = Path(json.loads(out)["runDir"])
    held_plan = {"actions": read_table(run_dir, "actions"), "blockers": read_table(run_dir, "blockers")}
    assert not (_forbidden_topics(held_plan) & covered)
    # Topics outside the hold are planned as before.
    assert _forbidden_topics(held_plan) == touched - covered
    held_blockers = {b["topic"] for b in held_plan["blockers"] if b["kind"] == "held"}
    assert covered <= held_blockers
    assert all(
        f"legal hold for {mechanism}" in b["detail"] for b in held_plan["blockers"] if b["kind"] == "held"
    )
    assert _topic_state(store, covered) == before


def test_a_hold_added_after_the_gate_still_wins_at_apply_and_is_journaled(generated, tmp_path, capsys):
    store = _copy_store(generated, tmp_path / "store")
    info = snapshot_step(store, "trim", run_id="late-hold", as_of_ms=parse_as_of(AS_OF))
    assert plan_and_gate_in_process(info.run_dir, "trim", "local[2]").success
    actions = json.loads((info.run_dir / "plan" / "summary.json").read_text())
    assert actions["ledgersToDelete"] > 0
    planned = sorted(
        {
            json.loads(line)["topic"]
            for p in (info.run_dir / "plan" / "actions").glob("part-*")
            for line in p.open()
        }
    )
    victim = planned[0]
    code, _, err = run_cli(
        capsys,
        "hold",
        "add",
        victim,
        "--store",
        str(store.root),
        "--reason",
        "incident 4711: keep everything",
    )
    assert code == 0, err
    before = _topic_state(store, {victim})
    result = apply_step(store, info.run_dir, purge_grace_seconds=0)
    assert victim in result["skippedTopics"] and "incident 4711" in result["skippedTopics"][victim]
    assert _topic_state(store, {victim}) == before
    # The other topics were applied.
    assert set(result["appliedTopics"]) == set(planned) - {victim}

    code, out, err = run_cli(
        capsys, "journal", "--store", str(store.root), "--topic", victim, "--format", "json"
    )
    assert code == 0, err
    entries = json.loads(out)["entries"]
    skipped = [e for e in entries if e["status"] == "skipped_held"]
    assert len(skipped) == 1 and "incident 4711" in skipped[0]["why"]
    assert skipped[0]["planRows"] and all(r["action"] in FORBIDDEN for r in skipped[0]["planRows"])
    assert any(e["action"] == "hold" and e["status"] == "hold_added" for e in entries)


def test_the_gate_rejects_a_plan_that_ignores_a_hold(generated, tmp_path, capsys):
    """A planner that ignored the holds (simulated: the hold is written into the snapshot after planning) is
    caught by the gate's own matching, and apply refuses the plan."""
    from housekeeping.core.errors import PlanNotValidated
    from spark_apps import validate_plan

    store = _copy_store(generated, tmp_path / "store")
    info = snapshot_step(store, "trim", run_id="ignored-hold", as_of_ms=parse_as_of(AS_OF))
    assert plan_and_gate_in_process(info.run_dir, "trim", "local[2]").success
    planned = {
        json.loads(line)["topic"]
        for p in (info.run_dir / "plan" / "actions").glob("part-*")
        for line in p.open()
    }
    # A partition hold through its partitioned parent would also match; a namespace hold is the widest.
    namespace = _namespace(sorted(planned)[0])
    write_parquet(
        RunDir(info.run_dir).snapshot_table(HOLDS),
        HOLDS,
        [{"target": namespace, "scope": "namespace", "reason": "x", "createdBy": "t", "createdAtMs": 0}],
    )
    from housekeeping.mechanisms.steps import local_spark

    gate = validate_plan.run(local_spark("local[2]"), info.run_dir, "trim")
    assert not gate.success
    failed = {(f.frame, f.kwargs.get("column")) for f in gate.failed}
    assert failed == {("holds", "not_held")}
    before = export_manifest(store)
    with pytest.raises(PlanNotValidated):
        apply_step(store, info.run_dir, purge_grace_seconds=0)
    assert export_manifest(store) == before


def test_purge_keeps_a_held_topics_pending_deletions_until_the_hold_is_removed(generated, tmp_path, capsys):
    store = _copy_store(generated, tmp_path / "store")
    code, out, err = run_cli(
        capsys, "apply", "trim", "--store", str(store.root), "--as-of", AS_OF, "--format", "json"
    )
    assert code == 0, err
    deleted = json.loads(out)
    topic = sorted(deleted["appliedTopics"])[0]
    # The default grace period (a day) has passed eight days later.
    code, _, err = run_cli(capsys, "hold", "add", topic, "--store", str(store.root), "--reason", "audit")
    assert code == 0, err
    code, out, err = run_cli(capsys, "purge", "--store", str(store.root), "--as-of", "2026-11-10T00:00:00Z")
    assert code == 0, err
    purged = json.loads(out)
    assert purged["held"] and all(item.startswith(f"{topic}:") for item in purged["held"])
    assert not any(item.startswith(f"{topic}:") for item in purged["purged"])
    # Still restorable while held.
    code, out, err = run_cli(
        capsys, "restore", topic, "--store", str(store.root), "--as-of", "2026-11-10T00:00:00Z"
    )
    assert code == 0, err
    assert json.loads(out)["restoredLedgers"]

    code, out, _ = run_cli(capsys, "hold", "list", "--store", str(store.root))
    assert [h["target"] for h in json.loads(out)["holds"]] == [topic]
    code, _, err = run_cli(capsys, "hold", "remove", topic, "--store", str(store.root))
    assert code == 0, err
    code, out, _ = run_cli(capsys, "hold", "list", "--store", str(store.root))
    assert json.loads(out)["holds"] == []

    code, out, err = run_cli(capsys, "journal", "--store", str(store.root), "--topic", topic)
    assert code == 0, err
    assert "hold_added" in out and "hold_removed" in out and "restored" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["hold", "add", "nope/missing", "--reason", "r"], "no such namespace"),
        (["hold", "add", "persistent://public/default/missing", "--reason", "r"], "no such topic"),
        (["hold", "add", "public/..", "--reason", "r"], "not a valid name"),
        (["hold", "add", "public/default", "--reason", "  "], "give a reason"),
        (["hold", "remove", "public/default"], "is not held"),
        (["hold", "add", "non-persistent://public/default/x", "--reason", "r"], "only persistent://"),
        (["journal", "--topic", "persistent://a/b/.."], "not a valid name"),
    ],
)
def test_bad_hold_and_journal_input_is_refused_by_name(generated, tmp_path, capsys, argv, message):
    store = _copy_store(generated, tmp_path / "store")
    before = export_manifest(store)
    code, _, err = run_cli(capsys, *argv, "--store", str(store.root))
    assert code == 2, err
    assert message in err
    assert export_manifest(store) == before


def test_a_duplicate_hold_is_refused(generated, tmp_path, capsys):
    store = _copy_store(generated, tmp_path / "store")
    argv = ["hold", "add", "public/default", "--store", str(store.root), "--reason", "first"]
    assert run_cli(capsys, *argv)[0] == 0
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and "already held" in err and "first" in err


def test_journal_shows_who_did_what_when_and_why_with_plan_rows(generated, tmp_path, capsys, monkeypatch):
    store = _copy_store(generated, tmp_path / "store")
    monkeypatch.setenv("HOUSEKEEPING_ACTOR", "ops-oncall")
    code, out, err = run_cli(
        capsys, "apply", "trim", "--store", str(store.root), "--as-of", AS_OF, "--format", "json"
    )
    assert code == 0, err
    run_id = json.loads(out)["runId"]
    code, out, err = run_cli(
        capsys, "journal", "--store", str(store.root), "--run", run_id, "--format", "json"
    )
    assert code == 0, err
    entries = json.loads(out)["entries"]
    applied = [e for e in entries if e["status"] == "applied"]
    assert applied and {e["actor"] for e in entries} == {"ops-oncall"}
    assert {e["asOf"] for e in entries} == {format_ms(parse_as_of(AS_OF))}
    for entry in applied:
        assert entry["runId"] == run_id and entry["mechanism"] == "trim"
        assert entry["planRows"] and all(row["reason"] for row in entry["planRows"])
        ledgers = {r["ledgerId"] for r in entry["planRows"] if r["action"] == "delete_ledger"}
        assert ledgers == set(entry["detail"]["ledgers"])
    code, text, _ = run_cli(capsys, "journal", "--store", str(store.root), "--run", run_id, "--limit", "3")
    assert code == 0 and text.count(f"as-of {format_ms(parse_as_of(AS_OF))}") == 3 and "plan: " in text
