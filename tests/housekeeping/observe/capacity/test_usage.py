"""Chargeback and the forecast on stores whose history the real mechanisms wrote (trim deletes, purge removes),
integrated by hand; once on SQLite and once on PostgreSQL."""

from __future__ import annotations

import pytest

from housekeeping.observe.capacity.curves import MS_PER_HOUR
from housekeeping.observe.capacity.forecast import forecast
from housekeeping.observe.capacity.record import read_record
from housekeeping.store.store import Store
from tests.conftest import cli_json, iso, load_store, topic_body

pytestmark = [pytest.mark.spark, pytest.mark.runs]

HOUR = MS_PER_HOUR
DAY = 24 * HOUR
T0 = 1_790_000_000_000 - 1_790_000_000_000 % DAY  # 2026-09-21T00:00:00Z


def by_key(document: dict, *names: str) -> dict[tuple, dict]:
    return {(*(row.get(n) for n in names), row["tier"]): row for row in document["rows"]}


def test_byte_hours_of_a_trimmed_and_purged_history_equal_the_hand_integral(
    capsys, tmp_path, monkeypatch, metadata_backend
):
    monkeypatch.setenv("HOUSEKEEPING_PURGE_GRACE_SECONDS", "3600")
    monkeypatch.setenv("HOUSEKEEPING_MAX_DELETED_SHARE", "1.0")  # the topic's every byte is consumed
    document = {
        "namespaces": {
            "t/ns": {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}},
            "t/other": {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}},
        },
        "topics": {
            # 1000 bytes at 1h and 3000 at 2h, both consumed: trim at 3h deletes them, purge at 5h removes them.
            "persistent://t/ns/a": topic_body(
                [(1, 100, 1000, T0 + HOUR), (2, 100, 3000, T0 + 2 * HOUR), (3, 0, 0, None)], {"sub": "2:99"}
            ),
            # 5000 bytes at 30 min, kept.
            "persistent://t/other/b": topic_body(
                [(1, 100, 5000, T0 + HOUR // 2), (2, 0, 0, None)], {"sub": "1:-1"}
            ),
        },
    }
    store = load_store(capsys, tmp_path, document)
    applied = cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(T0 + 3 * HOUR))
    assert applied["ledgersDeleted"] == 2, applied
    cli_json(capsys, "purge", "--store", store, "--as-of", iso(T0 + 5 * HOUR))

    window = ("--from", iso(T0), "--to", iso(T0 + 6 * HOUR))
    topics = by_key(cli_json(capsys, "usage", "--store", store, *window, "--by", "topic"), "topic")
    a, b = "persistent://t/ns/a", "persistent://t/other/b"
    # Listed: 1000 B for 2 h + 3000 B for 1 h; on the disks until the purge, two copies (the write quorum).
    assert topics[(a, "listed")]["byteHours"] == pytest.approx(1000 * 2 + 3000 * 1)
    assert topics[(a, "local")]["byteHours"] == pytest.approx(2 * (1000 * 4 + 3000 * 3))
    assert topics[(a, "listed")]["peakBytes"] == pytest.approx(4000)
    assert topics[(a, "local")]["peakBytes"] == pytest.approx(8000)
    assert topics[(b, "listed")]["byteHours"] == pytest.approx(5000 * 5.5)
    assert topics[(b, "local")]["avgBytes"] == pytest.approx(2 * 5000 * 5.5 / 6)
    tenants = by_key(cli_json(capsys, "usage", "--store", store, *window, "--by", "tenant"), "tenant")
    namespaces = by_key(
        cli_json(capsys, "usage", "--store", store, *window, "--by", "namespace"), "namespace"
    )
    for tier in ("listed", "local"):
        assert tenants[("t", tier)]["byteHours"] == pytest.approx(
            namespaces[("t/ns", tier)]["byteHours"] + namespaces[("t/other", tier)]["byteHours"]
        )

    # As of 4 h the purge had not happened: the record as it stood then.
    def topics_until(to_ms: int) -> dict[tuple, dict]:
        argv = ("usage", "--store", store, "--from", iso(T0), "--to", iso(to_ms), "--by", "topic")
        return by_key(cli_json(capsys, *argv), "topic")

    early = topics_until(T0 + 4 * HOUR)
    assert early[(a, "local")]["byteHours"] == pytest.approx(2 * (1000 * 3 + 3000 * 2))
    # As of 2:30 the trim had not happened: both ledgers were listed (a backfill of that day answers so).
    before_trim = topics_until(T0 + 5 * HOUR // 2)
    assert before_trim[(a, "listed")]["byteHours"] == pytest.approx(1000 * 1.5 + 3000 * 0.5)


def test_a_restored_ledger_is_listed_again_from_its_restore(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOUSEKEEPING_PURGE_GRACE_SECONDS", "86400")
    monkeypatch.setenv("HOUSEKEEPING_MAX_DELETED_SHARE", "1.0")
    document = {
        "namespaces": {"t/ns": {"retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}}},
        "topics": {
            "persistent://t/ns/a": topic_body(
                [(1, 100, 1000, T0 + HOUR), (2, 100, 3000, T0 + 2 * HOUR), (3, 0, 0, None)], {"sub": "2:99"}
            )
        },
    }
    store = load_store(capsys, tmp_path, document)
    applied = cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(T0 + 3 * HOUR))
    assert applied["ledgersDeleted"] == 2, applied
    topic = "persistent://t/ns/a"
    cli_json(capsys, "restore", topic, "--store", store, "--ledger", "1", "--as-of", iso(T0 + 4 * HOUR))
    window = ("--from", iso(T0), "--to", iso(T0 + 6 * HOUR))
    rows = by_key(cli_json(capsys, "usage", "--store", store, *window, "--by", "topic"), "topic")
    # Ledger 1 listed 1 h to 3 h and again from its restore at 4 h; ledger 2 from 2 h to its deletion at 3 h. Neither
    # was purged: both on the disks (two copies) from their arrival on.
    assert rows[(topic, "listed")]["byteHours"] == pytest.approx(1000 * (2 + 2) + 3000 * 1)
    assert rows[(topic, "local")]["byteHours"] == pytest.approx(2 * (1000 * 5 + 3000 * 4))
    # As of 3:30 the restore had not happened: ledger 1 was off the list since 3 h.
    early = ("--from", iso(T0), "--to", iso(T0 + 7 * HOUR // 2))
    rows = by_key(cli_json(capsys, "usage", "--store", store, *early, "--by", "topic"), "topic")
    assert rows[(topic, "listed")]["byteHours"] == pytest.approx(1000 * 2 + 3000 * 1)


def test_under_trim_the_forecast_follows_the_ingest_not_the_sawtooth(capsys, tmp_path):
    # A 1 MiB ledger every hour for 10 days, all consumed; a retention of 12 h trims the stored bytes daily.
    mib, count = 1024 * 1024, 10 * 24
    ledgers = [(i, 100, mib, T0 + i * HOUR) for i in range(1, count + 1)] + [(count + 1, 0, 0, None)]
    document = {
        "namespaces": {
            "t/ns": {"retention_policies": {"retentionTimeInMinutes": 12 * 60, "retentionSizeInMB": -1}}
        },
        "topics": {"persistent://t/ns/a": topic_body(ledgers, {"sub": f"{count}:99"})},
    }
    store = load_store(capsys, tmp_path, document)
    for day in range(2, 11, 2):
        cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(T0 + day * DAY))
    record = read_record(Store.open(store), T0 + 10 * DAY)
    (growth,) = forecast(record, horizon_s=30 * 86_400, window_days=8)["growth"]
    assert growth["bytesPerDay"] == pytest.approx(24 * mib, rel=0.10)
    # The stored series the trims sawed down grew far less over the same days.
    listed = by_key(
        cli_json(
            capsys,
            "usage",
            "--store",
            store,
            "--from",
            iso(T0 + 2 * DAY),
            "--to",
            iso(T0 + 10 * DAY),
            "--tier",
            "listed",
        ),
        "namespace",
    )[("t/ns", "listed")]
    assert listed["peakBytes"] < 3 * 24 * mib, "the trims kept the stored bytes under three days of ingest"


@pytest.mark.usefixtures("directory_tier")
def test_an_offloaded_ledger_counts_in_the_tier_and_locally_until_its_local_copy_is_purged(
    capsys, tmp_path, monkeypatch
):
    """Five ledgers of 100 bytes (the current one 50), all arrived before the window; offload at 0 h takes the
    first three to the tier, trim's offload-deletion lag (1 h) deletes their local copies at 2 h, purge removes
    those files at 4 h. Over [0 h, 6 h): tier 3 x 100 B x 6 h; local (x 2 copies) the three until 4 h and the
    other two throughout; listed every ledger once throughout."""
    from tests.conftest import ledger_topic

    monkeypatch.setenv("HOUSEKEEPING_PURGE_GRACE_SECONDS", "3600")
    zero = T0 + DAY
    stamps = [T0 + i for i in range(10)]
    spec = [(i, stamps, T0 + i * 60_000) for i in range(1, 5)] + [(5, stamps[:5], None)]
    offload = {"managedLedgerOffloadThresholdInBytes": 100, "managedLedgerOffloadDeletionLagInMillis": HOUR}
    document = {
        "namespaces": {
            "t/ns": {
                "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
                "offload_policies": offload,
            }
        },
        "topics": {"persistent://t/ns/a": ledger_topic(spec, {"sub": {"markDeletePosition": "1:0"}})},
    }
    store = load_store(capsys, tmp_path, document)
    offloaded = cli_json(capsys, "apply", "offload", "--store", store, "--as-of", iso(zero))
    assert offloaded["ledgersOffloaded"] == 3, offloaded
    trimmed = cli_json(capsys, "apply", "trim", "--store", store, "--as-of", iso(zero + 2 * HOUR))
    assert trimmed["localCopiesDeleted"] == 3, trimmed
    cli_json(capsys, "purge", "--store", store, "--as-of", iso(zero + 4 * HOUR))
    rows = by_key(
        cli_json(capsys, "usage", "--store", store, "--from", iso(zero), "--to", iso(zero + 6 * HOUR)),
        "namespace",
    )
    assert rows[("t/ns", "tier")]["byteHours"] == pytest.approx(3 * 100 * 6)
    assert rows[("t/ns", "local")]["byteHours"] == pytest.approx(2 * (3 * 100 * 4 + (100 + 50) * 6))
    assert rows[("t/ns", "listed")]["byteHours"] == pytest.approx((4 * 100 + 50) * 6)
    assert rows[("t/ns", "local")]["peakBytes"] == pytest.approx(2 * 450)
