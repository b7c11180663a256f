"""Compaction through the CLI and the apply app: Pulsar's CompactionTest scenarios (latest per key, empty payload
deletes, keyless drop, incremental compaction over the previous compacted ledger), the raw ledgers freed by trim
once compacted, crashes (SIGKILL) before and after the switch, and the gate catching wrong output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from housekeeping.engine import launcher
from housekeeping.mechanisms.erasure.requests import key_digest
from housekeeping.mechanisms.registry import get_mechanism
from housekeeping.mechanisms.steps import snapshot_step
from housekeeping.store import clients
from housekeeping.store import metadata_schema as t
from housekeeping.store.store import Store
from tests.conftest import run_cli, write_manifest

pytestmark = [pytest.mark.spark, pytest.mark.runs]

TOPIC = "persistent://acme/tables/prices"
T0 = 1_780_000_000_000
AS_OF = "2026-11-01T00:00:00Z"
AS_OF_MS = 1_793_491_200_000


def _message(ledger, entry, key, value, minutes_before=60):
    return {
        "ledgerId": ledger,
        "entryId": entry,
        "publishTime": AS_OF_MS - minutes_before * 60_000,
        "key": key,
        "value": value,
    }


MESSAGES = [
    _message(10, 0, "a", "a1"),
    _message(10, 1, "b", "b1"),
    _message(10, 2, "c", "c1"),
    _message(10, 3, "a", "a2"),
    _message(11, 0, "b", None),  # tombstone
    _message(11, 1, None, "keyless"),
    _message(11, 2, "d", ""),  # empty payload: a tombstone too
    _message(12, 0, "a", "a3"),
    _message(12, 1, "e", "e1"),
]


def _manifest(messages=MESSAGES, namespace_policies=None, broker=None):
    sizes = {}
    for m in messages:
        entries, size = sizes.get(m["ledgerId"], (0, 0))
        sizes[m["ledgerId"]] = (entries + 1, size + len((m["value"] or "").encode()))
    ids = sorted(sizes)
    ledgers = [
        {
            "ledgerId": i,
            "entries": sizes[i][0],
            "size": sizes[i][1],
            **({"timestamp": T0} if i != ids[-1] else {}),
        }
        for i in ids
    ]
    return {
        "broker": broker or {},
        "namespaces": {
            "acme/tables": namespace_policies
            or {
                "compaction_threshold": 1,
                "retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0},
            }
        },
        "topics": {TOPIC: {"ledgers": ledgers, "cursors": {}, "messages": messages, "lastActive": T0}},
    }


def _store(tmp_path, capsys, **kwargs) -> Path:
    root = tmp_path / "store"
    code, _, err = run_cli(
        capsys, "load", "--store", str(root), "--manifest", str(write_manifest(tmp_path, _manifest(**kwargs)))
    )
    assert code == 0, err
    return root


def _view(capsys, root) -> dict:
    code, out, err = run_cli(capsys, "inspect", "--store", str(root), "--compacted", "--topic", TOPIC)
    assert code == 0, err
    return json.loads(out)["compactedView"][TOPIC]


def _values(view) -> dict:
    return {k: v.get("value", "<deleted>") for k, v in view["keys"].items()}


def _apply(capsys, root, *extra) -> dict:
    code, out, err = run_cli(capsys, "apply", "compaction", "--store", str(root), "--as-of", AS_OF, *extra)
    assert code == 0, err
    return json.loads(out)


def test_latest_value_per_key_tombstones_delete_keyless_dropped(tmp_path, capsys):
    root = _store(tmp_path, capsys)
    result = _apply(capsys, root)
    assert result["appliedTopics"] == [TOPIC]
    view = _view(capsys, root)
    assert _values(view) == {"a": "a3", "c": "c1", "e": "e1"}
    assert view["compactedLedger"]["horizon"] == "12:1" and view["entriesAfterHorizon"] == 0
    ledger = pq.read_table(Store.open(root).ledger_dir(TOPIC, view["compactedLedger"]["ledgerId"]))
    assert list(
        zip(ledger.column("ledgerId").to_pylist(), ledger.column("entryId").to_pylist(), strict=True)
    ) == [
        (10, 2),
        (12, 0),
        (12, 1),
    ], "original positions, original publish order"
    code, out, _ = run_cli(capsys, "inspect", "--store", str(root))
    assert json.loads(out)["topics"][TOPIC]["cursors"]["__compaction"]["markDeletePosition"] == "12:1"


def test_keyless_entries_are_kept_when_the_broker_retains_null_keys(tmp_path, capsys):
    root = _store(tmp_path, capsys, broker={"topicCompactionRetainNullKey": True})
    _apply(capsys, root)
    view = _view(capsys, root)
    assert view["compactedLedger"]["entries"] == 4  # a3, c1, e1 and the keyless entry


def test_incremental_compaction_reads_the_compacted_ledger_after_trim_freed_the_raw_ledgers(tmp_path, capsys):
    root = _store(tmp_path, capsys)
    first = _apply(capsys, root)
    first_ledger = first["compactedLedgers"][TOPIC]
    store = Store.open(root)
    # the writer goes on: new values for a and c, a delete of e, a new key f, on a new ledger
    clients.connect_producer(store, TOPIC, now_ms=AS_OF_MS - 30 * 60_000)
    clients.roll_ledger(store, TOPIC, now_ms=AS_OF_MS - 30 * 60_000)
    clients.publish(
        store,
        TOPIC,
        [
            {"key": "a", "value": "a4"},
            {"key": "e", "value": None},
            {"key": "f", "value": "f1"},
            {"key": "c", "value": "c2"},
        ],
        now_ms=AS_OF_MS - 20 * 60_000,
    )
    # trim may now free the raw ledgers compaction has read (the __compaction cursor is the only durable one)
    code, out, err = run_cli(
        capsys, "apply", "trim", "--store", str(root), "--as-of", AS_OF, "--max-deleted-share", "1"
    )
    assert code == 0, err
    assert json.loads(out)["ledgersDeleted"] >= 2
    view = _view(capsys, root)
    assert _values(view) == {"a": "a4", "c": "c2", "e": "<deleted>", "f": "f1"}, (
        "compacted ledger + entries after its horizon"
    )
    assert view["entriesAfterHorizon"] == 4

    second = _apply(capsys, root, "--compact-topic", TOPIC)
    view = _view(capsys, root)
    assert _values(view) == {"a": "a4", "c": "c2", "f": "f1"} and view["entriesAfterHorizon"] == 0
    assert second["compactedLedgersReplaced"] == 1 and second["compactedLedgers"][TOPIC] != first_ledger
    with store.engine.connect() as conn:
        pending = conn.execute(
            select(t.pending_deletions).where(t.pending_deletions.c.kind == "compacted_ledger")
        ).all()
    assert [(r.ledger_id, r.status) for r in pending] == [(first_ledger, "pending")]
    code, out, _ = run_cli(capsys, "purge", "--store", str(root), "--as-of", "2026-11-10T00:00:00Z")
    assert code == 0 and f"{TOPIC}:{first_ledger}" in json.loads(out)["purged"]
    assert not store.ledger_dir(TOPIC, first_ledger).exists()
    assert store.ledger_dir(TOPIC, second["compactedLedgers"][TOPIC]).is_dir()


def test_compacted_retention_applies_when_trim_left_no_raw_entry_and_the_horizon_stays(tmp_path, capsys):
    """Found by the opt-in race run: every raw ledger trimmed up to the __compaction cursor and the current
    ledger empty, then the compacted retention falls due. The planner crashed on the missing last raw entry;
    now the horizon stays where it was and only the compacted ledger's retention is applied."""
    policies = {
        "compaction_threshold": 1,
        "compacted_retention": {"retentionTimeInMinutes": 120, "retentionSizeInMB": -1},
        "retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0},
    }
    root = _store(tmp_path, capsys, namespace_policies=policies)
    _apply(capsys, root)
    assert _view(capsys, root)["compactedLedger"]["horizon"] == "12:1"
    store = Store.open(root)
    clients.connect_producer(store, TOPIC, now_ms=AS_OF_MS - 60_000)
    clients.roll_ledger(store, TOPIC, now_ms=AS_OF_MS - 60_000)
    code, out, err = run_cli(
        capsys, "apply", "trim", "--store", str(root), "--as-of", AS_OF, "--max-deleted-share", "1"
    )
    assert code == 0 and json.loads(out)["ledgersDeleted"] == 3, err
    code, out, _ = run_cli(capsys, "inspect", "--store", str(root))
    assert [x["entries"] for x in json.loads(out)["topics"][TOPIC]["ledgers"]] == [0]

    later = "2026-11-01T03:00:00Z"  # every compacted entry is now 240 min old: over the 120-min limit
    code, out, err = run_cli(capsys, "apply", "compaction", "--store", str(root), "--as-of", later)
    assert code == 0, err
    assert json.loads(out)["appliedTopics"] == [TOPIC]
    view = _view(capsys, root)
    assert view["compactedLedger"]["horizon"] == "12:1" and _values(view) == {}
    code, out, _ = run_cli(capsys, "inspect", "--store", str(root))
    assert json.loads(out)["topics"][TOPIC]["cursors"]["__compaction"]["markDeletePosition"] == "12:1"


def test_compacted_retention_time_size_and_tombstone_grace_through_the_store(tmp_path, capsys):
    messages = [
        _message(10, 0, "old", "x" * 10, minutes_before=180),  # older than the 120-min limit
        _message(10, 1, "gone", None, minutes_before=90),  # tombstone within its 100-min grace
        _message(10, 2, "k1", "y" * 10, minutes_before=60),
        _message(11, 0, "k2", "z" * 10, minutes_before=30),
        _message(11, 1, "k3", "w" * 10, minutes_before=10),
    ]
    policies = {
        "compaction_threshold": 1,
        "compacted_retention": {"retentionTimeInMinutes": 120, "retentionSizeInMB": -1},
        "compacted_tombstone_grace_seconds": 6000,
    }
    root = _store(tmp_path, capsys, messages=messages, namespace_policies=policies)
    _apply(capsys, root)
    assert _values(_view(capsys, root)) == {
        "gone": "<deleted>",
        "k1": "y" * 10,
        "k2": "z" * 10,
        "k3": "w" * 10,
    }


def _spark_submit_apply(run_dir: Path, root: Path, fault: str) -> subprocess.CompletedProcess:
    """The DAG's apply task (spark-submit of the apply app) with a fault point armed."""
    env = dict(os.environ, HOUSEKEEPING_STORE_ROOT=str(root), HOUSEKEEPING_PURGE_GRACE_SECONDS="3600")
    env["HOUSEKEEPING_FAULT_POINT"] = fault
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[1]",
            str(launcher.SUBMIT_APP),
            *launcher.submit_args(get_mechanism("compaction").apply_app, ["--run-dir", str(run_dir)]),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _planned_run(root: Path, run_id: str) -> Path:
    from housekeeping.mechanisms.steps import plan_and_gate_in_process

    store = Store.open(root)
    info = snapshot_step(store, "compaction", run_id=run_id, as_of_ms=AS_OF_MS)
    assert plan_and_gate_in_process(info.run_dir, "compaction", "local[2]").success
    return info.run_dir


def _compacted_rows(root: Path) -> list[tuple]:
    with Store.open(root).engine.connect() as conn:
        return sorted((r.ledger_id, r.status) for r in conn.execute(select(t.compacted_ledgers)))


def _ledger_dirs(root: Path) -> set[str]:
    return {p.name for p in (root / "ledgers" / "persistent" / "acme" / "tables" / "prices").iterdir()}


@pytest.mark.processes  # spark-submit of the apply app, killed
def test_sigkill_before_the_switch_leaves_the_old_view_and_a_rerun_completes(tmp_path, capsys):
    root = _store(tmp_path, capsys)
    run_dir = _planned_run(root, "crash-before")
    killed = _spark_submit_apply(run_dir, root, "compaction_apply_before_switch")
    assert killed.returncode != 0, killed.stdout[-2000:]
    # the new ledger is written and known to the metadata as staged; readers still see no compacted ledger
    rows = _compacted_rows(root)
    assert [status for _, status in rows] == ["staged"]
    assert _ledger_dirs(root) == {"10", "11", "12", str(rows[0][0])}
    assert _view(capsys, root)["compactedLedger"] is None
    # The task's retry: the same run's apply again (in this process; the apply app is the same code).
    from housekeeping.mechanisms.steps import apply_step

    apply_step(Store.open(root), run_dir, purge_grace_seconds=3600)
    assert _compacted_rows(root) == [(rows[0][0], "current")]
    assert _values(_view(capsys, root)) == {"a": "a3", "c": "c1", "e": "e1"}


@pytest.mark.processes  # spark-submit of the apply app, killed
def test_a_crash_after_staging_is_abandoned_by_the_next_run_into_the_pending_deletion_log(tmp_path, capsys):
    root = _store(tmp_path, capsys)
    crashed = _planned_run(root, "crash-stage")
    assert _spark_submit_apply(crashed, root, "compaction_apply_after_stage").returncode != 0
    ((staged_id, _),) = _compacted_rows(root)
    result = _apply(capsys, root)  # a new run, not a retry
    assert result["appliedTopics"] == [TOPIC]
    with Store.open(root).engine.connect() as conn:
        abandoned = conn.execute(select(t.pending_deletions.c.ledger_id, t.pending_deletions.c.kind)).all()
    assert [(r.ledger_id, r.kind) for r in abandoned] == [(staged_id, "compacted_ledger")]


@pytest.mark.parametrize(
    ("mutation", "failing"),
    [
        ("keep_superseded", "latest_for_its_key"),
        ("drop_a_kept_entry", "no_entry_missing_or_extra"),
        ("keep_a_tombstone", "tombstone_within_grace"),
        # Rows of a topic the gate reads no input of, and of no topic: each checked against nothing, and failing.
        ("keep_another_topics_entry", "entry_is_an_input_entry"),
        ("keep_an_entry_of_no_topic", "entry_is_an_input_entry"),
    ],
)
def test_the_gate_blocks_a_wrong_compacted_ledger_and_apply_refuses(
    tmp_path, capsys, spark, mutation, failing
):
    import pyarrow as pa

    from housekeeping.core.errors import PlanNotValidated
    from housekeeping.engine.gate import require_passed_gate
    from spark_apps import validate_plan

    root = _store(tmp_path, capsys)
    run_dir = _planned_run(root, f"mutate-{mutation}")
    kept_dir = run_dir / "plan" / "compaction" / "kept"
    (part,) = [p for p in kept_dir.glob("*.parquet") if pq.read_metadata(p).num_rows]
    table = pq.read_table(part)
    rows = table.to_pylist()
    digest = {k: key_digest(k) for k in "abc"}  # the plan names keys by their SHA-256
    if mutation == "keep_superseded":  # a2 (10:3) instead of a3 (12:0)
        rows = [dict(r, entryId=3, ledgerId=10) if r["keyDigest"] == digest["a"] else r for r in rows]
    elif mutation == "drop_a_kept_entry":
        rows = [r for r in rows if r["keyDigest"] != digest["c"]]
    elif mutation == "keep_a_tombstone":  # b's tombstone (11:0) stays although its grace is 0
        rows.append(dict(rows[0], keyDigest=digest["b"], ledgerId=11, entryId=0, size=0))
    else:  # a copy of a kept row, in a file of its own
        other = "persistent://acme/tables/other" if mutation == "keep_another_topics_entry" else None
        pq.write_table(
            pa.Table.from_pylist([dict(rows[0], topic=other)], schema=table.schema), kept_dir / "x.parquet"
        )
    part.with_name(f".{part.name}.crc").unlink(missing_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
    gate = validate_plan.run(spark, run_dir, "compaction")
    assert not gate.success
    assert failing in {f.kwargs.get("column") for f in gate.failed}
    with pytest.raises(PlanNotValidated):
        require_passed_gate(run_dir)
    assert _compacted_rows(root) == []


# --- starting from a compacted ledger taken from a cluster (`load` of a topic's compactedLedger) -----------------


def _imported(
    tmp_path, capsys, raw: dict[int, list[dict]], compacted: list[dict], horizon: str, policies=None
):
    """A topic whose ledgers hold ``raw`` (ledger id -> messages; the last ledger is the current one), with a
    compacted ledger 900 holding ``compacted`` up to ``horizon`` (the __compaction cursor)."""
    ids = sorted(raw)
    ledgers = [
        {
            "ledgerId": i,
            "entries": len(raw[i]),
            "size": sum(len((m["value"] or "").encode()) for m in raw[i]),
            **({"timestamp": T0} if i != ids[-1] else {}),
        }
        for i in ids
    ]
    topic = {
        "ledgers": ledgers,
        "cursors": {"__compaction": {"markDeletePosition": horizon}},
        "messages": [m for i in ids for m in raw[i]],
        "lastActive": T0,
        "compactedLedger": {
            "ledgerId": 900,
            "entries": len(compacted),
            "size": sum(len((m["value"] or "").encode()) for m in compacted),
            "compactedAt": AS_OF_MS - 6 * 3_600_000,
            "messages": compacted,
        },
    }
    document = {
        "namespaces": {"acme/tables": policies or {"compaction_threshold": 1}},
        "topics": {TOPIC: topic},
    }
    root = tmp_path / "store"
    code, _, err = run_cli(
        capsys, "load", "--store", str(root), "--manifest", str(write_manifest(tmp_path, document))
    )
    assert code == 0, err
    return root


def _action(root: Path) -> dict:
    (run,) = (root / "runs" / "compaction").iterdir()
    from housekeeping.engine.plan import read_table

    (action,) = read_table(run, "actions")
    return action


def test_compact_add_compact_merges_new_entries_with_the_imported_compacted_ledger(tmp_path, capsys):
    """apache/pulsar CompactorTest#testCompactAddCompact: a=A_1, b=B_1, a=A_2 compacted (a=A_2, b=B_1); then
    b=B_2; the next compaction gives a=A_2, b=B_2. Here the first compaction happened on the cluster."""
    first = [_message(1, 0, "a", "A_1"), _message(1, 1, "b", "B_1"), _message(1, 2, "a", "A_2")]
    root = _imported(
        tmp_path, capsys, {1: first, 2: [_message(2, 0, "b", "B_2")]}, [first[1], first[2]], "1:2"
    )
    assert _values(_view(capsys, root)) == {"a": "A_2", "b": "B_2"}, "imported view: compacted ledger + tail"
    result = _apply(capsys, root)
    assert result["appliedTopics"] == [TOPIC] and result["compactedLedgersReplaced"] == 1
    view = _view(capsys, root)
    assert _values(view) == {"a": "A_2", "b": "B_2"} and view["entriesAfterHorizon"] == 0
    # Incremental: the compacted ledger's 2 entries and the 1 raw entry after its horizon, not ledger 1 again.
    action = _action(root)
    assert (action["ledgerId"], action["readFrom"], action["entriesRead"]) == (900, "1:2", 3)


def test_compactor_reads_compacted_keys_survive_after_their_raw_ledgers_were_trimmed(tmp_path, capsys):
    """apache/pulsar CompactionTest#testCompactorReadsCompacted: key0 and key1 compacted, key2 published after;
    the second compaction reads the compacted ledger and only the raw entries after its horizon, and all three
    keys are there. Ledger 1 (key0) is no longer in the cluster's ledger list: trimmed once compacted."""
    key0, key1, key2 = (_message(i + 1, 0, f"key{i}", f"my-message-{i}") for i in range(3))
    root = _imported(tmp_path, capsys, {2: [key1], 3: [key2]}, [key0, key1], "2:0")
    result = _apply(capsys, root)
    assert result["appliedTopics"] == [TOPIC]
    view = _view(capsys, root)
    assert _values(view) == {"key0": "my-message-0", "key1": "my-message-1", "key2": "my-message-2"}
    assert [view["keys"][k]["position"] for k in ("key0", "key1", "key2")] == ["1:0", "2:0", "3:0"]
    action = _action(root)
    assert (action["readFrom"], action["entriesRead"], action["entriesKept"]) == ("2:0", 3, 3)


def test_tombstones_after_the_imported_compaction_remove_their_keys(tmp_path, capsys):
    """apache/pulsar CompactionRetentionTest#testCompaction: keys a, b, c, x1, x2 compacted at round 2, then x1 and
    x2 explicitly removed (empty payloads); the next compaction leaves a, b, c."""
    round2 = [_message(2, i, key, "2") for i, key in enumerate(("a", "b", "c", "x1", "x2"))]
    removals = [_message(3, 0, "x1", None), _message(3, 1, "x2", None)]
    root = _imported(tmp_path, capsys, {2: round2, 3: removals}, round2, "2:4")
    # Pulsar's test runs the compactor itself; here the topic is named (two empty payloads are 0 bytes of
    # backlog, which no compaction threshold exceeds).
    _apply(capsys, root, "--compact-topic", TOPIC)
    assert _values(_view(capsys, root)) == {"a": "2", "b": "2", "c": "2"}
    action = _action(root)
    assert (action["entriesKept"], action["entriesTombstoned"], action["entriesSuperseded"]) == (3, 2, 2)


@pytest.mark.parametrize("retention", [None, {"retentionTimeInMinutes": 1440, "retentionSizeInMB": -1}])
def test_compacted_retention_applies_to_old_entries_of_the_imported_compacted_ledger(
    tmp_path, capsys, retention
):
    """apache/pulsar #19665 (PIP-252): with a compacted retention of one day, a key last written three days ago
    leaves the compacted ledger although nothing new arrived; without one (Pulsar), nothing is compacted."""
    old, recent = _message(1, 0, "old", "o", minutes_before=3 * 1440), _message(1, 1, "recent", "r")
    policies = {"compaction_threshold": 1, **({"compacted_retention": retention} if retention else {})}
    root = _imported(tmp_path, capsys, {1: [old, recent], 2: []}, [old, recent], "1:1", policies)
    result = _apply(capsys, root)
    if retention is None:
        assert result["appliedTopics"] == [] and _values(_view(capsys, root)) == {"old": "o", "recent": "r"}
        return
    assert result["appliedTopics"] == [TOPIC]
    assert _values(_view(capsys, root)) == {"recent": "r"}
    action = _action(root)
    assert (action["entriesRead"], action["entriesExpiredTime"], action["entriesKept"]) == (2, 1, 1)
    assert "no longer allows" in action["reason"]
