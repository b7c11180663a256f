"""Approval thresholds (housekeeping.engine.approval): what a plan measures, when it needs a person, how a run's params may
only tighten the deployment's thresholds, and what a decision records."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from housekeeping.engine.approval import (
    ApprovalThresholds,
    measure_plan,
    over_thresholds,
    record_decision,
    request_approval,
    request_markdown,
)
from housekeeping.engine.contract import ACTIONS, LEDGERS, NAMESPACES
from housekeeping.engine.documents import document_json
from housekeeping.engine.parquet_rows import write_parquet
from housekeeping.engine.run_dir import RunDir, write_json
from housekeeping.mechanisms.gc.actions import DELETE_TOPIC
from housekeeping.mechanisms.registry import get_mechanism
from housekeeping.observe.journal_view import journal_entries
from housekeeping.store.journal import begin_run, finish_run, has_finished_apply
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import read_transaction
from tests.conftest import topic_body, write_manifest

pytestmark = pytest.mark.unit

AS_OF = 1_793_491_200_000


def _run(tmp_path, actions: list[dict], stored: dict[str, int]) -> RunDir:
    run = RunDir(tmp_path / "run")
    run.snapshot_dir.mkdir(parents=True)
    write_json(
        run.run_info,
        {
            "runId": "r-1",
            "mechanism": "trim",
            "asOfMs": AS_OF,
            "asOf": "2026-11-01T00:00:00.000Z",
            "scope": [],
        },
    )
    write_parquet(run.snapshot_table(LEDGERS), LEDGERS, [])
    write_parquet(
        run.snapshot_table(NAMESPACES),
        NAMESPACES,
        [{"namespace": ns, "storedBytes": b, "topicCount": 1} for ns, b in stored.items()],
    )
    table = run.plan_table(ACTIONS)
    table.mkdir(parents=True)
    if actions:  # an empty plan has no part
        (table / "part-00000.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return run


def _store(tmp_path):
    """A store of one topic, acme/orders/a: where decisions are journaled."""
    return load_manifest(
        tmp_path / "store",
        write_manifest(
            tmp_path,
            {
                "namespaces": {"acme/orders": {}},
                "topics": {"persistent://acme/orders/a": topic_body([(1, 1, 10, None)])},
            },
        ),
    )


ACTIONS_ = [
    {
        "topic": "persistent://acme/orders/a",
        "action": "delete_ledger",
        "ledgerId": 1,
        "bytes": 600,
        "reason": "r",
    },
    {
        "topic": "persistent://acme/orders/a",
        "action": "delete_ledger",
        "ledgerId": 2,
        "bytes": 200,
        "reason": "r",
    },
    {"topic": "persistent://acme/audit/b", "action": "delete_topic", "bytes": 100, "reason": "idle"},
    {
        "topic": "persistent://acme/orders/a",
        "action": "move_cursor",
        "subscription": "r",
        "from": "1:0",
        "to": "3:-1",
    },
]


# A plan with trim's and GC's kinds at once: every kind is measured by its own declaration.
MIXED = replace(get_mechanism("trim"), actions=(*get_mechanism("trim").actions, DELETE_TOPIC))


def test_a_plan_is_measured_per_namespace_and_over_a_threshold_means_strictly_greater(tmp_path):
    run = _run(tmp_path, ACTIONS_, {"acme/orders": 1000, "acme/audit": 1000})
    m = measure_plan(run, MIXED)
    assert (m.bytes, m.ledgers, m.topics, m.cursors) == (900, 2, 1, 1)
    assert m.namespace_bytes == {"acme/audit": 100, "acme/orders": 800}
    assert m.namespace_share == {"acme/audit": 0.1, "acme/orders": 0.8}
    assert over_thresholds(m, ApprovalThresholds()) == []
    assert over_thresholds(m, ApprovalThresholds(bytes=900, namespace_share=0.8, topics=1, cursors=1)) == []
    reasons = over_thresholds(m, ApprovalThresholds(bytes=899, namespace_share=0.5, topics=0, cursors=0))
    assert len(reasons) == 4
    assert "900 bytes" in reasons[0] and "80.0% of acme/orders" in reasons[1]
    assert "1 topics" in reasons[2] and "1 cursors" in reasons[3]


def test_params_only_tighten_the_settings():
    settings = SimpleNamespace(
        approval_bytes=1000, approval_namespace_share=None, approval_topics=5, approval_cursors=None
    )
    thresholds = ApprovalThresholds.of(
        settings, {"approval_bytes": 10**12, "approval_namespace_share": 0.3, "approval_topics": 2}
    )
    assert thresholds == ApprovalThresholds(bytes=1000, namespace_share=0.3, topics=2, cursors=None)
    assert ApprovalThresholds.of(settings, {}) == ApprovalThresholds(bytes=1000, topics=5)


def test_the_request_and_each_decision_are_recorded_in_the_run_and_the_journal(tmp_path):
    store = _store(tmp_path)
    run = _run(tmp_path, ACTIONS_, {"acme/orders": 1000, "acme/audit": 1000})
    request = request_approval(run, MIXED, ApprovalThresholds(namespace_share=0.5))
    assert request.required and request.reasons == (
        "deletes 80.0% of acme/orders's stored bytes, over the threshold of 50.0%",
    )
    page = run.approval_request_md.read_text()
    assert "| acme/orders | 800 B | 80.0% |" in page and "No answer in time counts as Reject" in page
    # In Airflow's Required Actions the request links to the console, not to paths on the server.
    linked = request_markdown(request, console="/airflow/housekeeping/")
    assert "[The run in the housekeeping console](/airflow/housekeeping/runs/trim/run)" in linked
    assert "(/airflow/housekeeping/runs/trim/run/files/gate/data_docs/index.html)" in linked
    assert str(tmp_path) not in linked and str(tmp_path) in page
    assert not request_approval(run, MIXED, ApprovalThresholds(namespace_share=0.9)).required

    record_decision(store, run, approved=True, decided_by="ops-alice", decided_at_ms=AS_OF + 1000)
    record_decision(store, run, approved=False, decided_by="ops-bob", decided_at_ms=AS_OF + 2000)
    timed_out = record_decision(store, run, approved=False, decided_by=None, decided_at_ms=AS_OF + 3000)
    assert timed_out.decision == "timed_out" and timed_out.decided_by == "nobody (timed out)"
    assert json.loads(run.approval_decision.read_text()) == document_json(timed_out)
    with read_transaction(store.engine) as conn:
        entries = [e for e in journal_entries(conn, run="r-1") if e["action"] == "approval"]
    assert [(e["status"], e["actor"]) for e in entries] == [
        ("approved", "ops-alice"),
        ("rejected", "ops-bob"),
        ("timed_out", "approval timeout"),
    ]
    assert entries[0]["detail"]["decidedAt"] == "2026-11-01T00:00:01.000Z"


def test_what_purge_will_remove_is_written_and_journaled_before_it_and_a_large_purge_needs_a_person(tmp_path):
    """The approval step lists what the run's purge is about to remove (due at its as-of, a hold keeps one back),
    journals it per topic before apply and purge run, and asks a person when it is over the bytes threshold."""
    from sqlalchemy import select

    from housekeeping.engine.approval import preview_purge
    from housekeeping.store import metadata_schema as t
    from housekeeping.store.holds import add_hold
    from housekeeping.store.store import record_pending_deletion, write_transaction

    a, b = "persistent://acme/orders/a", "persistent://acme/orders/b"
    store = load_manifest(
        tmp_path / "store",
        write_manifest(
            tmp_path,
            {
                "namespaces": {"acme/orders": {}},
                "topics": {
                    a: topic_body([(1, 1, 300, AS_OF - 10), (2, 1, 400, AS_OF - 5), (3, 0, 0, None)]),
                    b: topic_body([(7, 1, 50, AS_OF - 10), (8, 0, 0, None)]),
                },
            },
        ),
    )
    with write_transaction(store.engine) as conn:
        rows = {(r.topic, r.ledger_id): dict(r._mapping) for r in conn.execute(select(t.ledgers))}
        for key, due in (((a, 1), AS_OF), ((a, 2), AS_OF + 1), ((b, 7), AS_OF - 1)):
            record_pending_deletion(
                conn, rows[key], run_id="earlier", as_of_ms=AS_OF - 99, purge_after_ms=due
            )
    with write_transaction(store.engine) as conn:
        add_hold(conn, b, reason="audit", actor="ops")
    run = _run(tmp_path, ACTIONS_[:1], {"acme/orders": 1000})

    dry = preview_purge(store, run, dry_run=True)
    assert [(i["topic"], i["ledgerId"], i["bytes"]) for i in dry["due"]] == [
        (a, 1, 300)
    ]  # (a, 2) not yet due
    assert [(i["topic"], i["ledgerId"]) for i in dry["held"]] == [(b, 7)]
    assert json.loads(run.purge_due.read_text()) == dry
    with read_transaction(store.engine) as conn:
        assert [e for e in journal_entries(conn, run="r-1") if e["action"] == "purge_due"] == []  # a dry run

    due = preview_purge(store, run, dry_run=False)
    with read_transaction(store.engine) as conn:
        entries = [e for e in journal_entries(conn, topic=a) if e["action"] == "purge_due"]
    assert [(e["runId"], e["status"], e["detail"]["bytes"]) for e in entries] == [("r-1", "due", 300)]

    trim = get_mechanism("trim")
    assert not request_approval(run, trim, ApprovalThresholds(bytes=900), due).required  # plan 600 B
    request = request_approval(run, trim, ApprovalThresholds(bytes=599), due)
    assert request.reasons == ("deletes 600 B (600 bytes), over the threshold of 599 B",)
    request = request_approval(run, trim, ApprovalThresholds(bytes=299), due)
    assert "its purge removes 300 B (1 files of 1 topics past their grace period)" in request.reasons[-1]
    assert "Purge after apply: 1 files of 1 topics (300 B)" in run.approval_request_md.read_text()


def test_the_first_apply_of_a_mechanism_on_a_store_asks_a_person_once_it_has_something_to_do(tmp_path):
    """``HOUSEKEEPING_APPROVAL_FIRST_APPLY``: the mechanism never finished an apply on this store and the plan changes
    something: a person is asked, whatever the thresholds; after the mechanism's first finished apply, or for an
    empty plan, or with the setting off, nobody is."""
    store = _store(tmp_path)
    first = ApprovalThresholds(first_apply=True)
    run = _run(tmp_path, ACTIONS_, {"acme/orders": 1000, "acme/audit": 1000})
    assert not has_finished_apply(store, "trim")
    request = request_approval(run, MIXED, first, applied_before=has_finished_apply(store, "trim"))
    assert request.required and request.reasons[0].startswith("the first trim apply on this store")
    assert not request_approval(run, MIXED, ApprovalThresholds(), applied_before=False).required
    cursor_only = _run(tmp_path / "cursor-only", ACTIONS_[3:], {"acme/orders": 1000})
    assert request_approval(cursor_only, MIXED, first, applied_before=False).required, "a cursor move changes"
    empty = _run(tmp_path / "empty", [], {"acme/orders": 1000})
    assert not request_approval(empty, MIXED, first, applied_before=False).required

    begin_run(store, run_id="r-0", mechanism="trim", as_of_ms=AS_OF, actor="ops", detail={})
    assert not has_finished_apply(store, "trim"), "a run that started and never finished is not an apply"
    finish_run(store, run_id="r-0", mechanism="trim", as_of_ms=AS_OF, actor="ops", detail={})
    assert has_finished_apply(store, "trim") and not has_finished_apply(store, "gc")
    assert not request_approval(run, MIXED, first, applied_before=has_finished_apply(store, "trim")).required
    assert ApprovalThresholds.of(SimpleNamespace(
        approval_bytes=None, approval_namespace_share=None, approval_topics=None, approval_cursors=None,
        approval_first_apply=True,
    )).first_apply  # fmt: skip


def test_make_airflow_and_compose_ship_the_same_safe_defaults():
    """Out of the box, both deployments ask a person before a DAG's first apply and past conservative thresholds."""
    import re

    from tests.conftest import REPO

    script = (REPO / "scripts" / "airflow-standalone.sh").read_text()
    compose = (REPO / "docker-compose.yaml").read_text()
    shipped = dict(re.findall(r'export (HOUSEKEEPING_APPROVAL_[A-Z_]+)="\$\{\1:?-([^}]*)\}"', script))
    in_compose = dict(re.findall(r"(HOUSEKEEPING_APPROVAL_[A-Z_]+): \$\{\1:?-([^}]*)\}", compose))
    assert shipped["HOUSEKEEPING_APPROVAL_FIRST_APPLY"] == "true"
    assert {k: v for k, v in in_compose.items() if k != "HOUSEKEEPING_APPROVAL_TIMEOUT_SECONDS"} == shipped
    assert all(
        shipped[f"HOUSEKEEPING_APPROVAL_{name}"] for name in ("BYTES", "NAMESPACE_SHARE", "TOPICS", "CURSORS")
    )
