"""The journal's one filter (``housekeeping.observe.journal_view.JournalFilter``), shared by ``housekeeping journal`` and
the console: each field applied in SQL, the newest N read without reading the rest, an empty field no filter, a
namespace its own topics only, a bad topic or namespace refused by name."""

from __future__ import annotations

import pytest

from housekeeping.core.errors import InputError
from housekeeping.observe.journal_view import JournalFilter, journal_entries
from housekeeping.store.journal import journal_row, journal_rows
from housekeeping.store.manifest.load import load_manifest
from housekeeping.store.store import read_transaction, write_transaction
from tests.conftest import write_manifest

pytestmark = pytest.mark.unit

ROWS = [
    # (run, mechanism, topic, actor)
    ("scheduled__2026-11-01", "trim", "persistent://t/ns/a", "airflow"),
    ("scheduled__2026-11-01", "trim", "persistent://t/ns2/b", "airflow"),
    ("manual__2026-11-02", "expiry", "persistent://t/ns/a", "alice"),
    ("console-restore-1", "restore", "persistent://t/ns/c", "console:alice"),
    ("hold-1", "hold", None, "bob"),
    ("manual__2026-11-03", "gc", "persistent://t/ns/c", "airflow"),
]


@pytest.fixture
def store(tmp_path):
    opened = load_manifest(
        tmp_path / "store", write_manifest(tmp_path, {"namespaces": {"t/ns": {}, "t/ns2": {}}, "topics": {}})
    )
    with write_transaction(opened.engine) as conn:
        journal_rows(
            conn,
            [
                journal_row(
                    run_id=run,
                    mechanism=m,
                    topic=topic,
                    action="x",
                    status="ok",
                    detail={},
                    as_of_ms=1,
                    actor=actor,
                )
                for run, m, topic, actor in ROWS
            ],
        )
    return opened


def picked(store, where: JournalFilter | None = None, **options) -> list[tuple]:
    with read_transaction(store.engine) as conn:
        entries = journal_entries(conn, where, **options)
    return [(e["runId"], e["mechanism"], e["topic"]) for e in entries]


def test_each_field_filters_in_sql_and_empty_fields_do_not(store):
    everything = [(run, m, topic) for run, m, topic, _ in ROWS]
    assert picked(store) == everything
    assert picked(store, JournalFilter(topic="", namespace=" ", mechanism="", run="", actor="")) == everything
    assert picked(store, JournalFilter(mechanism="trim")) == everything[:2]
    assert picked(store, JournalFilter(run="2026-11-0")) == [everything[i] for i in (0, 1, 2, 5)]
    assert picked(store, JournalFilter(actor="alice")) == everything[2:4]
    assert picked(store, JournalFilter(topic="persistent://t/ns/a", mechanism="expiry")) == [everything[2]]
    # a run id's LIKE wildcards are literal
    assert (
        picked(store, JournalFilter(run="sch%led")) == []
        and picked(store, JournalFilter(run="schedule_")) == []
    )


def test_a_namespace_is_its_own_topics_only(store):
    assert [topic for _, _, topic in picked(store, JournalFilter(namespace="t/ns"))] == [
        "persistent://t/ns/a",
        "persistent://t/ns/a",
        "persistent://t/ns/c",
        "persistent://t/ns/c",
    ]
    assert [topic for _, _, topic in picked(store, JournalFilter(namespace="t/ns2"))] == [
        "persistent://t/ns2/b"
    ]


def test_the_newest_n_come_oldest_first_or_newest_first(store):
    assert [m for _, m, _ in picked(store, limit=2)] == ["hold", "gc"]
    assert [m for _, m, _ in picked(store, limit=2, newest_first=True)] == ["gc", "hold"]
    assert [m for _, m, _ in picked(store, JournalFilter(namespace="t/ns"), limit=1)] == ["gc"]


def test_the_old_keyword_form_still_filters(store):
    assert picked(store, topic="persistent://t/ns/c") == [
        ("console-restore-1", "restore", "persistent://t/ns/c"),
        ("manual__2026-11-03", "gc", "persistent://t/ns/c"),
    ]


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [("topic", "not a topic", "not a topic"), ("namespace", "a/b/c/d", "a/b/c/d")],
)
def test_a_bad_topic_or_namespace_is_refused_naming_it(field, value, named):
    with pytest.raises(InputError, match=named):
        JournalFilter(**{field: value})


def test_a_hold_and_a_restore_name_their_target_at_the_time_they_were_done(tmp_path, capsys):
    """A hold's entry names the held namespace, a restore's the ledgers it brought back; both carry the time the
    person acted as their as-of (the epoch before), in JSON and in the text journal."""
    from housekeeping.core.timeutil import parse_as_of, wall_clock_ms
    from housekeeping.engine.restore import restore
    from housekeeping.observe.journal_view import format_text
    from housekeeping.store import metadata_schema as t
    from housekeeping.store.holds import lift_hold, place_hold
    from housekeeping.store.store import Store, record_pending_deletion
    from tests.conftest import topic_body

    topic = "persistent://t/ns/a"
    opened = load_manifest(
        tmp_path / "store",
        write_manifest(
            tmp_path,
            {"namespaces": {"t/ns": {}}, "topics": {topic: topic_body([(1, 2, 20, 5), (2, 0, 0, None)])}},
        ),
    )
    before = wall_clock_ms()
    place_hold(opened, "t/ns", reason="incident 7", actor="bob")
    lift_hold(opened, "t/ns", actor="bob")
    with write_transaction(opened.engine) as conn:
        stored = conn.execute(t.ledgers.select().where(t.ledgers.c.ledger_id == 1)).one()
        conn.execute(t.ledgers.delete().where(t.ledgers.c.ledger_id == 1))
        record_pending_deletion(conn, dict(stored._mapping), run_id="r", as_of_ms=10, purge_after_ms=10**13)
    assert restore(
        Store.open(opened.root), topic, as_of_ms=wall_clock_ms(), run_id="restore-1", actor="alice"
    ) == [1]
    with read_transaction(opened.engine) as conn:
        entries = [e for e in journal_entries(conn) if e["mechanism"] in ("hold", "restore")]
    assert [(e["action"], e["status"], e["target"]) for e in entries] == [
        ("hold", "hold_added", "t/ns"),
        ("hold", "hold_removed", "t/ns"),
        ("restore_ledgers", "restored", f"{topic}:1"),
    ]
    assert all(parse_as_of(e["asOf"]) >= before - 1000 for e in entries), entries
    text = format_text(entries)
    assert "1970" not in text and f"{topic}:1  run restore-1" in text and "t/ns  run hold-" in text
