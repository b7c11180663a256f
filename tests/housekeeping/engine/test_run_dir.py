"""The run directory (``housekeeping.engine.run_dir``): the layout users read (public: report paths, gate
verdict) and its JSON documents, written whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from housekeeping.engine import contract
from housekeeping.engine.run_dir import RunDir, write_json, write_json_one_line_each
from housekeeping.mechanisms.compaction.tables import COMPACTION_KEPT

pytestmark = pytest.mark.unit


def test_the_run_directory_layout_is_the_documented_one(tmp_path):
    run = RunDir(tmp_path / "runs" / "trim" / "r1")
    assert RunDir(run) == run and Path(run) == run.path
    relative = {
        name: getattr(run, name).relative_to(run.path).as_posix()
        for name in (
            "run_info",
            "plan_summary",
            "gate_result",
            "data_docs_index",
            "apply_result",
            "purge_result",
            "report_json",
            "report_md",
        )
    }
    assert relative == {
        "run_info": "snapshot/run.json",
        "plan_summary": "plan/summary.json",
        "gate_result": "gate/result.json",
        "data_docs_index": "gate/data_docs/index.html",
        "apply_result": "apply/result.json",
        "purge_result": "apply/purge.json",
        "report_json": "report/report.json",
        "report_md": "report/report.md",
    }
    assert run.snapshot_table(contract.TOPICS) == run.path / "snapshot" / "topics.parquet"
    assert run.plan_table(contract.ACTIONS) == run.path / "plan" / "actions"
    assert run.plan_table(COMPACTION_KEPT) == run.path / "plan" / "compaction" / "kept"


def test_a_large_document_is_written_one_value_per_line_and_reads_back_as_json_dump_wrote_it(tmp_path):
    import json
    from datetime import date

    from housekeeping.engine.report import StreamedList

    entries = [
        {"topic": f"t-{i}", "ledgers": [{"id": i, "size": None}], "z": 1.5, "a": "é"} for i in range(3)
    ]
    document = {
        "topics": StreamedList(len(entries), lambda: iter(entries)),
        "empty": StreamedList(0, lambda: iter(())),
        "summary": {"when": date(2026, 11, 1), "nested": {"b": 2, "a": [1, 2]}},
        "byLedger": {10: [], 7: 1},
        "none": None,
        "tuple": (1, "two"),
    }
    path = tmp_path / "report.json"
    write_json_one_line_each(path, document)
    plain = tmp_path / "plain.json"
    write_json(plain, {**document, "topics": entries, "empty": []})
    assert json.loads(path.read_text()) == json.loads(plain.read_text())
    lines = path.read_text().splitlines()
    # Each topic's entry on a line of its own, keys sorted, at the second level of indentation.
    topic_lines = [line for line in lines if '"topic": "t-' in line]
    assert len(topic_lines) == 3 and all(line.startswith('    {"a": "\\u00e9"') for line in topic_lines)
    assert lines[0] == "{" and lines[-1] == "}" and '  "empty": [],' in lines
    assert lines.index('    "7": 1,') < lines.index('    "10": []') and '    "when": "2026-11-01"' in lines
