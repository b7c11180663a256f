"""The guards on what a run was asked (housekeeping.engine.guards): a run that would apply or purge in the future
is refused, and a scheduled run that starts late (the one Airflow creates when a DAG is unpaused) previews; both at
the command line and in the DAG's first task, before anything changes."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.timeutil import format_ms, parse_as_of
from housekeeping.engine.guards import late_scheduled_start, refuse_future_as_of
from housekeeping.orchestration.dags import run_preview_reason

pytestmark = pytest.mark.unit

NOW = parse_as_of("2026-11-28T12:00:00Z")


def test_an_as_of_past_the_clock_and_its_skew_is_refused_naming_the_param():
    refuse_future_as_of(NOW, NOW, 300)
    refuse_future_as_of(NOW + 300_000, NOW, 300)  # within the skew
    with pytest.raises(InputError, match=r"--as-of 2026-11-28T12:05:00.001Z is later than the clock"):
        refuse_future_as_of(NOW + 300_001, NOW, 300, param="--as-of")


def test_a_scheduled_run_previews_only_when_it_starts_later_than_the_tolerance():
    slot = parse_as_of("2026-11-28T11:00:00Z")
    assert late_scheduled_start(slot, slot + 120_000, 120) is None
    reason = late_scheduled_start(slot, slot + 37 * 60_000, 120)
    assert reason and "started 2220 s after its slot 2026-11-28T11:00:00.000Z" in reason


def _dag_run(run_type: str, slot: datetime, started: datetime) -> SimpleNamespace:
    """A DAG run as a task sees it: its run type is the Task SDK's enum, as the execution API sends it."""
    from airflow.sdk.api.datamodels._generated import DagRunType

    return SimpleNamespace(run_type=DagRunType(run_type), run_after=slot, start_date=started)


@pytest.mark.parametrize(
    "run_type,late_minutes,dry_run,previews",
    [
        ("scheduled", 37, False, True),  # Airflow's run at unpause, 37 minutes after its slot
        ("scheduled", 0, False, False),  # on time: it applies
        ("manual", 37, False, False),  # a manual run is what its form says
        ("backfill", 600, False, False),  # a backfill replays past dates on purpose
        ("scheduled", 37, True, False),  # already a dry run: nothing to say
    ],
)
def test_the_dag_previews_a_late_scheduled_run_and_nothing_else(run_type, late_minutes, dry_run, previews):
    slot = datetime(2026, 11, 28, 11, tzinfo=UTC)
    context = {"dag_run": _dag_run(run_type, slot, slot + timedelta(minutes=late_minutes, seconds=5))}
    assert (run_preview_reason({"dry_run": dry_run}, context) is not None) is previews


def test_the_tolerance_is_a_setting(monkeypatch):
    slot = datetime(2026, 11, 28, 11, tzinfo=UTC)
    context = {"dag_run": _dag_run("scheduled", slot, slot + timedelta(minutes=5))}
    assert run_preview_reason({}, context) is not None
    monkeypatch.setenv("HOUSEKEEPING_SCHEDULED_START_TOLERANCE_SECONDS", "600")
    assert run_preview_reason({}, context) is None
    monkeypatch.setenv("HOUSEKEEPING_SCHEDULED_START_TOLERANCE_SECONDS", "-1")
    with pytest.raises(InputError, match="HOUSEKEEPING_SCHEDULED_START_TOLERANCE_SECONDS must be >= 0"):
        run_preview_reason({}, context)


def test_the_cli_refuses_to_apply_or_purge_in_the_future_and_changes_nothing(tmp_path, capsys):
    from tests.conftest import run_cli

    store = str(tmp_path / "store")
    code, _, err = run_cli(capsys, "generate", "--store", store, "--topics", "3", "--seed", "1")
    assert code == 0, err
    tomorrow = format_ms(int(time.time() * 1000) + 86_400_000)
    _, before, _ = run_cli(capsys, "inspect", "--store", store)
    for argv in (["apply", "trim"], ["purge"], ["scrub", "--repair"]):
        code, _, err = run_cli(capsys, *argv, "--store", store, "--as-of", tomorrow)
        assert code == 2 and "--as-of" in err and "later than the clock" in err, (argv, err)
    _, after, _ = run_cli(capsys, "inspect", "--store", store)
    assert after == before and not (tmp_path / "store" / "runs").exists()
