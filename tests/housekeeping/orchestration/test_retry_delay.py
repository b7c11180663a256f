"""HOUSEKEEPING_TASK_RETRY_DELAY_SECONDS: the first retry's delay of every housekeeping task, read when the DAG
files are parsed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from housekeeping.core.errors import InputError
from housekeeping.orchestration.dags import RETRY_DELAY, DagDefaults, task_retry_delay

pytestmark = pytest.mark.unit


def test_two_minutes_unless_set(monkeypatch):
    monkeypatch.delenv(RETRY_DELAY, raising=False)
    assert DagDefaults().retry_delay == timedelta(minutes=2)
    monkeypatch.setenv(RETRY_DELAY, "15")
    assert DagDefaults().retry_delay == timedelta(seconds=15)


@pytest.mark.parametrize("raw", ["0", "-5", "soon", "1.5"])
def test_a_bad_value_names_the_setting(monkeypatch, raw):
    monkeypatch.setenv(RETRY_DELAY, raw)
    with pytest.raises(InputError, match=f"HOUSEKEEPING_TASK_RETRY_DELAY_SECONDS={raw!r}"):
        task_retry_delay()
