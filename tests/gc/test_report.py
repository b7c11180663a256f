"""Inactive-topic GC's report at scale (``mechanisms.gc.report.build_report``): the decisions are added up a part
file at a time and the topic lists merged by topic from the part files as they are written; what it says equals the
decisions sorted by topic and split as the report splits them (a topic planned for deletion that apply did not
delete is kept as ``became_active``, with apply's reason), with the parts in topic order as the one-pass planner
writes them, and with a part out of order (read whole and sorted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from housekeeping.engine import contract
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.run_dir import RunDir, write_json
from housekeeping.mechanisms.gc import report as gc_report
from housekeeping.mechanisms.gc.report import build_report

pytestmark = pytest.mark.unit


def _decision(topic: str, namespace: str, decision: str, kind: str, size: int) -> dict:
    return {
        "topic": topic,
        "namespace": namespace,
        "decision": decision,
        "kind": kind,
        "reason": f"{kind} reason",
        "bytes": size,
        "ledgers": size // 10,
        "subscriptions": 0,
        "backlogSubscriptions": 0,
        "lastActiveMs": 1000 + size,
    }


PARTS = [
    [
        _decision("persistent://a/x/t1", "a/x", "delete", "inactive", 100),
        _decision("persistent://a/x/t4", "a/x", "keep", "subscriptions", 40),
        _decision("persistent://b/y/t7", "b/y", "delete", "inactive", 70),
    ],
    [],
    [
        _decision("persistent://a/x/t2", "a/x", "delete", "inactive", 20),  # became active: not applied
        _decision("persistent://a/x/t3", "a/x", "keep", "backlog", 30),
        _decision("persistent://b/y/t5", "b/y", "keep", "subscriptions", 50),
    ],
]
APPLIED = {
    "runId": "r",
    "topicsDeleted": ["persistent://a/x/t1", "persistent://b/y/t7"],
    "skippedTopics": {"persistent://a/x/t2": "topic became active"},
}


def _run(tmp_path: Path, parts: list[list[dict]]) -> Path:
    run = RunDir(tmp_path / "run")
    run.run_info.parent.mkdir(parents=True)
    info = {
        "mechanism": "gc",
        "runId": "r",
        "asOf": "1970-01-01T00:00:10Z",
        "asOfMs": 10_000,
        "scope": None,
        "store": "s",
    }
    run.run_info.write_text(json.dumps(info))
    write_parquet(run.snapshot_table(contract.TOPICS), contract.TOPICS, [])
    namespaces = [
        {"namespace": "a/x", "storedBytes": 1, "topicCount": 4},
        {"namespace": "b/y", "storedBytes": 1, "topicCount": 2},
    ]
    write_parquet(run.snapshot_table(contract.NAMESPACES), contract.NAMESPACES, namespaces)
    table = run.path / "plan" / "decisions"
    table.mkdir(parents=True)
    for index, rows in enumerate(parts):
        (table / f"part-{index:05d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run.path / "plan" / "summary.json").write_text('{"mechanism": "gc", "runId": "r", "asOfMs": 10000}')
    write_json(run.apply_result, APPLIED)
    return run.path


def _expected(parts: list[list[dict]]) -> tuple[list[str], list[tuple[str, str]]]:
    rows = sorted((row for part in parts for row in part), key=lambda row: row["topic"])
    deleted = [
        r["topic"] for r in rows if r["decision"] == "delete" and r["topic"] in APPLIED["topicsDeleted"]
    ]
    kept = [
        (r["topic"], "became_active" if r["decision"] == "delete" else r["kind"])
        for r in rows
        if r["topic"] not in deleted
    ]
    return deleted, kept


@pytest.mark.parametrize("order", ["as planned", "a part out of topic order"])
def test_the_report_equals_the_decisions_sorted_by_topic_and_split(tmp_path, monkeypatch, order):
    parts = [list(part) for part in PARTS]
    if order != "as planned":
        parts[2].reverse()
    whole_reads = []
    read_whole = gc_report.read_table_arrow
    monkeypatch.setattr(gc_report, "read_table_arrow", lambda *a: whole_reads.append(a) or read_whole(*a))
    report = build_report(_run(tmp_path, parts), dry_run=False)
    deleted, kept = _expected(parts)
    assert [row["topic"] for row in report["deletedTopics"]] == deleted
    assert [(row["topic"], row["kind"]) for row in report["keptTopics"]] == kept
    assert report["keptTopics"][0]["reason"] == "topic became active"  # t2, from apply's skipped topics
    assert report["deletedTopics"][0]["lastActive"] == "1970-01-01T00:00:01.100Z"
    assert report["totals"] == {"topics": 2, "bytes": 170, "ledgers": 17}
    assert report["namespaces"] == [
        {"namespace": "a/x", "topics": 1, "bytes": 100, "ledgers": 10, "namespaceTopics": 4},
        {"namespace": "b/y", "topics": 1, "bytes": 70, "ledgers": 7, "namespaceTopics": 2},
    ]
    assert report["keptByKind"] == [
        {"kind": "subscriptions", "label": "has subscriptions", "topics": 2},
        {"kind": "backlog", "label": "has backlog", "topics": 1},
        {"kind": "became_active", "label": "became active", "topics": 1},
    ]
    assert len(whole_reads) == (0 if order == "as planned" else 1)
    # Written twice (report.json, then the page): the same rows each time.
    assert list(report["keptTopics"]) == list(report["keptTopics"]) and len(report["keptTopics"]) == 4
