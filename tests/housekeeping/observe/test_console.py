"""The console's store page figures per namespace (``observe.console.namespaces``): the exceeded backlog quotas are
what the backlog_quota DAG recorded, with when it last checked; a namespace it never checked says so rather than
"none"."""

from __future__ import annotations

import pytest
from sqlalchemy import insert

from housekeeping.engine.documents import AppliedRun, RunInfo, write_document
from housekeeping.engine.run_dir import RunDir
from housekeeping.observe.console import namespaces
from housekeeping.store import metadata_schema as t
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import RUNS_DIR, write_transaction
from tests.conftest import ledger_topic, write_manifest

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000
CHECKED, UNCHECKED = "acme/orders", "acme/audit"


@pytest.fixture
def store(tmp_path):
    topics = {
        f"persistent://{namespace}/{name}": ledger_topic(
            [(1, [T0, T0 + MINUTE], T0 + 2 * MINUTE), (2, [], None)],
            {"billing": {"markDeletePosition": "1:-1"}},
        )
        for namespace in (CHECKED, UNCHECKED)
        for name in ("a", "b")
    }
    document = {"namespaces": {CHECKED: {}, UNCHECKED: {}}, "topics": topics}
    return load_manifest(tmp_path / "store", write_manifest(tmp_path, document))


def _state(topic: str, quota_type: str, *, exceeded: bool, as_of_ms: int) -> dict:
    return {
        "topic": topic,
        "quota_type": quota_type,
        "policy": "producer_request_hold",
        "exceeded": exceeded,
        "limit_value": 100,
        "measured_value": 150 if exceeded else 50,
        "exceeded_since_ms": T0 + 10 * MINUTE if exceeded else None,
        "cleared_at_ms": None,
        "as_of_ms": as_of_ms,
        "run_id": "backlog-run",
    }


def test_exceeded_quotas_are_the_last_checks_and_an_unchecked_namespace_says_so(store):
    with write_transaction(store.engine) as conn:
        conn.execute(
            insert(t.backlog_quota_states),
            [
                _state(
                    f"persistent://{CHECKED}/a",
                    "destination_storage",
                    exceeded=True,
                    as_of_ms=T0 + 20 * MINUTE,
                ),
                _state(
                    f"persistent://{CHECKED}/b",
                    "destination_storage",
                    exceeded=False,
                    as_of_ms=T0 + 30 * MINUTE,
                ),
            ],
        )
    rows = {row["namespace"]: row for row in namespaces(store, T0 + 60 * MINUTE, {})}
    assert rows[CHECKED]["exceededQuotas"] == [
        {
            "topic": f"persistent://{CHECKED}/a",
            "quotaType": "destination_storage",
            "exceededSince": "2026-01-01T00:10:00.000Z",
        }
    ]
    assert rows[CHECKED]["quotasCheckedAsOf"] == "2026-01-01T00:30:00.000Z"  # the latest check of its topics
    assert rows[UNCHECKED]["exceededQuotas"] == [] and rows[UNCHECKED]["quotasCheckedAsOf"] is None


def _backlog_run(store, name: str, as_of_ms: int, scope: tuple[str, ...], *, applied: bool) -> None:
    run = RunDir(store.root / RUNS_DIR / "backlog" / name)
    run.run_info.parent.mkdir(parents=True)
    write_document(run.run_info, RunInfo(name, "backlog", as_of_ms, scope=scope))
    if applied:
        run.apply_result.parent.mkdir(parents=True, exist_ok=True)
        write_document(run.apply_result, AppliedRun(name, {"appliedTopics": []}))


def test_a_backlog_run_that_applied_is_the_check_of_the_namespaces_it_covered(store):
    # An evicting quota leaves no exceeded state: the run itself says the namespace was checked.
    _backlog_run(store, "whole", T0 + 10 * MINUTE, (), applied=True)
    _backlog_run(store, "scoped", T0 + 20 * MINUTE, (f"persistent://{CHECKED}/a",), applied=True)
    _backlog_run(store, "dry", T0 + 30 * MINUTE, (), applied=False)  # a dry run checked nothing
    rows = {row["namespace"]: row for row in namespaces(store, T0 + 60 * MINUTE, {})}
    assert rows[CHECKED]["quotasCheckedAsOf"] == "2026-01-01T00:20:00.000Z"
    assert rows[UNCHECKED]["quotasCheckedAsOf"] == "2026-01-01T00:10:00.000Z"


def test_a_scoped_backlog_run_covers_the_namespaces_its_globs_match(store):
    # The scope's own rule: a tenant covers its namespaces, a namespace glob the namespaces it matches.
    _backlog_run(store, "tenant", T0 + 10 * MINUTE, ("acme",), applied=True)
    _backlog_run(store, "glob", T0 + 20 * MINUTE, ("acme/ord*",), applied=True)
    rows = {row["namespace"]: row for row in namespaces(store, T0 + 60 * MINUTE, {})}
    assert rows[CHECKED]["quotasCheckedAsOf"] == "2026-01-01T00:20:00.000Z"
    assert rows[UNCHECKED]["quotasCheckedAsOf"] == "2026-01-01T00:10:00.000Z"
