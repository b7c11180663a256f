"""The one SparkSession builder (spark_apps/shared/session.py): a classic session's shuffle partitions are the
application's configuration when it sets them, else the project's default."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spark_apps.shared.session import (
    DEFAULT_SHUFFLE_PARTITIONS,
    SHUFFLE_PARTITIONS,
    default_shuffle_partitions,
)


class _Conf(dict):
    def contains(self, key: str) -> bool:
        return key in self

    def set(self, key: str, value: str) -> None:
        self[key] = value


def _session(app_conf: dict) -> SimpleNamespace:
    return SimpleNamespace(
        sparkContext=SimpleNamespace(getConf=lambda: _Conf(app_conf)), conf=_Conf({SHUFFLE_PARTITIONS: "200"})
    )


@pytest.mark.unit
def test_a_session_without_configured_shuffle_partitions_gets_the_default():
    assert (
        default_shuffle_partitions(_session({})).conf[SHUFFLE_PARTITIONS] == DEFAULT_SHUFFLE_PARTITIONS == "8"
    )


@pytest.mark.unit
def test_configured_shuffle_partitions_are_left_as_configured():
    session = _session({SHUFFLE_PARTITIONS: "64"})
    # The session's value is left untouched (here Spark's own, standing for what the application configured).
    assert default_shuffle_partitions(session).conf[SHUFFLE_PARTITIONS] == "200"


@pytest.mark.spark
def test_the_suites_spark_defaults_reach_the_session_through_get_spark(spark):
    """tests/spark-conf sets one shuffle partition; getting the session again (as every in-process run does) keeps
    it rather than resetting the project's default."""
    from spark_apps.shared.session import get_spark

    assert get_spark("housekeeping-tests", "local[2]").conf.get(SHUFFLE_PARTITIONS) == "1"
