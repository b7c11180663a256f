"""``housekeeping backtest`` (docs/semantics.md §12.5) on stores whose history the real mechanisms wrote: a retention
change computed by hand (byte-hours exact, on SQLite and PostgreSQL), the policies that were in force answering the
actual figures, a TTL change's skipped entries within their bounds, a backfilled date answering as it did on the
day, and bad input refused naming it with nothing changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from housekeeping.engine.run_dir import RunDir
from housekeeping.mechanisms.steps import snapshot_step
from housekeeping.observe.capacity.curves import MS_PER_HOUR
from housekeeping.observe.storage_report import write_storage_report
from housekeeping.store import clients
from housekeeping.store import metadata_schema as t
from housekeeping.store.cursor_history import record_cursors, recorded
from housekeeping.store.store import Store, read_transaction
from tests.conftest import cli_json, iso, ledger_topic, load_store, run_cli, topic_body

HOUR = MS_PER_HOUR
DAY = 24 * HOUR
T0 = 1_790_000_000_000 - 1_790_000_000_000 % DAY  # 2026-09-21T00:00:00Z
A, B = "persistent://t/ns/a", "persistent://t/other/b"


def rows_of(document: dict) -> dict[tuple[str, str], dict]:
    return {(row["namespace"], row["tier"]): row for row in document["rows"]}


def overlay(tmp_path, document: dict, name: str = "change.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def argv(store: str, policies: str, from_ms: int, to_ms: int, *more: str) -> list[str]:
    return [
        "backtest",
        "--store",
        store,
        "--policies",
        policies,
        "--from",
        iso(from_ms),
        "--to",
        iso(to_ms),
        *more,
    ]


def backtest(capsys, store: str, policies: str, from_ms: int, to_ms: int, *more: str) -> dict:
    return cli_json(capsys, *argv(store, policies, from_ms, to_ms, *more))


@pytest.fixture
def trimmed(capsys, tmp_path, monkeypatch, metadata_backend):
    """1000 B closed at 1 h and 3000 B at 2 h in t/ns (retention 4 h), both consumed; 5000 B at 30 min in t/other
    (kept forever). Trim runs at 2:30 (deletes nothing, keeps the cursors), 6 h (ledger 1: closed 5 h before) and
    7 h (ledger 2); purge (grace 1 h) at 7 h and 8 h. On SQLite, then on PostgreSQL."""
    monkeypatch.setenv("HOUSEKEEPING_PURGE_GRACE_SECONDS", "3600")
    monkeypatch.setenv("HOUSEKEEPING_MAX_DELETED_SHARE", "1.0")
    monkeypatch.setenv("HOUSEKEEPING_CURSOR_HISTORY_INTERVAL_SECONDS", "0")
    document = {
        "namespaces": {
            "t/ns": {"retention_policies": {"retentionTimeInMinutes": 240, "retentionSizeInMB": -1}},
            "t/other": {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}},
        },
        "topics": {
            A: topic_body(
                [(1, 100, 1000, T0 + HOUR), (2, 100, 3000, T0 + 2 * HOUR), (3, 0, 0, None)], {"sub": "2:99"}
            ),
            B: topic_body([(1, 100, 5000, T0 + HOUR // 2), (2, 0, 0, None)], {"sub": "1:-1"}),
        },
    }
    store = load_store(capsys, tmp_path, document)
    deleted = [
        cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(T0 + at))["ledgersDeleted"]
        for at in (2 * HOUR + HOUR // 2, 6 * HOUR)
    ]
    assert deleted == [0, 1]
    return store


def later_history(capsys, store: str) -> None:
    assert (
        cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(T0 + 7 * HOUR))["ledgersDeleted"]
        == 1
    )
    for at in (7, 8):
        cli_json(capsys, "purge", "--store", store, "--as-of", iso(T0 + at * HOUR))


def retention(minutes: int) -> dict:
    return {
        "namespaces": {
            "t/ns": {"retention_policies": {"retentionTimeInMinutes": minutes, "retentionSizeInMB": -1}}
        }
    }


@pytest.mark.spark
@pytest.mark.runs
def test_a_retention_change_backtested_by_hand(capsys, tmp_path, trimmed):
    """Shorter and longer retentions by hand; the retention in force answering usage's figures; a backfilled date
    answering as it did on the day (one history per database: it takes three trim runs)."""
    change = overlay(tmp_path, retention(60))
    on_the_day = backtest(capsys, trimmed, change, T0, T0 + 6 * HOUR + HOUR // 2)
    later_history(capsys, trimmed)  # a trim, purges and a kept run after that period's end
    assert backtest(capsys, trimmed, change, T0, T0 + 6 * HOUR + HOUR // 2) == on_the_day
    # The runs that applied kept their cursors (the one at 2:30 too, which deleted nothing).
    kept = [item.as_of_ms - T0 for item in recorded(Store.open(trimmed))]
    assert kept == [2 * HOUR + HOUR // 2, 6 * HOUR, 7 * HOUR]

    document = backtest(capsys, trimmed, change, T0, T0 + 10 * HOUR)
    rows = rows_of(document)
    # In fact: ledger 1 (1000 B from 1 h) listed until 6 h, ledger 2 (3000 B from 2 h) until 7 h; purged an hour
    # after each; two copies on the disks. Both were consumed by 2:30 (the kept run). Under 1 h: ledger 1 allowed
    # at 2:30 (consumed; closed 1 h before 2 h), ledger 2 at 3 h; each leaves the list an hour after, as in fact:
    # 3:30 and 4 h, purged at 4:30 and 5 h.
    listed, local = rows[("t/ns", "listed")], rows[("t/ns", "local")]
    assert listed["actualByteHours"] == pytest.approx(1000 * 5 + 3000 * 5)
    assert listed["alternativeByteHours"] == pytest.approx(1000 * 2.5 + 3000 * 2)
    assert local["actualByteHours"] == pytest.approx(2 * (1000 * 6 + 3000 * 6))
    assert local["alternativeByteHours"] == pytest.approx(2 * (1000 * 3.5 + 3000 * 3))
    assert listed["actualPeakBytes"] == listed["alternativePeakBytes"] == pytest.approx(4000)
    assert (listed["deletedEarlierBytes"], local["deletedEarlierBytes"]) == (4000, 8000)
    assert listed["keptLongerBytes"] == 0
    assert listed["skippedUnacknowledgedEntries"] == {"low": 0, "high": 0}
    # The namespace the change does not name answers its actual figures.
    other = rows[("t/other", "listed")]
    assert other["actualByteHours"] == other["alternativeByteHours"] == pytest.approx(5000 * 9.5)
    assert other["deletedEarlierBytes"] == other["keptLongerBytes"] == 0
    # The deletions that moved, and when.
    assert [(d["ledger"], d["actual"], d["alternative"]) for d in document["deletions"]] == [
        (1, iso(T0 + 6 * HOUR), iso(T0 + 3 * HOUR + HOUR // 2)),
        (2, iso(T0 + 7 * HOUR), iso(T0 + 4 * HOUR)),
    ]

    # A longer retention keeps them longer: 6 h -> ledger 1 allowed at 7 h (+1 h: 8 h), ledger 2 at 8 h (9 h).
    longer = overlay(tmp_path, retention(360), "longer.json")
    kept_longer = rows_of(backtest(capsys, trimmed, longer, T0, T0 + 10 * HOUR))[("t/ns", "listed")]
    assert kept_longer["alternativeByteHours"] == pytest.approx(1000 * 7 + 3000 * 7)
    assert kept_longer["keptLongerBytes"] == 4000 and kept_longer["deletedEarlierBytes"] == 0

    # The retention that was in force answers the actual figures, which are usage's.
    same = overlay(tmp_path, retention(240), "same.json")
    in_force = backtest(capsys, trimmed, same, T0, T0 + 10 * HOUR)
    for row in in_force["rows"]:
        assert row["alternativeByteHours"] == row["actualByteHours"], row
        assert row["alternativePeakBytes"] == row["actualPeakBytes"], row
        assert row["deletedEarlierBytes"] == row["keptLongerBytes"] == 0, row
    assert in_force["deletions"] == [] and in_force["expiries"] == []
    usage = cli_json(capsys, "usage", "--store", trimmed, "--from", iso(T0), "--to", iso(T0 + 10 * HOUR))
    assert {(r["namespace"], r["tier"]): r["byteHours"] for r in usage["rows"]} == {
        key: row["actualByteHours"] for key, row in rows_of(in_force).items()
    }
    # CSV: the same rows, the bounds in two columns.
    code, out, err = run_cli(capsys, *argv(trimmed, same, T0, T0 + 10 * HOUR, "--format", "csv"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split(",")[-2:] == ["skippedUnacknowledgedEntriesLow", "skippedUnacknowledgedEntriesHigh"]
    assert len(lines) == 1 + len(in_force["rows"])


def _keep_run(store: Store, at_ms: int, run: str) -> None:
    """A run that applied at ``at_ms``: its snapshot's durable cursors kept as the runs keep them."""
    info = snapshot_step(store, "expiry", run_id=run, as_of_ms=at_ms, actor="test")
    record_cursors(
        store, RunDir(info.run_dir).snapshot_table("cursors"), as_of_ms=at_ms, mechanism="expiry", run_id=run
    )


@pytest.mark.unit
def test_a_stricter_ttl_counts_the_entries_it_would_have_skipped_within_bounds(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOUSEKEEPING_CURSOR_HISTORY_INTERVAL_SECONDS", "0")
    minute = 60_000
    document = {
        "namespaces": {
            "t/q": {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}
        },
        "topics": {
            "persistent://t/q/c": ledger_topic(
                [
                    (1, [T0 + k * 10 * minute for k in range(6)], T0 + HOUR),
                    (2, [T0 + HOUR + k * 10 * minute for k in range(6)], T0 + 2 * HOUR),
                    (3, [], None),
                ],
                {"sub": {"markDeletePosition": "1:-1"}},
            )
        },
    }
    path = load_store(capsys, tmp_path, document)
    store = Store.open(path)
    topic = "persistent://t/q/c"
    # Kept runs: at 2:15 ledger 1 acknowledged whole, at 3 h still, at 5 h everything.
    clients.acknowledge(store, topic, "sub", "1:5", now_ms=T0 + 2 * HOUR)
    _keep_run(store, T0 + 2 * HOUR + HOUR // 4, "r1")
    _keep_run(store, T0 + 3 * HOUR, "r2")
    clients.acknowledge(store, topic, "sub", "2:5", now_ms=T0 + 4 * HOUR)
    _keep_run(store, T0 + 5 * HOUR, "r3")
    change = overlay(tmp_path, {"namespaces": {"t/q": {"message_ttl_in_seconds": 3600}}})
    result = backtest(capsys, path, change, T0, T0 + 10 * HOUR)
    # A TTL of 1 h: ledger 1's entries due 1:00-1:50, before any kept run, acknowledged by 2:15: possibly skipped
    # (high only); ledger 2's due 2:00-2:50, still unacknowledged at the kept runs after: skipped (low and high).
    (row,) = [r for r in result["rows"] if r["tier"] == "listed"]
    assert row["skippedUnacknowledgedEntries"] == {"low": 6, "high": 12}
    # Each subscription's skips, and when: the first due at 1:00, the last at 2:50.
    assert result["expiries"] == [
        {
            "topic": topic,
            "subscription": "sub",
            "entries": {"low": 6, "high": 12},
            "from": iso(T0 + HOUR),
            "to": iso(T0 + 2 * HOUR + 50 * 60_000),
        }
    ]
    # The retention is infinite: nothing is deleted either way.
    assert row["alternativeByteHours"] == row["actualByteHours"] and result["deletions"] == []
    # Saved, the storage report shows it with its plot.
    code, out, err = run_cli(capsys, *argv(path, change, T0, T0 + 10 * HOUR, "--save"))
    assert code == 0 and json.loads(out) == result and "saved: " in err, err
    saved = Path(err.split("saved: ", 1)[1].strip())
    assert saved.is_file() and "<svg" in saved.read_text() and (saved.parent / "report.json").is_file()
    report = write_storage_report(store, T0 + 10 * HOUR).read_text()
    assert 'id="latest-backtest"' in report and "message_ttl_in_seconds" in report
    # The TTL that was in force (off) skips nothing.
    off = overlay(tmp_path, {"namespaces": {"t/q": {"message_ttl_in_seconds": 0}}}, "off.json")
    (same,) = [r for r in backtest(capsys, path, off, T0, T0 + 10 * HOUR)["rows"] if r["tier"] == "listed"]
    assert same["skippedUnacknowledgedEntries"] == {"low": 0, "high": 0}


@pytest.mark.unit
def test_bad_input_is_named_and_changes_nothing(capsys, tmp_path):
    document = {
        "namespaces": {
            "t/ns": {"retention_policies": {"retentionTimeInMinutes": 240, "retentionSizeInMB": -1}}
        },
        "topics": {A: topic_body([(1, 100, 1000, T0 + HOUR), (2, 0, 0, None)], {"sub": "1:-1"})},
    }
    store = load_store(capsys, tmp_path, document)

    def journal_rows() -> int:
        with read_transaction(Store.open(store).engine) as conn:
            return conn.execute(select(func.count()).select_from(t.journal)).scalar_one()

    before = journal_rows()
    good = overlay(tmp_path, {"namespaces": {"t/ns": {"message_ttl_in_seconds": 60}}}, "good.json")
    cases = [
        (overlay(tmp_path, {"namespaces": {"t/nope": {"message_ttl_in_seconds": 60}}}, "a.json"), T0, T0 + DAY, "t/nope"),
        (overlay(tmp_path, {"topics": {"persistent://t/ns/zz": {"policies": {}}}}, "b.json"), T0, T0 + DAY, "t/ns/zz"),
        (
            overlay(tmp_path, {"namespaces": {"t/ns": {"retention_policies": {"retentionTimeInMinutes": -5, "retentionSizeInMB": -1}}}}, "c.json"),
            T0, T0 + DAY, "retentionTimeInMinutes",
        ),
        (good, T0 + DAY, T0, "is not before --to"),
        (good, T0 - 2 * DAY, T0 - DAY, "before the record's first entry"),
        (str(tmp_path / "missing.json"), T0, T0 + DAY, "missing.json"),
    ]  # fmt: skip
    for policies, from_ms, to_ms, named in cases:
        code, out, err = run_cli(capsys, *argv(store, policies, from_ms, to_ms))
        assert code == 2 and named in err and not out, (named, code, err)
    assert journal_rows() == before
    assert recorded(Store.open(store)) == []
