"""The capacity forecast on stores with known histories (metadata-only manifests: each ledger's bytes arrive at
its close time): the growth found within 10 % of the ingest, a quota already over (0), no growth (null), the
retention capping growth, an offload threshold moving growth from the local disks to the tier, bad options."""

from __future__ import annotations

import pytest

from housekeeping.core.errors import InputError
from housekeeping.observe.capacity.forecast import forecast
from housekeeping.observe.capacity.record import read_record
from housekeeping.store.store import Store
from tests.conftest import cli_json, load_store, run_cli, topic_body

pytestmark = pytest.mark.unit

HOUR = 3_600_000
DAY = 24 * HOUR
T0 = 1_790_000_000_000 - 1_790_000_000_000 % DAY  # 2026-09-21T00:00:00Z
MIB = 1024 * 1024
LEDGER = MIB  # one ledger an hour: 24 MiB a day
DAYS = 20
AS_OF = T0 + DAYS * DAY


def hourly_topic(days: int = DAYS, cursor: str | None = None, size: int = LEDGER, **extra) -> dict:
    """A ledger closed every hour for ``days`` days, then the current one; the cursor at ``cursor`` (default:
    nothing consumed)."""
    count = days * 24
    ledgers = [(i, 100, size, T0 + i * HOUR) for i in range(1, count + 1)] + [(count + 1, 0, 0, None)]
    return topic_body(ledgers, {"sub": cursor or "1:-1"}, **extra)


def manifest(namespace_policies: dict, topics: dict[str, dict]) -> dict:
    return {"namespaces": {"t/ns": namespace_policies}, "topics": topics}


def limits_of(document: dict) -> dict[str, dict]:
    return {row["limit"]: row for row in document["limits"]}


def test_steady_growth_is_found_within_ten_percent_and_dates_the_backlog_quota(capsys, tmp_path):
    # Five days of ingest left below the quota when nothing is consumed.
    quota = (DAYS + 5) * 24 * LEDGER
    policies = {
        "backlog_quota_map": {"destination_storage": {"limitSize": quota, "policy": "producer_request_hold"}}
    }
    store = load_store(capsys, tmp_path, manifest(policies, {"persistent://t/ns/a": hourly_topic()}))
    document = forecast(read_record(Store.open(store), AS_OF), horizon_s=30 * 86_400)
    (growth,) = document["growth"]
    assert growth["bytesPerDay"] == pytest.approx(24 * LEDGER, rel=0.10)
    assert growth["low"] <= growth["bytesPerDay"] <= growth["high"]
    row = limits_of(document)["backlog_quota_size"]
    assert row["currentBytes"] == DAYS * 24 * LEDGER and row["limitBytes"] == quota
    assert row["secondsUntil"] == pytest.approx(5 * 86_400, rel=0.10)
    assert row["low"] <= row["secondsUntil"] <= row["high"]
    assert row["topic"] == "persistent://t/ns/a" and row["tenant"] == "t" and row["namespace"] == "t/ns"


def test_a_quota_already_exceeded_is_zero_and_a_namespace_without_growth_is_null(capsys, tmp_path):
    quota = 10 * LEDGER
    policies = {
        "backlog_quota_map": {"destination_storage": {"limitSize": quota, "policy": "producer_request_hold"}}
    }
    store = load_store(capsys, tmp_path, manifest(policies, {"persistent://t/ns/a": hourly_topic()}))
    over = limits_of(forecast(read_record(Store.open(store), AS_OF), horizon_s=30 * 86_400))
    assert over["backlog_quota_size"]["secondsUntil"] == 0
    # Forty days on, nothing has been produced for forty days: no growth, the backlog stays... over its quota.
    later = forecast(read_record(Store.open(store), AS_OF + 40 * DAY), horizon_s=30 * 86_400)
    assert later["growth"][0]["bytesPerDay"] == 0
    assert limits_of(later)["backlog_quota_size"]["secondsUntil"] == 0


def test_no_growth_never_meets_a_quota_it_is_under(capsys, tmp_path):
    quota = (DAYS * 24 + 1) * LEDGER
    policies = {
        "backlog_quota_map": {"destination_storage": {"limitSize": quota, "policy": "producer_request_hold"}}
    }
    store = load_store(capsys, tmp_path, manifest(policies, {"persistent://t/ns/a": hourly_topic()}))
    row = limits_of(forecast(read_record(Store.open(store), AS_OF + 40 * DAY), horizon_s=30 * 86_400))
    assert row["backlog_quota_size"]["secondsUntil"] is None and row["backlog_quota_size"]["bytesPerDay"] == 0


def test_a_topics_own_quota_is_its_own_and_its_neighbours_keep_the_namespaces(capsys, tmp_path):
    # The namespace's quota is 30 days away for every topic; b's own quota is 5 days away (the topic level wins).
    def quota(days: int) -> dict:
        limit = (DAYS + days) * 24 * LEDGER
        return {"destination_storage": {"limitSize": limit, "policy": "producer_request_hold"}}

    topics = {
        "persistent://t/ns/a": hourly_topic(),
        "persistent://t/ns/b": hourly_topic(policies={"backlog_quota_map": quota(5)}),
        "persistent://t/ns/c": hourly_topic(),
    }
    store = load_store(capsys, tmp_path, manifest({"backlog_quota_map": quota(30)}, topics))
    row = limits_of(forecast(read_record(Store.open(store), AS_OF), horizon_s=60 * 86_400))[
        "backlog_quota_size"
    ]
    assert row["topic"] == "persistent://t/ns/b" and row["limitBytes"] == (DAYS + 5) * 24 * LEDGER
    assert row["secondsUntil"] == pytest.approx(5 * 86_400, rel=0.10)
    # Without b's own quota the namespace's applies to all three: met by the first of them, 30 days away.
    topics["persistent://t/ns/b"] = hourly_topic()
    (tmp_path / "same").mkdir()
    store = load_store(capsys, tmp_path / "same", manifest({"backlog_quota_map": quota(30)}, topics))
    row = limits_of(forecast(read_record(Store.open(store), AS_OF), horizon_s=60 * 86_400))[
        "backlog_quota_size"
    ]
    assert row["limitBytes"] == (DAYS + 30) * 24 * LEDGER
    assert row["secondsUntil"] == pytest.approx(30 * 86_400, rel=0.10)


def test_retention_caps_growth_before_the_size_limit_or_the_budget(capsys, tmp_path):
    consumed = f"{DAYS * 24}:99"
    budget = {"t": {"local": 2 * (DAYS * 24 + 24 * 30) * LEDGER}}
    capped = {"retention_policies": {"retentionTimeInMinutes": 24 * 60, "retentionSizeInMB": 1024}}
    unlimited = {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": 1024}}
    found = {}
    for name, policies in (("capped", capped), ("unlimited", unlimited)):
        (tmp_path / name).mkdir()
        store = load_store(
            capsys,
            tmp_path / name,
            manifest(policies, {"persistent://t/ns/a": hourly_topic(cursor=consumed)}),
        )
        found[name] = limits_of(
            forecast(read_record(Store.open(store), AS_OF), horizon_s=365 * 86_400, budgets=budget)
        )
    # A day of retention keeps about 24 MiB of consumed data: the 1 GiB size limit is never met, the budget
    # neither (the listed 480 MiB are already more than a day's; trim brings them down, never up).
    assert found["capped"]["retention_size"]["secondsUntil"] is None
    assert found["capped"]["local_budget"]["secondsUntil"] is None
    # Without a time limit the bytes kept grow at the ingest until the size limit: (1024 - 480) MiB / 24 MiB a day.
    assert found["unlimited"]["retention_size"]["secondsUntil"] == pytest.approx(
        (1024 - 480) / 24 * 86_400, rel=0.10
    )
    # The write quorum (2) counts on the local disks: 960 MiB now, and the budget's room is 30 days of 48 MiB,
    # but the retention caps the growth at 1 GiB listed (2 GiB on disk): under the budget, never met.
    local = found["unlimited"]["local_budget"]
    assert local["currentBytes"] == 2 * DAYS * 24 * LEDGER and local["secondsUntil"] is None


def test_an_offload_threshold_moves_growth_from_the_local_disks_to_the_tier(capsys, tmp_path):
    offload = {
        "managedLedgerOffloadThresholdInBytes": 500 * MIB,
        "managedLedgerOffloadDeletionLagInMillis": 0,
    }
    policies = {
        "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
        "offload_policies": offload,
    }
    store = load_store(
        capsys, tmp_path, manifest(policies, {"persistent://t/ns/a": hourly_topic(cursor=f"{DAYS * 24}:99")})
    )
    budgets = {"t": {"local": 2 * 600 * MIB, "tier": 100 * MIB}}
    rows = limits_of(forecast(read_record(Store.open(store), AS_OF), horizon_s=365 * 86_400, budgets=budgets))
    # Local: 480 MiB listed grows to the 500 MiB threshold and stays there (x2 copies): the 1200 MiB budget holds.
    assert rows["local_budget"]["secondsUntil"] is None
    # Tier: from the threshold on (20 MiB away) the growth is offloaded: 100 MiB more after (20 + 100) / 24 days.
    assert rows["tier_budget"]["secondsUntil"] == pytest.approx(120 / 24 * 86_400, rel=0.10)


def test_bad_options_are_named_and_change_nothing(capsys, tmp_path):
    store = load_store(capsys, tmp_path, manifest({}, {"persistent://t/ns/a": hourly_topic(days=2)}))
    before = cli_json(capsys, "inspect", "--store", store)
    for argv, named in (
        (("forecast", "--as-of", "2026-10-11T00:00:00Z", "--horizon", "10y"), "--horizon"),
        (("forecast", "--as-of", "2026-10-11T00:00:00Z", "--horizon", "soon"), "--horizon"),
        (("forecast", "--as-of", "2026-10-11T00:00:00Z", "--window", "1d"), "--window"),
        (("usage", "--from", "2026-10-02T00:00:00Z", "--to", "2026-10-01T00:00:00Z"), "--from"),
        (
            (
                "usage",
                "--from",
                "2026-10-01T00:00:00Z",
                "--to",
                "2026-10-02T00:00:00Z",
                "--namespace",
                "t/nope",
            ),
            "t/nope",
        ),
        (
            ("usage", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-02T00:00:00Z", "--tenant", "nobody"),
            "nobody",
        ),
        (
            ("usage", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-02T00:00:00Z", "--by", "cluster"),
            "--by",
        ),
        (
            ("usage", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-02T00:00:00Z", "--tier", "ssd"),
            "--tier",
        ),
        (
            ("usage", "--from", "2026-10-01T00:00:00Z", "--to", "2026-10-02T00:00:00Z", "--format", "xml"),
            "--format",
        ),
    ):
        code, out, err = run_cli(capsys, argv[0], "--store", store, *argv[1:])
        assert code == 2 and named in err and out == "", (argv, err)
    assert cli_json(capsys, "inspect", "--store", store) == before
    with pytest.raises(InputError, match="HOUSEKEEPING_CAPACITY_BUDGETS"):
        from housekeeping.core.settings import parse_capacity_budgets

        parse_capacity_budgets('{"t": {"ssd": 5}}')


def test_the_backtest_on_a_generated_store_with_a_history(tmp_path):
    """Ledgers spread over 60 days (`generate --history-days 60`): the ingest forecast made 14 days before the
    as-of, against what the record says producers added since, within 15 % over the store and 30 % per
    namespace (each namespace is a few dozen topics of random rollovers)."""
    from housekeeping.store.generate import GenerateOptions, generate_store

    store = generate_store(
        tmp_path / "store", GenerateOptions(topics=400, seed=7, entries_per_ledger=20, history_days=60)
    )
    as_of = 1_793_491_200_000  # the generator's reference, 2026-11-01
    rows = forecast(read_record(store, as_of), horizon_s=30 * 86_400, backtest_days=14)["backtest"]
    assert len(rows) == 7 and all(row["days"] == 14 and row["actualBytes"] > 0 for row in rows)
    assert all(abs(row["relativeError"]) < 0.30 for row in rows), rows
    predicted, actual = sum(r["predictedBytes"] for r in rows), sum(r["actualBytes"] for r in rows)
    assert abs(predicted / actual - 1) < 0.15


def test_the_options_are_parsed_once_for_every_caller_naming_the_option_as_it_calls_it():
    """The CLI's ``--horizon``, the console's ``horizon`` query parameter and the DAG's ``param horizon``."""
    from housekeeping.observe.capacity.forecast import ForecastOptions

    assert ForecastOptions.parse() == ForecastOptions(30 * 86_400, 28, 7)
    assert ForecastOptions.parse("2h", "3d", "1d") == ForecastOptions(7200, 3, 1)
    with pytest.raises(InputError, match=r"^--horizon 60 s is out of range"):
        ForecastOptions.parse("1m")
    with pytest.raises(InputError, match=r"^window 2 days is out of range"):
        ForecastOptions.parse(window="2d", name=lambda option: option)
    with pytest.raises(InputError, match=r"param backtest"):
        ForecastOptions.parse(backtest="soon", name=lambda option: f"param {option}")
    with pytest.raises(InputError, match=r"^--backtest 400 days is out of range"):
        ForecastOptions(backtest_days=400).check()
