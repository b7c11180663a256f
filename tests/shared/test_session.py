"""The one SparkSession builder (spark_apps/shared/session.py): a classic session's shuffle partitions are the
application's configuration when it sets them, else the project's default; a Connect launch's own SQL settings
(what its step's operator conf passes) are checked before they are set."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from housekeeping.core.errors import InputError
from housekeeping.core.spark_conf import CONNECT_SQL_CONF_ENV
from spark_apps.shared.session import (
    DEFAULT_SHUFFLE_PARTITIONS,
    SHUFFLE_PARTITIONS,
    SIMPLE_NAME_CLASSES,
    connect_sql_conf,
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


@pytest.mark.spark
def test_the_classes_pyspark_names_simply_are_imported_by_name_into_the_sessions_jvm_view(spark):
    """Each is a single import of the JVM view PySpark's calls go through (py4j finds it without trying the packages
    the gateway imports whole), and its simple name resolves to its class."""
    from spark_apps.shared.session import get_spark

    context = get_spark("housekeeping-tests", "local[2]").sparkContext
    view = context._gateway.java_gateway_server.getGateway().getDefaultJVMView()
    imported = dict(view.getSingleImportsMap())
    for name in SIMPLE_NAME_CLASSES:
        simple = name.rsplit(".", 1)[1]
        assert imported.get(simple) == name
        assert getattr(context._jvm, simple)._fqn == name


@pytest.mark.unit
def test_a_connect_launch_reads_its_sql_settings_and_refuses_anything_else_naming_the_variable(monkeypatch):
    monkeypatch.delenv(CONNECT_SQL_CONF_ENV, raising=False)
    assert connect_sql_conf() == {}
    monkeypatch.setenv(CONNECT_SQL_CONF_ENV, '{"spark.sql.shuffle.partitions": 3}')
    assert connect_sql_conf() == {"spark.sql.shuffle.partitions": "3"}
    for bad, named in (
        ("{not json", "is not JSON"),
        ('["spark.sql.shuffle.partitions"]', "must be a JSON object"),
        ('{"spark.executor.memory": "9g"}', "spark.executor.memory"),
    ):
        monkeypatch.setenv(CONNECT_SQL_CONF_ENV, bad)
        with pytest.raises(InputError) as refused:
            connect_sql_conf()
        assert CONNECT_SQL_CONF_ENV in str(refused.value) and named in str(refused.value)
