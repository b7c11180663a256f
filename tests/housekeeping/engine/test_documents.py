"""The run directory's documents as types (housekeeping.engine.documents): each written with its schema version and
read back equal; a run directory written before versions were recorded (``documents_v1``: the JSON files of a trim
run that the previous version planned, gated, approved, applied and purged on a generated store) read through the one
migrating reader, every reader seeing the current type; a document of a newer version, or one missing a key its type
needs, refused naming the file."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from housekeeping.core.errors import InputError
from housekeeping.engine.documents import (
    SCHEMA_KEY,
    AppliedRun,
    ApprovalDecision,
    ApprovalRequest,
    GateResult,
    Intent,
    Outcome,
    PlanSummary,
    PurgedRun,
    RunInfo,
    document_json,
    read_applied_run,
    read_document,
    read_gate_result,
    read_purged_run,
    read_run_info,
    write_document,
)
from housekeeping.engine.plan import read_summary
from housekeeping.engine.report import run_section
from housekeeping.engine.run_dir import RunDir

pytestmark = pytest.mark.unit

VERSION_1 = Path(__file__).with_name("documents_v1")


@pytest.fixture
def v1_run(tmp_path) -> RunDir:
    run = RunDir(tmp_path / "run")
    shutil.copytree(VERSION_1, run.path)
    return run


def _raw(run: RunDir, path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_version_1_run_directory_reads_as_the_current_types(v1_run):
    raw = _raw(v1_run, v1_run.run_info)
    assert SCHEMA_KEY not in raw, "the fixture is a run written before schema versions"
    info = read_run_info(v1_run)
    assert (info.run_id, info.mechanism, info.as_of_ms, info.as_of) == (
        raw["runId"], "trim", raw["asOfMs"], raw["asOf"],
    )  # fmt: skip
    assert info.broker == raw["broker"] and info.snapshot_tables == tuple(raw["snapshotTables"])
    assert info.snapshot_buckets == raw["snapshotBuckets"] and info.actor == raw["actor"]
    # The run options are the keys no field names: every mechanism's, as the snapshot recorded them.
    assert info.option("maxDeletedTopicShare") == 0.5 and info.option("compactTopics") == []
    assert info.option("unknown", "absent") == "absent"
    # Written again by this version: the same facts, now with a version and an intent not known (version 3).
    written = document_json(info)
    assert (written.pop("intent"), written.pop("previewReason"), written.pop(SCHEMA_KEY)) == (None, None, 3)
    assert written == raw and info.applies

    summary = read_summary(v1_run.path)
    assert summary.as_json() == _raw(v1_run, v1_run.plan_summary)
    assert summary["ledgersToDelete"] == summary.figures["ledgersToDelete"] > 0

    gate = read_gate_result(v1_run)
    raw_gate = _raw(v1_run, v1_run.gate_result)
    assert gate.success and gate.failed == () and gate.plan_digest == raw_gate["planDigest"]
    assert [o.as_json() for o in gate.expectations] == raw_gate["expectations"]

    request = read_document(ApprovalRequest, v1_run.approval_request)
    assert request.required and request.purge == {"bytes": 300, "files": 2, "topics": 1}
    decision = read_document(ApprovalDecision, v1_run.approval_decision)
    assert (decision.decision, decision.decided_by, decision.reasons) == (
        "approved",
        "ops-alice",
        request.reasons,
    )

    applied = read_applied_run(v1_run)
    raw_applied = _raw(v1_run, v1_run.apply_result)
    assert (
        applied.applied_topics == tuple(raw_applied["appliedTopics"])
        and applied.run_id == raw_applied["runId"]
    )
    assert applied.figures["ledgersDeleted"] == raw_applied["ledgersDeleted"] == 15
    purged = read_purged_run(v1_run)
    assert (purged.waiting, purged.next_purge_after_ms) == (15, 1793577600000)

    # What every report starts with, from the old run: the same figures the old reader gave.
    section = run_section(v1_run.path, info, dry_run=False)
    assert section["gate"]["success"] and section["apply"] == raw_applied
    assert section["approval"]["decision"]["decidedBy"] == "ops-alice"
    assert section["purge"]["nextPurgeAfter"] == "2026-11-02T00:00:00.000Z"


def test_the_oldest_run_json_reads_with_its_defaults_and_the_topic_versions_it_carried(v1_run):
    raw = _raw(v1_run, v1_run.run_info)
    # Runs snapshotted before these keys existed (and when run.json still carried the topics' versions).
    for key in (
        "actor",
        "snapshotTables",
        "snapshotBuckets",
        "fileGenerations",
        "tierLedgers",
        "offloadTier",
    ):
        del raw[key]
    raw["topicVersions"] = {"persistent://public/default/t-00000": 4}
    v1_run.run_info.write_text(json.dumps(raw), encoding="utf-8")
    info = read_run_info(v1_run)
    assert info.snapshot_tables is None and info.snapshot_buckets == 0 and info.actor is None
    assert info.file_generations == () and info.tier_ledgers == () and info.offload_tier is None
    assert info.legacy_topic_versions == {"persistent://public/default/t-00000": 4}
    assert "topicVersions" not in document_json(replace(info, legacy_topic_versions=None))


@pytest.mark.parametrize(
    "document",
    [
        RunInfo(
            "r-1", "gc", 1_793_491_200_000, scope=("acme",), options={"maxDeletedTopicShare": 0.5},
            broker={"ttlDurationDefaultInSeconds": 0}, snapshot_tables=("topics",), snapshot_buckets=4,
            file_generations=(("persistent://a/b/t", 3, 1),), tier_ledgers=(("persistent://a/b/t", 2, "u-1"),),
            intent=Intent.PREVIEW, preview_reason="started 2220 s after its slot",
        ),
        PlanSummary("trim", "r-1", 5, {"ledgersToDelete": 3, "perNamespace": {"a/b": {"ledgers": 3}}}),
        GateResult(
            "trim", False, "d" * 64,
            (Outcome("deletions", "expect_column_values_to_be_in_set", {"column": "ok"}, False, 4, 1, ("x",)),),
        ),
        ApprovalRequest(
            "r-1", "trim", "1970-01-01T00:00:00.005Z", True, ("over",), {"bytes": 1}, {"bytes": 2},
            {"files": 1, "bytes": 2, "topics": 1}, None, "plan/summary.json", "approval/request.md",
        ),
        ApprovalDecision("r-1", "trim", "rejected", "ops-bob", 7, ("over",)),
        AppliedRun("r-1", {"appliedTopics": ["persistent://a/b/t"], "ledgersDeleted": 1}),
        PurgedRun(purged=("persistent://a/b/t:1",), bytes_purged=10, waiting=2, failed={"x": "tier down"}),
    ],
    ids=lambda document: type(document).__name__,
)  # fmt: skip
def test_each_document_is_written_with_its_version_and_read_back_equal(tmp_path, document):
    path = tmp_path / "document.json"
    write_document(path, document)
    assert (
        json.loads(path.read_text())[SCHEMA_KEY]
        == document.VERSION
        == (3 if isinstance(document, RunInfo) else 2)
    )
    assert read_document(type(document), path) == document


def test_a_version_2_run_json_reads_with_its_intent_not_known(v1_run):
    """Version 2 did not record what the run was started to do: read as not known, which apply takes as version 2
    did; version 3 records it, and only an apply run applies."""
    raw = {**_raw(v1_run, v1_run.run_info), SCHEMA_KEY: 2}
    v1_run.run_info.write_text(json.dumps(raw), encoding="utf-8")
    info = read_run_info(v1_run)
    assert (info.intent, info.preview_reason, info.applies) == (None, None, True)
    for intent in Intent:
        assert replace(info, intent=intent).applies == (intent is Intent.APPLY)
    v1_run.run_info.write_text(json.dumps({**raw, SCHEMA_KEY: 3, "intent": "dry_run"}), encoding="utf-8")
    assert read_run_info(v1_run).intent is Intent.DRY_RUN
    v1_run.run_info.write_text(json.dumps({**raw, SCHEMA_KEY: 3, "intent": "apply-maybe"}), encoding="utf-8")
    with pytest.raises(InputError, match=rf"{v1_run.run_info}"):
        read_run_info(v1_run)


def test_a_newer_document_or_one_missing_a_key_is_refused_naming_the_file(v1_run):
    raw = _raw(v1_run, v1_run.gate_result)
    v1_run.gate_result.write_text(json.dumps({**raw, SCHEMA_KEY: 3}), encoding="utf-8")
    with pytest.raises(
        InputError, match=rf"{v1_run.gate_result}: a gate-result document of schema version 3"
    ):
        read_gate_result(v1_run)
    del raw["mechanism"]
    v1_run.gate_result.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(
        InputError, match=rf"{v1_run.gate_result}: a gate-result document without 'mechanism'"
    ):
        read_gate_result(v1_run)
    v1_run.run_info.unlink()
    with pytest.raises(InputError, match="has no snapshot"):
        read_run_info(v1_run)
